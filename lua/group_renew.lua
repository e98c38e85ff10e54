-- group_renew.lua: the watchdog's renewal of one faster multi-lock hold (layout in
-- group_common.lua, prepended).
--
-- KEYS[1]  the group (a hash)
-- ARGV[1]  lease in ms
-- ARGV[2]  holder id
-- ARGV[3..] the values' fields
--
-- Returns 1: `holder` holds every value (its entries had not ended) and each now
-- lasts at least the lease; 0: it does not (lost), and nothing was changed. A renewal
-- never revives an ended entry nor creates one; a key of another type answers 0.
local key, lease, now, holder = KEYS[1], tonumber(ARGV[1]), now_ms(), ARGV[2]
if redis.call('type', key).ok ~= 'hash' then
    return 0
end
for i = 3, #ARGV do
    local v = ARGV[i]
    local until_ms = expiry(key, v, holder)
    if redis.call('hget', key, v) ~= holder or not until_ms or until_ms < now then
        return 0
    end
end
for i = 3, #ARGV do
    local v = ARGV[i]
    if expiry(key, v, holder) < now + lease then
        redis.call('hset', key, (entry(v, holder)), now + lease)
    end
end
keep_for(key, lease)
return 1
