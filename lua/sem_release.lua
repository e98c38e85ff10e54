-- sem_release.lua: give permits back to a semaphore and wake its waiters (Redisson
-- RSemaphore release, and releaseIfExists since Redisson 4.0).
--
-- KEYS[1]  the semaphore's counter
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  permits given back (> 0)
-- ARGV[2]  'any': create the counter if it is missing (release);
--          'exists': give nothing back when there is no counter (releaseIfExists)
--
-- Returns the new number of available permits, also published on the channel; nil
-- ('exists' only) when there was no counter: nothing written, nothing published.
if ARGV[2] == 'exists' and redis.call('exists', KEYS[1]) == 0 then
    return false
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
publish(KEYS[2], value)
return value
