-- expirable_semaphore_acquire.lua: take permits of an expirable semaphore, one per id, all or none
-- (Redisson RPermitExpirableSemaphore tryAcquire(permits, ..)). expirable_semaphore_common.lua is
-- prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout" (ZSET id -> expiry ms)
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1]  lease in milliseconds: each permit expires then unless renewed
-- ARGV[2..]  the permits' ids (16 raw bytes each, at least one, all distinct)
--
-- Returns {1, 0} when every permit was taken; {0, ms} when fewer are available (none is
-- taken), ms = time until the first acquired permit expires (-1: none will on its own).
-- Invariants: expired permits are reclaimed first; the counter never goes below 0 by
-- an acquisition; when the counter has a time to live, the acquired set gets the same
-- one (as Redisson 4.7 does), so both go together.
local now = expirable_semaphore_now_ms()
reclaim(KEYS[1], KEYS[2], KEYS[3], now)
local wanted = #ARGV - 1
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= wanted then
    redis.call('decrby', KEYS[1], wanted)
    for i = 2, #ARGV do
        redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and tonumber(first[2]) < 922337203685477 then
    return {0, math.max(1, tonumber(first[2]) - now)}
end
return {0, -1}
