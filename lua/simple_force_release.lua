-- simple_force_release.lua: delete a simple lock whoever holds it (force-unlock).
--
-- KEYS[1]  lock name
--
-- Returns 1 if a lock was deleted, 0 if there was none. A key of another type fails
-- with WRONGTYPE (STRLEN's own error) and is left alone. Nothing is published: nobody
-- listens for this kind.
redis.call('strlen', KEYS[1])
return redis.call('del', KEYS[1])
