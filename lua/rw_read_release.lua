-- rw_read_release.lua: drop one read hold (Redisson RReadLock unlock).
-- rw_common.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  this holder's timeout prefix "<tag>:<holder>:rwlock_timeout"
-- KEYS[4]  "<tag>", the prefix of every holder's timeout keys
-- ARGV[1]  unlock message, "0" (Redisson's UNLOCK_MESSAGE)
-- ARGV[2]  reader holder id
--
-- Returns nil when the holder holds no read lock (expired, force-unlocked), 0 when it
-- still holds one, 1 when this was its last read hold (the lock may still be held by
-- others), 2 when the lock was freed: deleted, and ARGV[1] published.
--
-- Invariants: the hold's own timeout key goes with it; while read holds remain, the
-- lock's TTL follows the longest of theirs (fit_to_reads: a dead reader's hold lapses
-- on its own lease); a writer's hold (a downgrade) is never cut short.
local count = redis.call('hget', KEYS[1], ARGV[2])
local mode = redis.call('hget', KEYS[1], 'mode')
if not count or not mode then
    return nil
end
count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count <= 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
local mine = 1
if count > 0 then
    mine = 0
end
if redis.call('hlen', KEYS[1]) > 1 then
    if mode == 'write' then
        return mine
    end
    if fit_to_reads(KEYS[1], KEYS[4]) then
        return mine
    end
end
redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
return 2
