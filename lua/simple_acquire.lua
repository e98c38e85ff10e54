-- simple_acquire.lua: take the simple lock, the single-key lock of Redis's "Distributed
-- Locks with Redis" page and of the Redlock reference clients (redsync, node-redlock,
-- redis-py's Lock, rslock): `SET name token NX PX lease`. The key is a STRING whose
-- value is the holder's token; whoever wrote another value holds it.
--
-- KEYS[1]  lock name
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder token (redlatch's holder id; the other clients' random values)
--
-- Returns {status, value}, as acquire.lua:
--   {1, 0}     granted: the key was created with the token and the lease
--   {0, pttl}  held by another token for pttl ms more (-1: a string without expiry,
--              which nothing frees: reported as such by the client)
--   {3, 0}     the key is of another type (a Redisson-layout lock, a hash): WRONGTYPE
--   {4, 0}     the token holds it already: the lock is not reentrant (a second
--              acquisition by the same holder is refused, never granted twice)
--
-- Invariants: the script writes only with SET NX, exactly the reference clients'
-- acquire, so their locks and ours exclude each other on the same name; an existing
-- key is never changed (its value, its expiry).
if redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
    return {1, 0}
end
if redis.call('type', KEYS[1]).ok ~= 'string' then
    return {3, 0}
end
if redis.call('get', KEYS[1]) == ARGV[2] then
    return {4, 0}
end
return {0, redis.call('pttl', KEYS[1])}
