-- batch.lua: many plain acquires and releases in one call (group commit). Each
-- operation behaves exactly like acquire.lua / release.lua on its own keys (leases are
-- only ever extended on re-entry and partial release); the
-- batch only saves round trips and per-call overhead.
--
-- For operation i (1-based): KEYS[i] = lock name, and
--   ARGV[4i-3] = "a" (acquire) or "r" (release)
--   ARGV[4i-2] = lease in milliseconds
--   ARGV[4i-1] = holder id
--   ARGV[4i]   = release: the unlock channel (not a key: see release.lua); acquire: ""
--
-- Returns a flat array, two integers per operation:
--   acquire: {1, 1} fresh, {2, count} re-entered, {0, pttl} busy
--   release: {-1, 0} not held, {0, 0} still held, {1, 0} released (published "0")
--   either:  {3, 0} the key holds a value of another type (WRONGTYPE); nothing changed
local out = {}
for i = 1, #ARGV, 4 do
    local op, lease, holder, channel = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local name = KEYS[(i + 3) / 4]
    if op == 'a' then
        local kind = redis.call('type', name).ok
        if kind == 'none' then
            redis.call('hincrby', name, holder, 1)
            redis.call('pexpire', name, lease)
            out[#out + 1] = 1
            out[#out + 1] = 1
        elseif kind ~= 'hash' then
            out[#out + 1] = 3
            out[#out + 1] = 0
        elseif redis.call('hexists', name, holder) == 1 then
            local count = redis.call('hincrby', name, holder, 1)
            if redis.call('pttl', name) < tonumber(lease) then redis.call('pexpire', name, lease) end
            out[#out + 1] = 2
            out[#out + 1] = count
        else
            out[#out + 1] = 0
            out[#out + 1] = redis.call('pttl', name)
        end
    else
        -- As release.lua: HGET, then DEL on the last hold (WRONGTYPE caught by pcall).
        local held = redis.pcall('hget', name, holder)
        if type(held) == 'table' then
            out[#out + 1] = 3
            out[#out + 1] = 0
        elseif not held then
            out[#out + 1] = -1
            out[#out + 1] = 0
        elseif tonumber(held) > 1 then
            redis.call('hincrby', name, holder, -1)
            if redis.call('pttl', name) < tonumber(lease) then redis.call('pexpire', name, lease) end
            out[#out + 1] = 0
            out[#out + 1] = 0
        else
            redis.call('del', name)
            redis.call(PUBLISH, channel, '0')
            out[#out + 1] = 1
            out[#out + 1] = 0
        end
    end
end
return out
