-- dialect_sharded.lua: prepended to every script run on a Redis >= 7 cluster: unlock
-- messages go out with sharded pub/sub (SPUBLISH), where Redisson's waiters and ours
-- SSUBSCRIBE. Classic and sharded pub/sub do not reach each other, and Redisson does
-- not always subscribe sharded there (3.27 picks classic on some starts; 3.29+ with
-- shardedSubscriptionMode OFF always does): so a message on a channel Redisson may
-- listen on also goes out with a classic PUBLISH when a classic subscriber that is not
-- redlatch's listens on this node.
--
-- PUBLISH / NUMSUB name the dialect's commands, for channels only redlatch listens on.
-- classic_listeners(channel): the classic subscribers of `channel` on this node that
-- are not redlatch waiters. A redlatch client on such a cluster subscribes each channel
-- both ways on the slot's primary, classic beside sharded to hear Redisson's classic
-- releases, and then also subscribes "<channel>:redlatch-waiters" classic: that marker
-- is subtracted, so our own subscriptions never make a release PUBLISH classic (a
-- classic PUBLISH on a cluster goes to every node over the cluster bus).
-- classic_listeners_each(channels): classic_listeners of each channel, in order, counted
-- by one PUBSUB NUMSUB for them all (a group commit frees many locks at once).
-- publish(channel, message): SPUBLISH, and PUBLISH too when classic_listeners > 0.
-- Returns the sharded receivers (what SPUBLISH answered).
local PUBLISH, NUMSUB = 'spublish', 'shardnumsub'
local function classic_listeners(channel)
    local n = redis.call('pubsub', 'numsub', channel, channel .. ':redlatch-waiters')
    return math.max(0, n[2] - n[4])
end
local function classic_listeners_each(channels)
    local names = {}
    for j, channel in ipairs(channels) do
        names[2 * j - 1], names[2 * j] = channel, channel .. ':redlatch-waiters'
    end
    local n = redis.call('pubsub', 'numsub', unpack(names))
    local counts = {}
    for j = 1, #channels do counts[j] = math.max(0, n[4 * j - 2] - n[4 * j]) end
    return counts
end
local function publish(channel, message)
    local heard = redis.call('spublish', channel, message)
    if classic_listeners(channel) > 0 then redis.call('publish', channel, message) end
    return heard
end
