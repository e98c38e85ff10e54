-- observe_waiters.lua: how many listen for a name's releases (redlatch list / top /
-- status, read only). The dialect (dialect_classic.lua or dialect_sharded.lua) is
-- prepended: NUMSUB counts the dialect's subscribers (SHARDNUMSUB on a Redis 7 cluster)
-- and classic_listeners(channel) the classic ones that are not redlatch's own twins
-- (their markers subtracted; 0 in the classic dialect).
--
-- KEYS[1]  the name's key (routes the call to the primary serving its slot)
-- ARGV     the channels its waiters listen on
--
-- Returns one count per channel: subscribed connections (a client with several
-- waiting tasks counts once). A channel the node refuses to count (another slot) is 0.
local counts = {}
for i = 1, #ARGV do
    local ok, n = pcall(redis.call, 'pubsub', NUMSUB, ARGV[i])
    local sharded = ok and n[2] or 0
    local classic = 0
    if NUMSUB ~= 'numsub' then
        local okc, c = pcall(classic_listeners, ARGV[i])
        classic = okc and c or 0
    end
    counts[i] = sharded + classic
end
return counts
