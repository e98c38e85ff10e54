-- expirable_semaphore_release_many.lua: give back several permits by id, all or none (Redisson
-- RPermitExpirableSemaphore tryRelease(List) / release(List)). expirable_semaphore_common.lua is
-- prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout"
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1..]  the permits' ids (16 raw bytes each, at least one, all distinct)
--
-- Returns the number of permits given back: all of them, or 0 when any id is not held
-- (released already, never acquired, or expired). Then nothing at all is changed, as
-- in Redisson since 3.24. On success the expired permits are reclaimed too, and the
-- number given back is published (Redisson's message: Java waiters wake that many).
local now = expirable_semaphore_now_ms()
for i = 1, #ARGV do
    local expires = redis.call('zscore', KEYS[2], ARGV[i])
    if expires == false or tonumber(expires) <= now then
        return 0
    end
end
reclaim(KEYS[1], KEYS[2], KEYS[3], now)
local removed = redis.call('zrem', KEYS[2], unpack(ARGV))
redis.call('incrby', KEYS[1], removed)
publish(KEYS[3], removed)
return removed
