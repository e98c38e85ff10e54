-- rw_read_acquire.lua: take or re-enter the read lock of a read-write lock (Redisson
-- RReadWriteLock.readLock()). rw_common.lua is prepended.
--
-- KEYS[1]  lock name (HASH: mode, holder -> hold count)
-- KEYS[2]  this holder's timeout prefix "<tag>:<holder>:rwlock_timeout"
-- KEYS[3]  waiting writers "redlatch_rwlock_writers:{name}" (ZSET)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  reader holder id "<uuid>:<n>"
-- ARGV[3]  the same task's writer id "<uuid>:<n>:write" (a writer may also read)
--
-- Returns {status, value} like acquire.lua:
--   {1, 1}      granted, the holder's first read hold
--   {2, count}  granted, one more read hold (re-entry, or a writer downgrading)
--   {0, pttl}   refused: a writer holds it, or (for a new reader) a writer is waiting;
--               pttl = at most how long to wait without a message
--
-- Invariants: hold i of the holder gets the key KEYS[2]:i with the hold's lease; the
-- lock's own TTL is never shortened; a holder that already reads, or holds the write
-- lock, is never refused (refusing it would deadlock it against a waiting writer).
local mode = redis.call('hget', KEYS[1], 'mode')
local mine = mode and (redis.call('hexists', KEYS[1], ARGV[2]) == 1
    or redis.call('hexists', KEYS[1], ARGV[3]) == 1)
if mode == 'write' and not mine then
    return {0, redis.call('pttl', KEYS[1])}
end
if not mine then
    local wait = writer_waiting(KEYS[3])
    if wait ~= nil then
        local left = redis.call('pttl', KEYS[1])
        if left > 0 and left < wait then
            wait = left
        end
        return {0, wait}
    end
end
if not mode then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. count, 1, 'px', ARGV[1])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
if count == 1 then
    return {1, 1}
end
return {2, count}
