-- group_status.lua: what a faster multi-lock's values look like now (read only;
-- layout in group_common.lua, prepended).
--
-- KEYS[1]  the group (a hash)
-- ARGV[1]  holder id asked about ("" for none)
-- ARGV[2..] the values' fields
--
-- Returns {locked, held, count, ms}: locked = 1 if any value has a holder whose entry
-- has not ended (Redisson's isLocked); held = 1 if the asked holder holds every value
-- (isHeldByThread); count = the smallest of its counts over the values (0 unless
-- held); ms = the least time left of its entries (-1 unless held). A key of another
-- type reads as {3, 0, 0, -1}.
local key, now, holder = KEYS[1], now_ms(), ARGV[1]
local kind = redis.call('type', key).ok
if kind == 'none' then
    return {0, 0, 0, -1}
elseif kind ~= 'hash' then
    return {3, 0, 0, -1}
end
local locked, held, count, ms = 0, 1, nil, nil
for i = 2, #ARGV do
    local v = ARGV[i]
    local owner = redis.call('hget', key, v)
    local until_ms = owner and expiry(key, v, owner)
    local live = until_ms and until_ms >= now
    if live then
        locked = 1
    end
    if owner == holder and live then
        local _, c = entry(v, holder)
        local n = tonumber(redis.call('hget', key, c)) or 0
        if not count or n < count then count = n end
        if not ms or until_ms - now < ms then ms = until_ms - now end
    else
        held = 0
    end
end
if held == 0 then
    return {locked, 0, 0, -1}
end
return {locked, 1, count, ms}
