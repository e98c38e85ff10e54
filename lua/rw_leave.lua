-- rw_leave.lua: a waiting writer gives up: remove its intent and, if it was there, wake
-- the readers it was keeping out.
--
-- KEYS[1]  waiting writers "redlatch_rwlock_writers:{name}" (ZSET)
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- ARGV[1]  writer holder id
-- ARGV[2]  message, "1"
--
-- Returns 1 if the intent was removed, 0 if there was none.
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
    publish(KEYS[2], ARGV[2])
    return 1
end
return 0
