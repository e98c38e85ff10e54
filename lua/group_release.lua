-- group_release.lua: one release of `holder`'s hold on the values (layout in
-- group_common.lua, prepended).
--
-- KEYS[1]  the group (a hash)
-- KEYS[2]  channel "redisson_lock__channel:{group}"
-- ARGV[1]  lease in ms (a value still held after this release keeps at least it)
-- ARGV[2]  holder id
-- ARGV[3..] the values' fields
--
-- Returns nil: `holder` did not hold every value (ended or taken by another); what it
-- still held of them is released all the same. 0: counted down, still held. 1:
-- released (every value's count reached zero).
--
-- Invariants: only `holder`'s entries change; a value freed publishes "0" on the
-- channel once (after the loop), waking the waiters of the whole group.
local key, lease, now, holder = KEYS[1], tonumber(ARGV[1]), now_ms(), ARGV[2]
if redis.call('type', key).ok ~= 'hash' then
    return nil
end
local missing, freed, left = false, false, false
for i = 3, #ARGV do
    local v = ARGV[i]
    local e, c = entry(v, holder)
    local ours = redis.call('hget', key, v) == holder
    local until_ms = expiry(key, v, holder)
    if ours and until_ms and until_ms >= now then
        if redis.call('hincrby', key, c, -1) <= 0 then
            forget(key, v, holder)
            freed = true
        else
            if until_ms < now + lease then
                redis.call('hset', key, e, now + lease)
            end
            left = true
        end
    else
        missing = true
        if ours then
            forget(key, v, holder)
            freed = true
        else
            redis.call('hdel', key, e, c)
        end
    end
end
if freed then
    publish(KEYS[2], '0')
end
if missing then
    return nil
end
if left then
    keep_for(key, lease)
    return 0
end
return 1
