-- simple_release.lua: give back a simple lock (compare-and-delete, the reference
-- clients' release: redsync's deleteScript, node-redlock's and redis-py's). Also drops a
-- hold its client declared lost: the same test, the same delete.
--
-- KEYS[1]  lock name
-- ARGV[1]  holder token
--
-- Returns 1 if the key held the token and was deleted, 0 if not (expired, released,
-- force-unlocked, or another token holds it now: left alone). A key of another type
-- fails with WRONGTYPE (GET's own error).
--
-- Invariant: only the token's own key is deleted; nothing is published (the
-- reference clients' waiters poll, and so do redlatch's for this kind).
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
