-- simple_release.lua: give back a simple lock (compare-and-delete, the reference
-- clients' release: redsync's deleteScript, node-redlock's and redis-py's). Also drops a
-- hold its client declared lost: the same test, the same delete.
--
-- KEYS[1]  lock name
-- ARGV[1]  holder token
-- ARGV[2]  the lock's wake channel "redisson_lock__channel:{name}:redlatch-simple"
--          (same hash slot as the name; not a key)
--
-- Returns 1 if the key held the token and was deleted, 0 if not (expired, released,
-- force-unlocked, or another token holds it now: left alone). A key of another type
-- fails with WRONGTYPE (GET's own error).
--
-- Invariants: only the token's own key is deleted. A deletion publishes "0" on the
-- wake channel when anyone listens there (only redlatch's waiters do: the reference
-- clients poll and listen on nothing), so a redlatch waiter tries at once instead of
-- at its next poll; with nobody listening nothing is published (on a cluster a classic
-- PUBLISH would cross the cluster bus).
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    if redis.call('pubsub', NUMSUB, ARGV[2])[2] > 0 then
        redis.call(PUBLISH, ARGV[2], '0')
    end
    return 1
end
return 0
