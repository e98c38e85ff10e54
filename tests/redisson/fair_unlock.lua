-- Redisson RedissonFairLock.unlockInnerAsync (current master), as the Java client sends
-- it, for interop tests.
-- KEYS[1] lock name; KEYS[2] "redisson_lock_queue:{name}";
-- KEYS[3] "redisson_lock_timeout:{name}"; KEYS[4] "redisson_lock__channel:{name}";
-- KEYS[5] "redisson_unlock_latch:{name}:<request id>".
-- ARGV[1] "0" (unlock message); ARGV[2] lease ms; ARGV[3] "<uuid>:<threadId>";
-- ARGV[4] the Java client's System.currentTimeMillis(); ARGV[5] publish command;
-- ARGV[6] latch timeout ms.
-- Returns nil (not held), 0 (still held) or 1 (released, queue head woken).
local val = redis.call('get', KEYS[5]);
if val ~= false then
    return tonumber(val);
end;
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
    if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;
if (redis.call('exists', KEYS[1]) == 0) then
    local nextThreadId = redis.call('lindex', KEYS[2], 0);
    if nextThreadId ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
    end;
    redis.call('set', KEYS[5], 1, 'px', ARGV[6]);
    return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[5], 0, 'px', ARGV[6]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[6]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
end;
return 1;
