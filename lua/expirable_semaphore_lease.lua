-- expirable_semaphore_lease.lua: read or change the lease of one permit by id (Redisson
-- RPermitExpirableSemaphore getLeaseTime, updateLeaseTime). expirable_semaphore_common.lua is
-- prepended.
--
-- KEYS[1]  the counter of available permits
-- KEYS[2]  the acquired permits "<tag>:timeout"
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1]  the permit's id (16 raw bytes)
-- ARGV[2]  'get', or 'set' to make the permit expire ARGV[3] ms from now
-- ARGV[3]  'set' only: the new lease in milliseconds (> 0)
--
-- Expired permits are reclaimed first, so an expired permit is not held.
-- 'get' returns the milliseconds left (> 0), -1 for a permit that never expires on its
-- own (Redisson's score 922337203685477), -2 when the permit is not held.
-- 'set' returns 1 when the permit was held and now expires then, 0 when not held.
local now = expirable_semaphore_now_ms()
reclaim(KEYS[1], KEYS[2], KEYS[3], now)
local expires = redis.call('zscore', KEYS[2], ARGV[1])
if ARGV[2] == 'set' then
    if expires == false then
        return 0
    end
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
    return 1
end
if expires == false then
    return -2
end
if tonumber(expires) >= 922337203685477 then
    return -1
end
return tonumber(expires) - now
