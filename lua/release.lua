-- release.lua: drop one hold of a reentrant lock (Redisson RLock unlock), and optionally
-- pass the lock straight to a waiting task of the same client (a local hand-over).
-- pass_on.lua is prepended: a full release hands the lock to the longest-waiting
-- redlatch client, or wakes everyone when a Redisson waiter listens.
--
-- KEYS[1]  lock name (HASH holder -> hold count)
-- KEYS[2]  waiter registry "redlatch_lock_waiters:{name}" (pass_on.lua)
-- ARGV[1]  unlock channel "redisson_lock__channel:{name}" (same hash slot as the name;
--          not a key, so on a cluster a slot being migrated never answers TRYAGAIN)
-- ARGV[2]  unlock message, "0"
-- ARGV[3]  lease in milliseconds, re-applied while holds remain
-- ARGV[4]  holder id
-- ARGV[5]  optional: the receiving holder id (a hand-over)
-- ARGV[6]  optional: the receiver's lease in milliseconds
-- ARGV[7]  optional: the receiver's ticket in the waiter registry, removed with the
--          hand-over (it holds the lock now; pass_on.lua must not pick it)
--
-- Returns:
--   nil  the holder does not hold the lock (lease expired, force-unlocked, never held)
--   0    one hold dropped, the holder still holds it (nothing is published; the lease
--        is extended to ARGV[2] if shorter, never shortened)
--   1    last hold dropped: the key is deleted and the lock passed on (pass_on.lua:
--        handed to the longest-waiting live redlatch waiter, or "0" published on the
--        shared channel when a non-redlatch waiter listens, or left free)
--   2    (only with a receiver) last hold dropped and the lock handed over: the
--        receiver holds it (count 1, its lease); nothing is published, the lock was
--        never free
--
-- The last hold is read with HGET and deleted with the key (no HINCRBY to 0): one call
-- fewer on the common path; hold counts are always >= 1, as Redisson keeps them.
-- Invariant of a hand-over: other clients' waiters are never bypassed. When another
-- client listens on the channel (PUBSUB NUMSUB > 1: this client's shared connection is
-- one), it is an ordinary release (1) and everyone competes.
local held = redis.call('hget', KEYS[1], ARGV[4])
if not held then
    return nil
end
if tonumber(held) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[4], -1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then redis.call('pexpire', KEYS[1], ARGV[3]) end
    return 0
end
-- The lock and "<registry>:handed" go in one DEL (a hand-over that ended needs no claim),
-- and one NUMSUB counts the listeners for both the local hand-over and pass_on.
-- On a slot being migrated, a missing "<registry>:handed" refuses the DEL of both
-- (pass_on.lua invariant 5): the lock alone is deleted then, and a local hand-over,
-- which writes the deleted key again, waits for a settled slot.
if type(redis.pcall('del', KEYS[1], KEYS[2] .. ':handed')) ~= 'number' then
    redis.call('del', KEYS[1])
end
local n = redis.call('pubsub', NUMSUB, ARGV[1], ARGV[1] .. ':redlatch-waiters')
n[2] = n[2] + classic_listeners(ARGV[1])
if ARGV[5] and n[2] <= 1 and settled(KEYS[2]) then
    redis.call('hincrby', KEYS[1], ARGV[5], 1)
    redis.call('pexpire', KEYS[1], ARGV[6])
    if ARGV[7] then redis.call('zrem', KEYS[2], ARGV[7]) end
    return 2
end
pass_on_counted(KEYS[1], KEYS[2], ARGV[1], n[2], n[4])
return 1
