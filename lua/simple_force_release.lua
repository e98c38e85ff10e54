-- simple_force_release.lua: delete a simple lock whoever holds it (force-unlock).
--
-- KEYS[1]  lock name
-- ARGV[1]  the lock's wake channel (simple_release.lua)
--
-- Returns 1 if a lock was deleted, 0 if there was none. A key of another type fails
-- with WRONGTYPE (STRLEN's own error) and is left alone. A deletion wakes redlatch's
-- waiters as a release does (simple_release.lua).
redis.call('strlen', KEYS[1])
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
if redis.call('pubsub', NUMSUB, ARGV[1])[2] > 0 then
    redis.call(PUBLISH, ARGV[1], '0')
end
return 1
