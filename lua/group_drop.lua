-- group_drop.lua: remove a faster multi-lock hold its client declared lost (not
-- renewed in time); renewals queued on a slow master may have extended it since
-- (layout in group_common.lua, prepended).
--
-- KEYS[1]  the group (a hash)
-- KEYS[2]  channel "redisson_lock__channel:{group}"
-- ARGV[1]  holder id
-- ARGV[2..] the values' fields
--
-- Returns 1 if `holder` still held any of the values (those entries are deleted,
-- whatever their counts, and "0" is published), 0 otherwise (nothing changes).
local key, holder = KEYS[1], ARGV[1]
if redis.call('type', key).ok ~= 'hash' then
    return 0
end
local dropped = 0
for i = 2, #ARGV do
    if redis.call('hget', key, ARGV[i]) == holder then
        forget(key, ARGV[i], holder)
        dropped = 1
    end
end
if dropped == 1 then
    publish(KEYS[2], '0')
end
return dropped
