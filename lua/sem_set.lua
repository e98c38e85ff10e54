-- sem_set.lua: set up or change a semaphore's permits (Redisson RSemaphore setPermits,
-- trySetPermits, addPermits), waking its waiters.
--
-- KEYS[1]  the semaphore's counter
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  how: 'set' (whatever is there), 'try' (only if the semaphore does not exist)
--          or 'add' (add ARGV[2], which may be negative, to what is there, 0 if nothing)
-- ARGV[2]  permits
--
-- Returns 1 when the counter was written (and the new value published), 0 when 'try'
-- found one already.
local value = redis.call('get', KEYS[1])
local new = tonumber(ARGV[2])
if ARGV[1] == 'try' and value ~= false then
    return 0
end
if ARGV[1] == 'add' then
    new = (tonumber(value) or 0) + new
end
redis.call('set', KEYS[1], new)
redis.call(PUBLISH, KEYS[2], new)
return 1
