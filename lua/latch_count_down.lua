-- latch_count_down.lua: count a latch down by one (Redisson RCountDownLatch countDown).
--
-- KEYS[1]  the latch's counter
-- KEYS[2]  channel "redisson_countdownlatch__channel__{name}"
-- ARGV[1]  zero-count message, "0"
--
-- Returns the count left. At 0 the key is deleted and ARGV[1] published, waking every
-- waiter; counting down a latch that is not set leaves nothing behind.
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    publish(KEYS[2], ARGV[1])
end
return math.max(v, 0)
