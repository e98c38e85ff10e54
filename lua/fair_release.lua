-- fair_release.lua: drop one hold of a fair lock and wake only the next waiter.
-- fair_evict.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  deadlines "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  holder id
--
-- Returns nil (not held by the holder), 0 (still held) or 1 (released: the live queue
-- head is woken on its own channel, or the plain channel when nobody is queued).
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then redis.call('pexpire', KEYS[1], ARGV[2]) end
    return 0
end
redis.call('del', KEYS[1])
evict_stale(KEYS[2], KEYS[3], now_ms())
wake_next(KEYS[2], KEYS[4], ARGV[1])
return 1
