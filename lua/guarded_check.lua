-- guarded_check.lua: prepended to the scripts that write guarded by a lock
-- (guarded_write.lua, and users' scripts wrapped by guarded_script_head.lua). Defines
-- guarded_check(lock, fence, holder, token), which decides whether the write may run.
--
-- lock    the lock's key (HASH holder -> hold count; a read-write lock's hash too)
-- fence   "redlatch_fence:{name}" (HASH token, holder): the greatest fencing token a
--         guarded write of this lock was applied with, and its holder (not a Redisson key)
-- holder  the guard's holder id
-- token   the guard's fencing token, '' for a lock without tokens
--
-- The write may run only if the holder holds the lock now (its lease has not run out,
-- nobody force-unlocked it: a holder paused past its lease finds its field gone) and,
-- with a token, no write of another holder with a greater token was applied before (a
-- fence that holds even where the lock's state was lost, say by a failover). A write
-- that may run raises the fence to its token.
--
-- Returns nil when the write may run, else an error reply to return at once (code
-- REDLATCH_NOT_HELD, which the client turns into Error::NotHeld).
local function guarded_check(lock, fence, holder, token)
    if redis.call('hexists', lock, holder) == 0 then
        return redis.error_reply('REDLATCH_NOT_HELD the lock is not held by ' .. holder)
    end
    if token ~= '' then
        local f = redis.call('hmget', fence, 'token', 'holder')
        local newest = tonumber(f[1] or '0')
        local mine = tonumber(token)
        if newest > mine and f[2] ~= holder then
            return redis.error_reply('REDLATCH_NOT_HELD a write with the later token '
                .. newest .. ' was applied (this guard has ' .. token .. ')')
        end
        if mine > newest then
            redis.call('hset', fence, 'token', token, 'holder', holder)
        end
    end
    return nil
end
