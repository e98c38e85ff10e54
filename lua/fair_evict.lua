-- fair_evict.lua: shared prelude of the fair_*.lua scripts (prepended at build time,
-- never run on its own). Defines now_ms() and evict_stale().
--
-- Queue layout (Redisson RFairLock): KEYS[2] = LIST "redisson_lock_queue:{name}" of
-- waiting holder ids in arrival order, KEYS[3] = ZSET "redisson_lock_timeout:{name}"
-- holder -> deadline in ms since the epoch (Redis server clock, so all clients agree).
--
-- Invariants: a waiter whose deadline has passed is removed from both keys; a list entry
-- without a deadline (left by a broken client) is removed as stale as well, so a dead
-- waiter can never block the queue for longer than its deadline.
local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function evict_stale(queue, timeouts, now)
    local stale = redis.call('zrangebyscore', timeouts, '-inf', now)
    for i = 1, #stale do
        redis.call('zrem', timeouts, stale[i])
        redis.call('lrem', queue, 0, stale[i])
    end
    local evicted = #stale
    while true do
        local head = redis.call('lindex', queue, 0)
        if head == false or redis.call('zscore', timeouts, head) ~= false then
            return evicted
        end
        redis.call('lpop', queue)
        evicted = evicted + 1
    end
end

-- Wake whoever may take a free lock now: the queue head on its own channel, or, with
-- no queue, waiters of the plain channel (non-fair waiters of the same name).
local function wake_next(queue, channel, message)
    local head = redis.call('lindex', queue, 0)
    if head ~= false then
        redis.call('publish', channel .. ':' .. head, message)
    else
        redis.call('publish', channel, message)
    end
end
