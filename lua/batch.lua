-- batch.lua: many plain acquires and releases in one call (group commit). Each
-- operation behaves exactly like acquire.lua / release.lua on its own keys (leases are
-- only ever extended on re-entry and partial release); the
-- batch only saves round trips and per-call overhead. pass_on.lua and acquire_op.lua
-- (each acquire) are prepended.
--
-- ARGV[1] = the operations' codes, one character each, in order: "a" (acquire), "A"
--           (an acquire whose ticket no attempt carried before: it is not registered,
--           nor handed the lock) or "r" (release)
-- ARGV[2] = every operation's lease in milliseconds, or "" when they differ (then
--           each operation carries its own, first)
-- For operation i (1-based): KEYS[2i-1] = lock name, KEYS[2i] = its waiter registry
-- "redlatch_lock_waiters:{name}"; from ARGV[3] on, per operation: its lease (only
-- when ARGV[2] is ""), its holder id, then for a release the unlock channel (not a key:
-- see release.lua), for an acquire the waiter's ticket (registered when refused,
-- removed when granted, a hand-over to it claimed, as acquire.lua) or "".
-- (Codes in one string, one lease for all: Redis parses every argument into an object
-- and then a Lua string of KEYS or ARGV before the script runs, and seven per operation
-- (a code, a lease and an empty slot among them) were about a quarter of a batch's
-- instructions; the four left differ from operation to operation. The codes are read
-- by one string.byte call: one call per operation cost more than the arguments saved.)
--
-- Returns one string, two decimal integers per operation, all separated by single
-- spaces ("1 1 1 0" for an acquire and a release granted and done):
--   acquire: 1 1 fresh or claimed, 2 count re-entered, 0 pttl busy
--   release: -1 0 not held, 0 0 still held, 1 0 released (passed on)
--   either:  3 0 the key holds a value of another type (WRONGTYPE); nothing changed
-- (One string, not an array of integers: a client parses a bulk string at the cost of
-- one element, where each integer of an array costs it a whole element; the answers
-- of the common paths are constant strings, so the server formats no number for them.)
--
-- The uncontended path costs fewer calls than one script per operation would (the
-- server's CPU per acquire+release pair is what bounds throughput; BENCHMARKS.md):
-- - when every lock the batch acquires is named once in it and none of them exists (one
--   EXISTS for all), each is taken with HINCRBY + PEXPIRE, no TYPE; its waiter's ticket
--   is removed with ZREM only when one of the batch's registries exists (one EXISTS for
--   the registries of all such acquires: a missing registry holds no ticket);
-- - the last holds released of locks named once are deleted by one DEL at the end and
--   their "<registry>:handed" keys by another (see there), the listeners of their shared
--   channels counted by one PUBSUB NUMSUB and their registries by one EXISTS; only for
--   a lock someone listens on (or when a registry exists) is the marker channel counted
--   and pass_on_counted run. A lock nobody listens on and with no registry would come
--   out of pass_on_counted untouched, whatever the marker's count (no ticket to hand
--   it to, nothing published);
-- - counts go to redis.call as strings, answers into the reply table by index (Lua
--   formats a number argument with printf, and #out searches the table each time):
--   operation k's answer is out[k], joined into the reply at the end.
-- A lock named more than once in a batch takes the per-operation path, in order, as
-- before: no operation ever sees a state another operation of the batch has not yet
-- reached.

local codes, common = ARGV[1] or '', ARGV[2]
local ops = #codes
local stride = common == '' and 3 or 2
if #KEYS ~= 2 * ops or #ARGV ~= 2 + stride * ops then
    return redis.error_reply('ERR batch.lua: ' .. ops .. ' codes for ' .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
local code, R, NEW = {string.byte(codes, 1, ops)}, string.byte('r'), string.byte('A')
local out = {}
local times = {}
for k = 1, ops do
    local name = KEYS[2 * k - 1]
    times[name] = (times[name] or 0) + 1
end
-- The probes: the names the batch acquires (each named once), and those acquires'
-- registries where they carry a ticket.
local names, nn, registries, nr = {}, 0, {}, 0
for k = 1, ops do
    local name = KEYS[2 * k - 1]
    local op = code[k]
    if op ~= R and times[name] == 1 then
        nn = nn + 1
        names[nn] = name
        if op ~= NEW and ARGV[2 + stride * k] ~= '' then
            nr = nr + 1
            registries[nr] = KEYS[2 * k]
        end
    end
end
local all_free = nn > 0 and redis.call('exists', unpack(names)) == 0
local registered = all_free and nr > 0 and redis.call('exists', unpack(registries)) > 0
local gone, handed, freed, nf = {}, {}, {}, 0
for k = 1, ops do
    local i = 2 + stride * k
    local name, holder, extra = KEYS[2 * k - 1], ARGV[i - 1], ARGV[i]
    local lease = stride == 2 and common or ARGV[i - 2]
    local once = times[name] == 1
    local op = code[k]
    if op ~= R then
        local fresh_ticket = op == NEW
        if all_free and once then
            redis.call('hincrby', name, holder, '1')
            redis.call('pexpire', name, lease)
            if registered and not fresh_ticket and extra ~= '' then
                redis.call('zrem', KEYS[2 * k], extra)
            end
            out[k] = '1 1'
        else
            out[k] = string.format('%d %d',
                acquire_op(name, KEYS[2 * k], lease, holder, extra, false, not fresh_ticket))
        end
    else
        -- As release.lua: HGET, then DEL on the last hold (WRONGTYPE caught by pcall).
        local held = redis.pcall('hget', name, holder)
        if held == '1' and once then
            nf = nf + 1
            gone[nf], handed[nf] = name, KEYS[2 * k] .. ':handed'
            freed[nf] = k
            out[k] = '1 0'
        elseif type(held) == 'table' then
            out[k] = '3 0'
        elseif not held then
            out[k] = '-1 0'
        elseif tonumber(held) > 1 then
            redis.call('hincrby', name, holder, '-1')
            if redis.call('pttl', name) < tonumber(lease) then redis.call('pexpire', name, lease) end
            out[k] = '0 0'
        else
            redis.call('del', name)
            pass_on(name, KEYS[2 * k], extra)
            out[k] = '1 0'
        end
    end
end
if nf > 0 then
    redis.call('del', unpack(gone))
    -- The "<registry>:handed" keys are not declared: on a cluster slot being migrated
    -- (Redis < 7 sends this script per slot there) a missing one is refused inside a
    -- script, and so is a DEL naming it with others. Missing, it has nothing to delete;
    -- here, it must go: so a refused DEL of them all is retried key by key.
    if type(redis.pcall('del', unpack(handed))) ~= 'number' then
        for j = 1, nf do redis.pcall('del', handed[j]) end
    end
    local channels, waiting = {}, {}
    for j = 1, nf do
        local k = freed[j]
        channels[j] = ARGV[2 + stride * k]
        waiting[j] = KEYS[2 * k]
    end
    local counts = redis.call('pubsub', NUMSUB, unpack(channels))
    local queued = redis.call('exists', unpack(waiting)) > 0
    for j = 1, nf do
        local shared = counts[2 * j] + classic_listeners(channels[j])
        if queued or shared > 0 then
            local k, channel = freed[j], channels[j]
            local marker = redis.call('pubsub', NUMSUB, channel .. ':redlatch-waiters')[2]
            pass_on_counted(KEYS[2 * k - 1], KEYS[2 * k], channel, shared, marker)
        end
    end
end
return table.concat(out, ' ')
