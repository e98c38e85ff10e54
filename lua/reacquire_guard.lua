-- reacquire_guard.lua: prepended to acquire.lua and fair_evict.lua + fair_acquire.lua to
-- make the non-reentrant locks (Redisson 4.4's RedissonNonReentrantLock and
-- RedissonNonReentrantFairLock). Same keys, same hash layout as the reentrant lock
-- it guards: the lock is a HASH holder -> 1.
--
-- KEYS[1]  lock name
-- ARGV[2]  holder id (the same argument in both guarded scripts)
--
-- Returns {4, 0} when `holder` already holds the lock: a second acquisition by the
-- same holder is refused, and nothing is changed (the lease is not extended, no queue
-- is joined). Redisson answers this case with the error reply NON_REENTRANT_REACQUIRE
-- and throws IllegalMonitorStateException from lock() and tryLock() alike; redlatch
-- reads status 4 as Error::Reentry. Otherwise the guarded script runs unchanged, so a
-- holder's count never goes above 1 and the unlock scripts stay the reentrant ones.
--
-- Invariant: a key of another type is left to the guarded script (which reports
-- WRONGTYPE); HEXISTS on it would fail before that with the same error.
if redis.call('type', KEYS[1]).ok == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {4, 0}
end
