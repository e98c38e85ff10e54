-- drop.lua: remove a hold its client declared lost (not renewed by a majority in
-- time). Renewals that were queued on a paused or slow master may have extended it
-- after the client gave up on it; this deletes it if `holder` still holds it, whatever
-- its count, and wakes who may take it next. fair_evict.lua is prepended, so the same
-- script serves plain, fenced and fair locks (the client does not know which a lost
-- hold was).
--
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  deadlines "redisson_lock_timeout:{name}"
-- KEYS[4]  channel "redisson_lock__channel:{name}"
-- KEYS[5]  fair liveness "redlatch_fair_alive:{name}" (see fair_evict.lua)
-- ARGV[1]  holder id
-- ARGV[2]  unlock message, "0"
--
-- Returns 1 if the lock was deleted, 0 if `holder` did not hold it (expired, or
-- another holder has it now: left alone).
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
redis.call('del', KEYS[1])
evict(now_ms())
wake_next(ARGV[2])
return 1
