-- expirable_semaphore_set.lua: set the number of permits of an expirable semaphore, the acquired ones
-- included (Redisson RPermitExpirableSemaphore setPermits, since 3.17). expirable_semaphore_common.lua
-- is prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout"
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1]  the permits wanted in all (>= 0)
--
-- Without a counter, the counter is set to ARGV[1]. Otherwise the counter moves by the
-- difference between ARGV[1] and available + acquired (expired permits count as
-- acquired until reclaimed, as in Redisson), and may go below 0 while more are
-- acquired than wanted. Publishes ARGV[1] when something changed. Returns 1 if the
-- counter was written, 0 if the total was ARGV[1] already.
local available = redis.call('get', KEYS[1])
if available == false then
    redis.call('set', KEYS[1], ARGV[1])
    publish(KEYS[3], ARGV[1])
    return 1
end
local total = tonumber(available) + redis.call('zcard', KEYS[2])
if total == tonumber(ARGV[1]) then
    return 0
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
publish(KEYS[3], ARGV[1])
return 1
