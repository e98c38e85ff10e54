-- latch_set.lua: set a count-down latch's count if it is not set (Redisson
-- RCountDownLatch trySetCount).
--
-- KEYS[1]  the latch: a string counter at its name
-- KEYS[2]  channel "redisson_countdownlatch__channel__{name}"
-- ARGV[1]  new-count message, "1"
-- ARGV[2]  the count (> 0)
--
-- Returns 1 if the count was set (and ARGV[1] published), 0 if the latch is set already.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    publish(KEYS[2], ARGV[1])
    return 1
end
return 0
