-- xsem_acquire.lua: take one permit of an expirable semaphore under an id (Redisson
-- RPermitExpirableSemaphore tryAcquire). xsem_common.lua is prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout" (ZSET id -> expiry ms)
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1]  lease in milliseconds: the permit expires then unless renewed
-- ARGV[2]  the permit's id (16 raw bytes)
--
-- Returns {1, 0} when the permit was taken; {0, ms} when none is available, ms = time
-- until the first acquired permit expires (-1: none will on its own).
-- Invariants: expired permits are reclaimed first; the counter never goes below 0 by
-- an acquisition.
local now = xsem_now_ms()
reclaim(KEYS[1], KEYS[2], KEYS[3], now)
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and tonumber(first[2]) < 922337203685477 then
    return {0, math.max(1, tonumber(first[2]) - now)}
end
return {0, -1}
