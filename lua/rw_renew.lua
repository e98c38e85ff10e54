-- rw_renew.lua: the watchdog's batched renewal of read holds, one call for many.
-- (Write holds are renewed by renew.lua: their field is checked like a plain lock's.)
--
-- KEYS[2i-1] lock name, KEYS[2i] that holder's timeout prefix
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  reader holder id
--
-- Returns one entry per pair: 1 = the holder still reads, each of its hold keys and the
-- lock are set back to the lease (the lock's TTL never shortened); 0 = gone (its hold
-- count is missing, or its latest hold key lapsed): the hold is lost. Other holders'
-- keys are left alone (Redisson renews them too; then a dead reader would never lapse).
local out = {}
for i = 1, #KEYS / 2 do
    local lock, prefix = KEYS[2 * i - 1], KEYS[2 * i]
    local count = redis.pcall('hget', lock, ARGV[i + 1])
    if type(count) == 'table' and count.err and not string.find(count.err, '^WRONGTYPE') then
        return redis.error_reply(count.err)
    end
    count = tonumber(count)
    if count ~= nil and redis.call('exists', prefix .. ':' .. count) == 1 then
        for n = 1, count do
            redis.call('pexpire', prefix .. ':' .. n, ARGV[1])
        end
        if redis.call('pttl', lock) < tonumber(ARGV[1]) then
            redis.call('pexpire', lock, ARGV[1])
        end
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
