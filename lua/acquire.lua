-- acquire.lua: take or re-enter a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock name: a HASH holder -> hold count, PEXPIRE = lease
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder id "<client uuid>:<n>"
--
-- Returns an array {status, value}:
--   {1, 1}      acquired fresh (the key did not exist)
--   {2, count}  re-entered: the holder already held it, count is the new hold count
--   {0, pttl}   held by someone else; pttl = ms the current holder still has (-1: no expiry)
--
-- Invariants: the key is only ever created together with its PEXPIRE, so a crashed
-- holder's lock always expires; another holder's hash is never modified; a re-entry
-- never shortens the lease (an inner short lease must not cut an outer long one).
-- A key of another type fails with WRONGTYPE (reported to the caller, never overwritten).
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
    return {2, count}
end
return {0, redis.call('pttl', KEYS[1])}
