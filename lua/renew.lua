-- renew.lua: the watchdog's batched lease extension, one call for many locks.
--
-- KEYS[i]    lock names
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the holder id expected in KEYS[i]
--
-- Returns an array with one entry per key: 1 = the holder still holds it and the lease
-- was set back to ARGV[1]; 0 = the holder is gone (the lock is lost) or the key is not a
-- lock. A renewal never creates a key, so it cannot resurrect a released lock, and
-- never shortens a longer lease set by an explicit-lease hold of the same holder.
-- Any other error (a missing permission: NOPERM) fails the whole call: reporting such
-- locks as lost would hide the cause.
local out = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if type(held) == 'table' and held.err and not string.find(held.err, '^WRONGTYPE') then
        return redis.error_reply(held.err)
    end
    if held == 1 then
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[i], ARGV[1]) end
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
