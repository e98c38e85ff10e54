-- sem_release.lua: give permits back to a semaphore and wake its waiters (Redisson
-- RSemaphore release).
--
-- KEYS[1]  the semaphore's counter
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  permits given back (> 0)
--
-- Returns the new number of available permits, also published on the channel.
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(PUBLISH, KEYS[2], value)
return value
