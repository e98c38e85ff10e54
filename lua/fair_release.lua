-- fair_release.lua: drop one hold of a fair lock and wake only the next waiter. When it
-- was the last hold and the head of the queue is one of the offered waiters (tasks of
-- the releasing client that wait for this lock; none in an ordinary release), the head
-- takes the lock in the same call instead (a local hand-over). Otherwise the live
-- queue head is woken on its own channel, or the plain channel when nobody is queued.
-- fair_evict.lua is prepended.
--
-- KEYS[1..5] lock, queue, deadlines, channel prefix, liveness (see fair_evict.lua)
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  the releasing holder's lease in ms, re-applied while holds remain
-- ARGV[3]  releasing holder id
-- ARGV[4]  the offered waiters' wait time w in ms (R2 when one of them takes the lock)
-- ARGV[5], ARGV[6], ...  offered waiters, if any: holder id, lease in ms, holder id, ...
--
-- Returns nil (not held by the releaser), 0 (still held), 1 (released, next woken) or
-- the holder id of the offered waiter that now holds the lock (count 1, its lease).
--
-- Invariants: only the live queue head is ever granted, exactly as fair_acquire.lua
-- would grant it (taking w off every deadline left, R2), so the FIFO order across
-- clients is unchanged; nothing is published on a hand-over, because the lock was
-- never free.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then redis.call('pexpire', KEYS[1], ARGV[2]) end
    return 0
end
redis.call('del', KEYS[1])
evict(now_ms())
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    for i = 5, #ARGV - 1, 2 do
        if ARGV[i] == head then
            take(head, tonumber(ARGV[4]))
            redis.call('hincrby', KEYS[1], head, 1)
            redis.call('pexpire', KEYS[1], ARGV[i + 1])
            return head
        end
    end
end
wake_next(ARGV[1])
return 1
