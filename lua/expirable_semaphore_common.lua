-- expirable_semaphore_common.lua: shared prelude of the expirable_semaphore_*.lua scripts (prepended at build time,
-- never run on its own). Defines expirable_semaphore_now_ms() and reclaim().
--
-- Layout (Redisson RPermitExpirableSemaphore): the string counter of available permits
-- at the name, and the ZSET "<tag>:timeout" of acquired permits: permit id (16 raw
-- bytes) -> the instant (ms since the epoch) it expires. A permit without lease in
-- Redisson has the score 922337203685477; ours are renewed by their holder's watchdog.

local function expirable_semaphore_now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Gives the permits whose time ran out back to the counter and wakes the waiters.
local function reclaim(counter, timeouts, channel, now)
    local expired = redis.call('zrangebyscore', timeouts, 0, now)
    if #expired == 0 then
        return
    end
    redis.call('zrem', timeouts, unpack(expired))
    local value = redis.call('incrby', counter, #expired)
    if value > 0 then
        publish(channel, value)
    end
end
