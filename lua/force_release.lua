-- force_release.lua: delete a lock whoever holds it and wake its waiters.
-- tell_holders.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  optional: the waiter registry "redlatch_lock_waiters:{name}" (pass_on.lua)
-- ARGV[1]  unlock channel "redisson_lock__channel:{name}" (not a key: see release.lua)
-- ARGV[2]  unlock message, "0"
-- ARGV[3]  optional: the notice channel prefix "redlatch_client__channel"; each
--          holder's client is told on "<prefix>:{<client id>}" (revoke.rs) and renews
--          at once to find its hold gone, instead of at its next renewal round
--
-- Returns 1 if a lock was deleted (and the message published), 0 if there was none.
-- A key of another type is left alone and fails with WRONGTYPE.
-- A hand-over of the deleted lock that its waiter has not claimed yet is forgotten
-- ("<registry>:handed"), so that waiter leaving later (unwait.lua) cannot take a hold
-- its task has acquired since.
if redis.call('type', KEYS[1]).ok == 'hash' then
    if ARGV[3] then tell_holders(KEYS[1], ARGV[3]) end
    redis.call('del', KEYS[1])
    if KEYS[2] then redis.call('del', KEYS[2] .. ':handed') end
    publish(ARGV[1], ARGV[2])
    return 1
end
if redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return 0
