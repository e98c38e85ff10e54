-- expirable_semaphore_available.lua: the available permits of an expirable semaphore, after
-- reclaiming the expired ones (Redisson availablePermits). expirable_semaphore_common.lua is prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout"
-- KEYS[3]  channel "redisson_sc:{name}"
--
-- Returns {available, acquired}: the counter (0 if absent) and the acquired permits.
reclaim(KEYS[1], KEYS[2], KEYS[3], expirable_semaphore_now_ms())
local value = redis.call('get', KEYS[1])
return {tonumber(value) or 0, redis.call('zcard', KEYS[2])}
