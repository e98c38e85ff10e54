-- force_release.lua: delete a lock whoever holds it and wake its waiters.
--
-- KEYS[1]  lock name
-- ARGV[1]  unlock channel "redisson_lock__channel:{name}" (not a key: see release.lua)
-- ARGV[2]  unlock message, "0"
--
-- Returns 1 if a lock was deleted (and the message published), 0 if there was none.
-- A key of another type is left alone and fails with WRONGTYPE.
if redis.call('type', KEYS[1]).ok == 'hash' then
    redis.call('del', KEYS[1])
    redis.call(PUBLISH, ARGV[1], ARGV[2])
    return 1
end
if redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return 0
