-- batch.lua: many plain acquires and releases in one call (group commit). Each
-- operation behaves exactly like acquire.lua / release.lua on its own keys (leases are
-- only ever extended on re-entry and partial release); the
-- batch only saves round trips and per-call overhead. pass_on.lua and acquire_op.lua
-- (each acquire) are prepended.
--
-- For operation i (1-based): KEYS[2i-1] = lock name, KEYS[2i] = its waiter registry
-- "redlatch_lock_waiters:{name}", and
--   ARGV[5i-4] = "a" (acquire) or "r" (release)
--   ARGV[5i-3] = lease in milliseconds
--   ARGV[5i-2] = holder id
--   ARGV[5i-1] = release: the unlock channel (not a key: see release.lua); acquire: ""
--   ARGV[5i]   = acquire: the waiter's ticket (registered when refused, removed when
--                granted, a hand-over to it claimed, as acquire.lua), or ""; release: ""
--
-- Returns a flat array, two integers per operation:
--   acquire: {1, 1} fresh or claimed, {2, count} re-entered, {0, pttl} busy
--   release: {-1, 0} not held, {0, 0} still held, {1, 0} released (passed on)
--   either:  {3, 0} the key holds a value of another type (WRONGTYPE); nothing changed
--
-- The uncontended path costs fewer calls than one script per operation would (the
-- server's CPU per acquire+release pair is what bounds throughput): when every lock the
-- batch acquires is named once in it and none of them exists (one EXISTS for all), each
-- is taken with HINCRBY + PEXPIRE, no TYPE; the last holds released of locks named once
-- are deleted together with their "<registry>:handed" keys by one DEL at the end, and
-- their listeners counted by one PUBSUB NUMSUB and their registries by one EXISTS, so
-- pass_on_counted runs only for a lock someone waits for or listens on. A lock named
-- more than once in a batch takes the per-operation path, in order, as before: no
-- operation ever sees a state another operation of the batch has not yet reached.

local out = {}
local ops = #ARGV / 5
local times = {}
for k = 1, ops do
    local name = KEYS[2 * k - 1]
    times[name] = (times[name] or 0) + 1
end
local probe = {}
for k = 1, ops do
    local name = KEYS[2 * k - 1]
    if ARGV[5 * k - 4] == 'a' and times[name] == 1 then probe[#probe + 1] = name end
end
local all_free = #probe > 0 and redis.call('exists', unpack(probe)) == 0
local gone, freed = {}, {}
for k = 1, ops do
    local i = 5 * k - 4
    local op, lease, holder, channel, client = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
    local name, waiters = KEYS[2 * k - 1], KEYS[2 * k]
    local once = times[name] == 1
    if op == 'a' then
        local status, value = acquire_op(name, waiters, lease, holder, client, all_free and once, true)
        out[#out + 1] = status
        out[#out + 1] = value
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
        elseif once then
            gone[#gone + 1] = name
            gone[#gone + 1] = waiters .. ':handed'
            freed[#freed + 1] = k
            out[#out + 1] = 1
            out[#out + 1] = 0
        else
            redis.call('del', name)
            pass_on(name, waiters, channel)
            out[#out + 1] = 1
            out[#out + 1] = 0
        end
    end
end
if #freed > 0 then
    redis.call('del', unpack(gone))
    local channels, registries = {}, {}
    for j, k in ipairs(freed) do
        local channel = ARGV[5 * k - 1]
        channels[2 * j - 1] = channel
        channels[2 * j] = channel .. ':redlatch-waiters'
        registries[j] = KEYS[2 * k]
    end
    local counts = redis.call('pubsub', NUMSUB, unpack(channels))
    local queued = redis.call('exists', unpack(registries)) > 0
    for j, k in ipairs(freed) do
        local shared, marker = counts[4 * j - 2], counts[4 * j]
        if queued or shared > 0 or marker > 0 then
            pass_on_counted(KEYS[2 * k - 1], KEYS[2 * k], ARGV[5 * k - 1], shared, marker)
        end
    end
end
return out
