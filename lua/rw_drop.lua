-- rw_drop.lua: remove a read or write hold its client declared lost (not renewed by a
-- majority in time), whatever its count, and wake the waiters if that frees anything.
-- rw_common.lua is prepended.
--
-- KEYS[1]  lock name
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  the holder's timeout prefix (a writer has none: pass any key of the tag)
-- KEYS[4]  "<tag>"
-- ARGV[1]  holder id (reader or writer)
-- ARGV[2]  message, "1"
--
-- Returns 1 if the holder's hold was removed, 0 if it held nothing there.
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return 0
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not count then
    return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
for n = 1, count do
    redis.call('del', KEYS[3] .. ':' .. n)
end
local longest = -3
if redis.call('hlen', KEYS[1]) > 1 then
    longest = longest_read(KEYS[1], KEYS[4], nil)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if longest > 0 and mode == 'read' then
    redis.call('pexpire', KEYS[1], longest)
    return 1
end
if longest > 0 and string.sub(ARGV[1], -6) == ':write' then
    -- The writer went; the read holds left behind (its downgrade) stay.
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
elseif mode == 'read' or string.sub(ARGV[1], -6) == ':write' then
    redis.call('del', KEYS[1])
else
    return 1
end
publish(KEYS[2], ARGV[2])
return 1
