-- fair_cancel.lua: a waiter leaves the fair queue (gave up, timed out or was cancelled),
-- as Redisson's failed-acquire script does (R3). fair_evict.lua is prepended.
--
-- KEYS[1..5] lock, queue, deadlines, channel prefix, liveness (see fair_evict.lua)
-- ARGV[1]  holder id
-- ARGV[2]  its wait time w in ms: taken off every deadline behind it (R3)
--
-- Returns 1 if the holder was queued, 0 if not. If it was at the head and the lock is
-- free, the next waiter is woken, so leaving never stalls the queue.
local was_head = redis.call('lindex', KEYS[2], 0) == ARGV[1]
local queued = leave(ARGV[1], tonumber(ARGV[2]))
if was_head and redis.call('exists', KEYS[1]) == 0 then
    evict(now_ms())
    wake_next('0')
end
if queued then
    return 1
end
return 0
