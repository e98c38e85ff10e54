-- Redisson 3.17+ RedissonLock.unlockInnerAsync (with the unlock latch), for interop tests.
-- KEYS[1] lock name; KEYS[2] "redisson_lock__channel:{name}";
-- KEYS[3] "redisson_unlock_latch:{name}:<request id>".
-- ARGV[1] "0" (unlock message); ARGV[2] lease ms; ARGV[3] "<uuid>:<threadId>";
-- ARGV[4] latch timeout ms.
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[4]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call('publish', KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[4]);
    return 1;
end;
