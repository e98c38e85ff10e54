-- group_acquire.lua: take every value of a faster multi-lock for `holder`, or none
-- (layout in group_common.lua, prepended).
--
-- KEYS[1]  the group (a hash)
-- ARGV[1]  lease in ms
-- ARGV[2]  holder id
-- ARGV[3..] the values' fields (distinct; at least one)
--
-- Returns {status, value}: {1, 0} taken (at least one value was not held by `holder`
-- already), {2, 0} re-entered (every value was held by `holder`), {0, ms} refused:
-- another holder holds a value, `ms` until the last of those holds ends; {3, 0} the
-- key is not a hash.
--
-- Invariants: all or none (a refusal writes nothing); a value whose holder's expiry
-- passed is free, and taking it drops that holder's sub-fields; each value taken gets
-- expire_time = max(its current, now + lease) and lock_count + 1 (a holder's own
-- expired entry restarts at 1); the group lives at least `lease`.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
    return {3, 0}
end
local key, lease, now, holder = KEYS[1], tonumber(ARGV[1]), now_ms(), ARGV[2]
local wait, mine = -1, true
for i = 3, #ARGV do
    local v = ARGV[i]
    local owner = redis.call('hget', key, v)
    local until_ms = owner and expiry(key, v, owner)
    if owner and owner ~= holder then
        mine = false
        if until_ms and until_ms > now and until_ms - now > wait then
            wait = until_ms - now
        end
    elseif not owner or not until_ms or until_ms < now then
        mine = false
    end
end
if wait >= 0 then
    return {0, wait}
end
local existed = kind == 'hash'
local ends = now + lease
for i = 3, #ARGV do
    local v = ARGV[i]
    local owner = redis.call('hget', key, v)
    if owner and (owner ~= holder or (expiry(key, v, owner) or -1) < now) then
        -- a free value: the last holder's entry ended (or it is our own ended one)
        forget(key, v, owner)
    end
    local e, c = entry(v, holder)
    redis.call('hset', key, v, holder)
    local current = expiry(key, v, holder)
    if not current or current < ends then
        redis.call('hset', key, e, ends)
    end
    redis.call('hincrby', key, c, 1)
end
if existed then
    keep_for(key, lease)
else
    redis.call('pexpire', key, lease)
end
return {mine and 2 or 1, 0}
