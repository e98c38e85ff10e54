-- fenced_sync.lua: raise a fencing counter to at least a value (Redlock write-back).
--
-- KEYS[1]  token counter "redisson_lock_token:{name}"
-- ARGV[1]  the token about to be handed out (the maximum seen on a majority)
--
-- Returns the counter after the call. The counter never decreases, so writing the
-- maximum back to a majority keeps tokens monotonic when a minority loses its counter.
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then
    redis.call('set', KEYS[1], ARGV[1])
    return wanted
end
return current
