-- spin_release.lua: drop one hold of a spin lock (Redisson RedissonSpinLock's unlock).
-- The layout is the reentrant lock's (HASH holder -> hold count, PEXPIRE = lease), but
-- nothing is published: spin waiters never subscribe, they retry after a back-off,
-- which is the point of the spin lock (no pub/sub traffic on a large cluster).
--
-- KEYS[1]  lock name
-- ARGV[1]  lease in milliseconds, re-applied while holds remain
-- ARGV[2]  holder id
--
-- Returns:
--   nil  the holder does not hold the lock (lease expired, force-unlocked, never held)
--   0    one hold dropped, the holder still holds it (the lease is extended to ARGV[1]
--        if shorter, never shortened)
--   1    last hold dropped: the key is deleted
--
-- Invariants: another holder's field is never touched; the key is deleted with its last
-- hold (no field left at 0). Redisson also sets a short-lived "unlock latch" key so a
-- retried unlock answers the same; redlatch does not retry a release that landed (a
-- repeated release finding the hold gone counts as released, release.rs).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
    return 0
end
redis.call('del', KEYS[1])
return 1
