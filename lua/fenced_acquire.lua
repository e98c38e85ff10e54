-- fenced_acquire.lua: acquire.lua plus a fencing token (Redisson RFencedLock layout).
--
-- KEYS[1]  lock name (HASH holder -> hold count)
-- KEYS[2]  token counter "redisson_lock_token:{name}" (integer, no expiry)
-- KEYS[3]  optional, Redlock only: the counter's epoch "redlatch_token_epoch:{name}",
--          this server's run_id when the counter was last written back here
--          (fenced_sync.lua). Single master: absent, and the script is Redisson's.
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder id
--
-- Returns {status, value, token} without KEYS[3], {status, value, token, current} with it:
--   {1, 1, token}      acquired fresh; token = INCR of the counter
--   {2, count, token}  re-entered; token = INCR of the counter (tokens only ever grow)
--   {0, pttl, 0}       held by someone else (also with KEYS[3])
--   current            1 if the epoch equals this server's run_id (it has not restarted
--                      since the counter was last written back here), else 0
local status
local value
if redis.call('exists', KEYS[1]) == 0 then
    status = 1
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    status = 2
else
    return {0, redis.call('pttl', KEYS[1]), 0}
end
-- Read before any write: a server whose ACL refuses INFO fails the call unchanged.
local current
if KEYS[3] then
    local run_id = string.match(redis.call('info', 'server'), 'run_id:(%w+)')
    current = (run_id ~= nil and redis.call('get', KEYS[3]) == run_id) and 1 or 0
end
value = redis.call('hincrby', KEYS[1], ARGV[2], 1)
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
return {status, value, redis.call('incr', KEYS[2]), current}
