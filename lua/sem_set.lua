-- sem_set.lua: set up or change a semaphore's permits (Redisson RSemaphore
-- trySetPermits, trySetPermits with a time to live, addPermits; and RSemaphore's old
-- setPermits), waking its waiters.
--
-- KEYS[1]  the semaphore's counter
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  how: 'set' (whatever is there), 'try' (only if the semaphore does not exist)
--          or 'add' (add ARGV[2], which may be negative, to what is there, 0 if nothing)
-- ARGV[2]  permits
-- ARGV[3]  'try' only, optional: the counter's time to live in milliseconds (> 0)
--
-- Returns 1 when the counter was written (and the new value published), 0 when 'try'
-- found one already. 'set' and 'add' write a plain SET, so they drop a time to live,
-- as Redisson's addPermits does.
local value = redis.call('get', KEYS[1])
local new = tonumber(ARGV[2])
if ARGV[1] == 'try' and value ~= false then
    return 0
end
if ARGV[1] == 'add' then
    new = (tonumber(value) or 0) + new
end
if ARGV[1] == 'try' and ARGV[3] ~= nil then
    redis.call('set', KEYS[1], new, 'px', ARGV[3])
else
    redis.call('set', KEYS[1], new)
end
publish(KEYS[2], new)
return 1
