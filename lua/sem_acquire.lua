-- sem_acquire.lua: take permits of a semaphore if enough are available (Redisson
-- RSemaphore tryAcquire).
--
-- KEYS[1]  the semaphore: a string counter of available permits at its name
-- ARGV[1]  permits wanted (> 0)
--
-- Returns 1 if they were taken (the counter decreased by ARGV[1]), 0 if fewer are
-- available (or the semaphore was never set up: no counter is no permit).
-- A key of another type fails with WRONGTYPE; a counter that is not a number fails.
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
