-- rw_common.lua: shared prelude of the rw_*.lua scripts (prepended at build time,
-- never run on its own). Defines rw_now_ms(), writer_waiting() and longest_read().
--
-- Layout (Redisson RReadWriteLock): the lock is a HASH at the lock name with the field
-- `mode` ('read' or 'write') and one field per holder with its hold count. Readers are
-- `<uuid>:<n>`, the writer is `<uuid>:<n>:write`. Every read hold number i of a holder
-- has its own string key `<tag>:<holder>:rwlock_timeout:<i>` with that hold's lease, so
-- the lock lives as long as its longest live read hold, not as long as its last writer.
-- `<tag>` is `{name}`, or the name itself when it already has a hash tag.
--
-- Not Redisson's: the ZSET `redlatch_rwlock_writers:{name}`, waiting writers -> the
-- instant (ms, server clock) their intent lapses unless refreshed. New readers stay out
-- while it has a live entry (writer preference); it expires with its last entry.

local function rw_now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- ms until the first live writer intent lapses, or nil when no writer waits. Lapsed
-- intents (dead writers) are dropped on the way.
local function writer_waiting(writers)
    if redis.call('exists', writers) == 0 then
        return nil
    end
    local now = rw_now_ms()
    redis.call('zremrangebyscore', writers, '-inf', now)
    local first = redis.call('zrange', writers, 0, 0, 'withscores')
    if first[2] == nil then
        return nil
    end
    return math.max(1, tonumber(first[2]) - now)
end

-- The longest time left on any read hold of any holder of `lock` (-3 when none is
-- left); `tag` is the prefix of the holders' timeout keys. The scan stops at the first
-- hold with at least `enough` ms left (the caller then keeps the lock's TTL, an upper
-- bound of every hold's): with equal leases that is the first hold looked at, so a
-- release costs O(1) instead of O(readers).
local function longest_read(lock, tag, enough)
    local longest = -3
    local fields = redis.call('hgetall', lock)
    for i = 1, #fields, 2 do
        local count = tonumber(fields[i + 1])
        if fields[i] ~= 'mode' and count ~= nil then
            for n = count, 1, -1 do
                local left = redis.call('pttl', tag .. ':' .. fields[i] .. ':rwlock_timeout:' .. n)
                if left > longest then
                    longest = left
                    if enough ~= nil and longest >= enough then
                        return longest
                    end
                end
            end
        end
    end
    return longest
end

-- After a read hold went: the lock lives as long as its longest remaining read hold.
-- Keeps the lock's TTL when a hold has at least 7/8 of it left (a dead reader's lock
-- then lingers at most 1/8 of a lease longer); never lets a live hold outlive the lock.
-- Returns false when no read hold is left.
local function fit_to_reads(lock, tag)
    local bound = redis.call('pttl', lock)
    local enough = nil
    if bound > 0 then
        enough = bound - math.floor(bound / 8)
    end
    local longest = longest_read(lock, tag, enough)
    if longest <= 0 then
        return false
    end
    if enough == nil or longest < enough then
        redis.call('pexpire', lock, longest)
    end
    return true
end
