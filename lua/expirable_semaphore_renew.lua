-- expirable_semaphore_renew.lua: the watchdog's batched renewal of expirable-semaphore permits.
-- expirable_semaphore_common.lua is prepended.
--
-- KEYS[i]    the acquired permits "<tag>:timeout" of a semaphore
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  a permit id (16 raw bytes) in KEYS[i]
--
-- Returns one entry per permit: 1 = still held, its expiry set to now + lease (never
-- earlier than it was); 0 = gone or expired (lost: it is never resurrected).
local now = expirable_semaphore_now_ms()
local out = {}
for i = 1, #KEYS do
    local expires = redis.call('zscore', KEYS[i], ARGV[i + 1])
    if expires ~= false and tonumber(expires) > now then
        if tonumber(expires) < now + tonumber(ARGV[1]) then
            redis.call('zadd', KEYS[i], 'xx', now + tonumber(ARGV[1]), ARGV[i + 1])
        end
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
