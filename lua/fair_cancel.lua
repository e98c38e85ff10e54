-- fair_cancel.lua: a waiter leaves the fair queue (gave up, timed out or was cancelled).
-- fair_evict.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  deadlines "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- ARGV[1]  holder id
--
-- Returns 1 if the holder was queued, 0 if not. If it was at the head and the lock is
-- free, the next waiter is woken, so leaving never stalls the queue.
local was_head = redis.call('lindex', KEYS[2], 0) == ARGV[1]
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if was_head and redis.call('exists', KEYS[1]) == 0 then
    evict_stale(KEYS[2], KEYS[3], now_ms())
    wake_next(KEYS[2], KEYS[4], '0')
end
if removed > 0 then
    return 1
end
return 0
