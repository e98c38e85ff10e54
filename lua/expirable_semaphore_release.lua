-- expirable_semaphore_release.lua: give back one permit by id (Redisson RPermitExpirableSemaphore
-- tryRelease). expirable_semaphore_common.lua is prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout"
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1]  the permit's id (16 raw bytes)
--
-- Returns 1 if the permit was held and is given back (the new count is published), 0
-- if it was not held: released already, or expired (then it is reclaimed, not lost).
local now = expirable_semaphore_now_ms()
local expires = redis.call('zscore', KEYS[2], ARGV[1])
if expires == false then
    return 0
end
redis.call('zrem', KEYS[2], ARGV[1])
local value = redis.call('incrby', KEYS[1], 1)
publish(KEYS[3], value)
if tonumber(expires) <= now then
    return 0
end
return 1
