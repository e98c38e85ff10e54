-- group_common.lua: prepended to every group_*.lua script (the faster multi-lock,
-- Redisson's RedissonFasterMultiLock). Many values are locked under ONE hash, the
-- group; each value is a hash field named by the value's digest (Redisson: the
-- base64 HighwayHash-128 of the encoded value, 22 characters). Per value:
--
--   <v>                          the holder id ("<client uuid>:<thread or owner>")
--   <v>:<holder>:expire_time     when this hold of the value ends, in epoch ms
--                                (ours: the Redis server's clock, TIME; Redisson's:
--                                its Java client's clock, which it passes in)
--   <v>:<holder>:lock_count      its reentrant count
--
-- A value is free when it has no holder, or its holder's expire_time has passed. The
-- group hash itself carries a PEXPIRE of at least the longest lease given, so a group
-- nobody renews disappears.
-- Now, in epoch ms of the server's clock.
local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function entry(v, holder)
    return v .. ':' .. holder .. ':expire_time', v .. ':' .. holder .. ':lock_count'
end

-- The expiry (ms) of `holder`'s hold on `v`, or nil if it has none.
local function expiry(key, v, holder)
    local e = redis.call('hget', key, (entry(v, holder)))
    return e and tonumber(e)
end

-- `holder`'s entry of `v` is gone: the value and both sub-fields.
local function forget(key, v, holder)
    local e, c = entry(v, holder)
    redis.call('hdel', key, v, e, c)
end

-- Sets the group's time to live to at least `ms` (never shortens it; a group that
-- exists without a time to live is left so).
local function keep_for(key, ms)
    local left = redis.call('pttl', key)
    if left >= 0 and left < ms then
        redis.call('pexpire', key, ms)
    end
end
