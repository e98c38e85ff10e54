-- fenced_acquire.lua: acquire.lua plus a fencing token (Redisson RFencedLock layout).
--
-- KEYS[1]  lock name (HASH holder -> hold count)
-- KEYS[2]  token counter "redisson_lock_token:{name}" (integer, no expiry)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder id
--
-- Returns {status, value, token}:
--   {1, 1, token}      acquired fresh; token = INCR of the counter
--   {2, count, token}  re-entered; token = INCR of the counter (tokens only ever grow)
--   {0, pttl, 0}       held by someone else
local status
local value
if redis.call('exists', KEYS[1]) == 0 then
    status = 1
    value = redis.call('hincrby', KEYS[1], ARGV[2], 1)
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    status = 2
    value = redis.call('hincrby', KEYS[1], ARGV[2], 1)
else
    return {0, redis.call('pttl', KEYS[1]), 0}
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
return {status, value, redis.call('incr', KEYS[2])}
