-- unwait.lua: a registered waiter of a plain lock stops waiting without having taken
-- the lock through its own attempt or a hand-over message (it ran out of time, was
-- cancelled, failed, or was given the lock by a local hand-over). pass_on.lua is
-- prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  waiter registry "redlatch_lock_waiters:{name}"
-- ARGV[1]  unlock channel "redisson_lock__channel:{name}" (not a key: see release.lua)
-- ARGV[2]  the ticket "<holder id>:<wait n>:<lease ms>" that stops waiting
--
-- Returns 1 if the lock is free now (and was passed on), else 0.
--
-- Invariants:
-- 1. A hand-over to this ticket that nobody claimed ("<registry>:handed" names it) is
--    disowned: one hold of the ticket's holder is dropped (the lock deleted on the last
--    one), so a waiter that left just as the lock was handed to it never keeps it.
-- 2. If the lock is free now, it is passed on to the next registered waiter: a
--    hand-over or wake meant for this waiter is never lost with it.
-- 3. Run for a ticket that is gone already (twice, or after its claim), it only
--    removes nothing: the handed key no longer names it.
redis.call('zrem', KEYS[2], ARGV[2])
local handed = KEYS[2] .. ':handed'
-- pcall: on a slot being migrated, a missing key is refused (pass_on.lua invariant
-- 5); missing, it names no hand-over.
if redis.pcall('get', handed) == ARGV[2] then
    redis.call('del', handed)
    local holder = string.match(ARGV[2], '^([^:]+:[^:]+):')
    local held = redis.call('hget', KEYS[1], holder)
    if held and tonumber(held) > 1 then
        redis.call('hincrby', KEYS[1], holder, -1)
    elseif held then
        redis.call('del', KEYS[1])
    end
end
if redis.call('exists', KEYS[1]) == 0 then
    pass_on(KEYS[1], KEYS[2], ARGV[1])
    return 1
end
return 0
