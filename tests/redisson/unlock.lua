-- Redisson RedissonLock.unlockInnerAsync (current master: unlock latch, publish command
-- and latch timeout), as the Java client sends it, for interop tests.
-- KEYS[1] lock name; KEYS[2] "redisson_lock__channel:{name}";
-- KEYS[3] "redisson_unlock_latch:{name}:<request id>".
-- ARGV[1] "0" (unlock message); ARGV[2] lease ms; ARGV[3] "<uuid>:<threadId>";
-- ARGV[4] publish command ("publish", or "spublish" on a sharded cluster);
-- ARGV[5] latch timeout ms ((timeout + retryInterval) * retryAttempts).
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
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return 1;
end;
