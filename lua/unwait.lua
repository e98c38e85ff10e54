-- unwait.lua: a registered waiter of a plain lock stops waiting (it was granted the
-- lock by a hand-over, ran out of time, or was cancelled). wake_one.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  waiter registry "redlatch_lock_waiters:{name}"
-- ARGV[1]  unlock channel "redisson_lock__channel:{name}" (not a key: see release.lua)
-- ARGV[2]  the waiter id "<client id>:<n>" that stops waiting
--
-- Returns 1 if the lock was free and another waiter was woken, else 0.
-- Invariant: a wake sent to this client just before it left is never lost: if the
-- lock is free now, the next registered waiter is woken in its place (the release
-- that woke us saw the lock free too; whoever took it since wakes on its release).
redis.call('zrem', KEYS[2], ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
    wake_one(KEYS[2], ARGV[1])
    return 1
end
return 0
