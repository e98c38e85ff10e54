-- simple_renew.lua: the watchdog's renewal of simple locks (compare-and-pexpire, the
-- reference clients' extend: redsync's touchScript, node-redlock's extend), for many
-- locks of one hash slot in one call.
--
-- KEYS[i]    lock i's name
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the token expected in lock i
--
-- Returns an array with one entry per lock: 1 = it still holds the token and its lease
-- was set to ARGV[1]; 0 = another token or none (the hold is lost), or a key of another
-- type. A renewal never creates a key, so it cannot resurrect a released lock.
local out = {}
for i = 1, #KEYS do
    local v = redis.pcall('get', KEYS[i])
    if type(v) == 'string' and v == ARGV[i + 1] then
        redis.call('pexpire', KEYS[i], ARGV[1])
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
