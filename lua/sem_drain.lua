-- sem_drain.lua: take every available permit of a semaphore at once (Redisson
-- RSemaphore drainPermits).
--
-- KEYS[1]  the semaphore's counter
--
-- Returns the permits that were available (0 when there is no counter, which stays
-- absent); the counter is then 0 (SET: a time to live is dropped, as in Redisson).
-- Nothing is published: no waiter can proceed with fewer permits.
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(value)
