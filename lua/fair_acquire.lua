-- fair_acquire.lua: take, re-enter or queue for a fair (FIFO) lock; a queued waiter
-- re-runs it to refresh its entry. fair_evict.lua is prepended (KEYS[1..5] and the
-- deadline design are described there).
--
-- KEYS[1..5] lock, queue, deadlines, channel prefix, liveness (see fair_evict.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder id
-- ARGV[3]  stale timeout in ms: the waiter is alive until now + this (A1), and the
--          margin it keeps behind another entry (A2)
-- ARGV[4]  "1" to join (or stay in) the queue when the lock is busy, "0" to only try
-- ARGV[5]  wait time w in ms (Redisson's threadWaitTime; R1, R2)
--
-- Returns {1, 1} acquired fresh, {2, count} re-entered, {0, pttl} not acquired (pttl of
-- the lock, -2 when the lock is free but another waiter is ahead).
--
-- Invariants: the lock is only granted to the queue head (or to anyone when the queue is
-- empty); an acquisition takes w off every deadline left (R2); a queued caller's entry
-- is re-anchored and marked alive (A1, A2); a free lock with a queue wakes its head (A4).
local now = now_ms()
local stale, w = tonumber(ARGV[3]), tonumber(ARGV[5])
evict(now)
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 then
    if head == false or head == ARGV[2] then
        take(ARGV[2], w)
        redis.call('hincrby', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, 1}
    end
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
    return {2, count}
end
local pttl = redis.call('pttl', KEYS[1])
if ARGV[4] == '1' then
    join(ARGV[2], w, stale, now, pttl)
end
if pttl == -2 then
    -- A4: the head (not us, or we would hold the lock now) may be asleep: a plain
    -- release or an expired lease told it nothing.
    wake_next('0')
end
return {0, pttl}
