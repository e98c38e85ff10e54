-- group_force.lua: force-unlock the values of a faster multi-lock, whoever holds them
-- (layout in group_common.lua, prepended).
--
-- KEYS[1]  the group (a hash)
-- KEYS[2]  channel "redisson_lock__channel:{group}"
-- ARGV[1..] the values' fields
--
-- Returns the number of values that had a holder (ended holds included); publishes
-- "0" on the channel in any case, as Redisson's forceUnlock does.
local key = KEYS[1]
if redis.call('type', key).ok ~= 'hash' then
    publish(KEYS[2], '0')
    return 0
end
local removed = 0
for i = 1, #ARGV do
    local owner = redis.call('hget', key, ARGV[i])
    if owner then
        forget(key, ARGV[i], owner)
        removed = removed + 1
    end
end
publish(KEYS[2], '0')
return removed
