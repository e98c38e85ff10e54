-- rw_write_release.lua: drop one write hold (Redisson RWriteLock unlock).
-- rw_common.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  "<tag>", the prefix of every holder's timeout keys
-- ARGV[1]  unlock message, "1" (Redisson's READ_UNLOCK_MESSAGE: every waiter retries)
-- ARGV[2]  lease in milliseconds, re-applied while write holds remain
-- ARGV[3]  writer holder id "<uuid>:<n>:write"
--
-- Returns nil when the writer does not hold the lock, 0 when it still does, 1 when its
-- last write hold went and its own read holds (a downgrade) keep the lock in read mode,
-- 2 when the lock was deleted. ARGV[1] is published in both last cases: readers may
-- enter now.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[3]))
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or not count then
    return nil
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
local result = 2
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = longest_read(KEYS[1], KEYS[3], nil)
    if longest > 0 then
        redis.call('hset', KEYS[1], 'mode', 'read')
        redis.call('pexpire', KEYS[1], longest)
        result = 1
    end
end
if result == 2 then
    redis.call('del', KEYS[1])
end
publish(KEYS[2], ARGV[1])
return result
