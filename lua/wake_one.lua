-- wake_one.lua: prepended to the scripts that free a plain lock (release.lua,
-- batch.lua, unwait.lua). Wakes ONE waiting client instead of every subscriber.
--
-- The waiter registry (ZSET "redlatch_lock_waiters:{name}", same hash tag as the lock)
-- maps a waiter "<client id>:<n>" to the server time (ms) it began waiting; acquire.lua
-- adds a refused waiter and removes it when it acquires, unwait.lua when it stops
-- waiting. A waiting client listens on three channels: the shared unlock channel
-- "redisson_lock__channel:{name}" (Redisson's releases publish "0" there), its own
-- "redisson_lock__channel:{name}:<client id>" and the marker
-- "redisson_lock__channel:{name}:redlatch-waiters", which only says "a redlatch waiter
-- listens here" and never carries a message.
--
-- Invariants:
-- 1. A subscriber of the shared channel that is not a redlatch waiter (a Redisson
--    waiter, an older redlatch) is counted as NUMSUB(shared) - NUMSUB(marker); when
--    there is one, "0" is published on the shared channel, which wakes every waiter
--    (Redisson's own behaviour), and nothing else is needed.
-- 2. Otherwise the client of the longest-waiting registered waiter is sent "0" on its
--    own channel, if anyone listens there; a waiter whose client nobody listens for
--    (its process died, or it was not subscribed yet) is removed and the next one is
--    tried: a wake is never spent on a dead waiter, and one not yet subscribed asks
--    again after subscribing anyway.
-- 3. Nobody registered and nobody subscribed: nothing is published.
local function wake_one(waiters, channel)
    local n = redis.call('pubsub', NUMSUB, channel, channel .. ':redlatch-waiters')
    if n[2] > n[4] then
        redis.call(PUBLISH, channel, '0')
        return
    end
    while true do
        local head = redis.call('zrange', waiters, 0, 0)[1]
        if not head then
            return
        end
        if redis.call(PUBLISH, channel .. ':' .. string.match(head, '^[^:]*'), '0') > 0 then
            return
        end
        redis.call('zrem', waiters, head)
    end
end
