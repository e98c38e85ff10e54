-- rw_force_release.lua: delete a read-write lock in the given mode, whoever holds it,
-- and wake its waiters (Redisson RReadLock/RWriteLock forceUnlock).
--
-- KEYS[1]  lock name
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- ARGV[1]  the mode to break: 'read' or 'write'
-- ARGV[2]  message: "0" for read (Redisson's UNLOCK_MESSAGE), "1" for write
--
-- Returns 1 if the lock was in that mode and was deleted, 0 otherwise. A key of another
-- type fails with WRONGTYPE.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    publish(KEYS[2], ARGV[2])
    return 1
end
return 0
