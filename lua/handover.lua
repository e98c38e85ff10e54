-- handover.lua: the last hold of a plain lock passes straight to the next waiter of
-- the same client, in one call, when no other client waits for it.
--
-- KEYS[1]  lock name (HASH holder -> hold count)
-- KEYS[2]  unlock channel "redisson_lock__channel:{name}"
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  the releasing holder's lease in ms (re-applied if it still holds)
-- ARGV[3]  releasing holder id
-- ARGV[4]  receiving holder id
-- ARGV[5]  the receiver's lease in ms
--
-- Returns:
--   -1  the releasing holder does not hold the lock (nothing changed)
--    0  one hold dropped, the releaser still holds it (as release.lua)
--    1  released and "0" published, as release.lua: another client listens on the
--       channel (PUBSUB NUMSUB > 1), so the lock is not handed over past its waiters
--    2  handed over: the receiver holds the lock (count 1, its lease); nothing is
--       published, because the lock was never free
--
-- Invariants: the lock passes from one holder to the other inside one script, so no
-- one can hold it in between; other clients' waiters are never bypassed (NUMSUB counts
-- subscribed connections, and this client's shared connection is one).
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return -1
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then redis.call('pexpire', KEYS[1], ARGV[2]) end
    return 0
end
if redis.call('pubsub', 'numsub', KEYS[2])[2] > 1 then
    redis.call('del', KEYS[1])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
redis.call('del', KEYS[1])
redis.call('hincrby', KEYS[1], ARGV[4], 1)
redis.call('pexpire', KEYS[1], ARGV[5])
return 2
