-- Redisson RedissonFairLock.acquireFailedAsync (current master), as the Java client
-- sends it when tryLock(waitTime) gives up, for interop tests.
-- KEYS[1] "redisson_lock_queue:{name}"; KEYS[2] "redisson_lock_timeout:{name}".
-- ARGV[1] "<uuid>:<threadId>"; ARGV[2] wait ms (tryLock's waitTime when > 0, else
-- threadWaitTime).
local queue = redis.call('lrange', KEYS[1], 0, -1);
local i = 1;
while i <= #queue and queue[i] ~= ARGV[1] do
    i = i + 1;
end;
i = i + 1;
while i <= #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);
    i = i + 1;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
redis.call('lrem', KEYS[1], 0, ARGV[1]);
