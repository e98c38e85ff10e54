-- fair_force_release.lua: delete a fair lock whoever holds it and wake the next waiter.
-- fair_evict.lua and tell_holders.lua are prepended.
--
-- KEYS[1..5] lock, queue, deadlines, channel prefix, liveness (see fair_evict.lua)
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  optional: the notice channel prefix, as in force_release.lua (each holder's
--          client is told, and renews at once to find its hold gone)
--
-- Returns 1 if a lock was deleted, 0 if there was none; the queue is kept. A key of
-- another type is left alone and fails with WRONGTYPE.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if kind == 'hash' and ARGV[2] then tell_holders(KEYS[1], ARGV[2]) end
redis.call('del', KEYS[1])
evict(now_ms())
wake_next(ARGV[1])
if kind == 'hash' then
    return 1
end
return 0
