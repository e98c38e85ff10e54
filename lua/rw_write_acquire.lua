-- rw_write_acquire.lua: take or re-enter the write lock of a read-write lock (Redisson
-- RReadWriteLock.writeLock()). rw_common.lua is prepended.
--
-- KEYS[1]  lock name (HASH: mode, holder -> hold count)
-- KEYS[2]  waiting writers "redlatch_rwlock_writers:{name}" (ZSET)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  writer holder id "<uuid>:<n>:write"
-- ARGV[3]  intent in ms: when refused, record this writer as waiting for that long
--          (writer preference), "0" not to
--
-- Returns {status, value} like acquire.lua: {1, 1} granted fresh, {2, count} re-entered,
-- {0, pttl} refused (readers or another writer hold it).
--
-- Invariants: a granted writer's intent is removed; an intent never outlives its lapse
-- time (the ZSET's TTL is at least its latest entry's); the lock's TTL is never
-- shortened by a re-entry.
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('zrem', KEYS[2], ARGV[2])
    return {1, 1}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {2, count}
end
local intent = tonumber(ARGV[3])
if intent > 0 then
    redis.call('zadd', KEYS[2], rw_now_ms() + intent, ARGV[2])
    if redis.call('pttl', KEYS[2]) < intent then
        redis.call('pexpire', KEYS[2], intent)
    end
end
return {0, redis.call('pttl', KEYS[1])}
