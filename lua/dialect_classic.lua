-- dialect_classic.lua: prepended to every script run on a standalone server, a
-- Redlock master or a Sentinel primary (and a cluster older than Redis 7): unlock
-- messages go out with classic pub/sub.
--
-- PUBLISH / NUMSUB name the dialect's commands, for channels only redlatch listens on
-- (a client's own wake channel, the marker, revocations, elections). publish(channel,
-- message) is for channels Redisson's waiters may listen on too, and
-- classic_listeners(channel) counts those that hear only a classic PUBLISH beside the
-- dialect's own: here the dialect is classic, so none (classic_listeners_each: one
-- count per channel of a list).
local PUBLISH, NUMSUB = 'publish', 'numsub'
local function publish(channel, message) return redis.call('publish', channel, message) end
local function classic_listeners(channel) return 0 end
local function classic_listeners_each(channels)
    local counts = {}
    for j = 1, #channels do counts[j] = 0 end
    return counts
end
