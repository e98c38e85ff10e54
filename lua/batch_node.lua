-- batch_node.lua: group commit on a Redis Cluster node: many plain acquires and
-- releases of locks in any of the hash slots one primary serves, in one call. Each
-- operation behaves exactly like acquire.lua / release.lua on its own keys (as in
-- batch.lua); pass_on.lua and acquire_op.lua are prepended, and the call carries the
-- allow-cross-slot-keys flag (Redis >= 7; lua/cross_slot_write_flags.lua, without allow-oom: a node out of
-- memory refuses the call before it runs): the locks are named in ARGV, not declared,
-- so their slots may differ. Multi-key commands stay within one slot (the lock, its registry and its
-- "<registry>:handed" key share the name's hash tag): Redis refuses a multi-key
-- command across slots even in such a script.
--
-- KEYS[1] = the first operation's lock name: it only routes the call (to the node
-- serving its slot). ARGV[1] = the operations' codes, one character each, and ARGV[2]
-- = every operation's lease or "", as batch.lua's; from ARGV[3] on, per operation: its
-- lease (only when ARGV[2] is ""), holder id, lock name, waiter registry
-- "redlatch_lock_waiters:{name}", then for a release the unlock channel, for an
-- acquire the waiter's ticket or "" (as batch.lua).
--
-- Returns one string, two decimal integers per operation separated by spaces, as
-- batch.lua: its answers, and
--   4 0 this node does not serve the lock's slot now, or the slot is being migrated
--          (or the probe was refused): nothing was done; the caller sends the
--          operation alone, routed by its own keys. Every later operation of the same
--          lock in the call answers 4 0 too, so their order is kept.
--
-- Invariant: an operation writes nothing unless its slot is served here and stable.
-- Its first call, EXISTS of a key nobody writes ("<registry>:absent") with the lock,
-- its registry and "<registry>:handed", fails inside a script for a slot served
-- elsewhere and, the probe key being missing, for a slot being migrated or imported
-- (ASK / TRYAGAIN): a key the operation deletes could not be written again mid-script.
-- Every call after it is on a local, stable slot, so the script never fails half-way.
-- Its count doubles as the fast path: 0 = nothing of the lock exists (an acquire takes
-- it with HINCRBY + PEXPIRE, a release answers "not held"); 1 for a release whose holder
-- holds the last hold = only the lock exists (no registry, no hand-over pending), so
-- for a lock named once in the call its listeners are counted with every such lock's by
-- one SHARDNUMSUB at the end, and pass_on_counted runs only where someone listens.

local codes, common = ARGV[1] or '', ARGV[2]
local ops = #codes
local stride = common == '' and 5 or 4
if #ARGV ~= 2 + stride * ops then
    return redis.error_reply('ERR batch_node.lua: ' .. ops .. ' codes for ' .. #ARGV .. ' arguments')
end
local code, R, NEW = {string.byte(codes, 1, ops)}, string.byte('r'), string.byte('A')
local out = {}
local times = {}
for k = 1, ops do
    local name = ARGV[2 + stride * k - 2]
    times[name] = (times[name] or 0) + 1
end
local away = {}
local freed = {}
for k = 1, ops do
    local i = 2 + stride * k
    local op, holder, name, waiters, extra = code[k], ARGV[i - 3], ARGV[i - 2], ARGV[i - 1], ARGV[i]
    local lease = stride == 4 and common or ARGV[i - 4]
    local n = false
    if not away[name] then
        n = redis.pcall('exists', waiters .. ':absent', name, waiters, waiters .. ':handed')
    end
    if type(n) ~= 'number' then
        away[name] = true
        out[k] = '4 0'
    elseif op ~= R then
        local registered = n > 0 and op ~= NEW
        local status, value = acquire_op(name, waiters, lease, holder, extra, n == 0, registered)
        if status == 1 and value == 1 then
            out[k] = '1 1'
        else
            out[k] = string.format('%d %d', status, value)
        end
    else
        local channel = extra
        local held = false
        if n > 0 then held = redis.pcall('hget', name, holder) end
        if type(held) == 'table' then
            out[k] = '3 0'
        elseif not held then
            out[k] = '-1 0'
        elseif tonumber(held) > 1 then
            redis.call('hincrby', name, holder, '-1')
            if redis.call('pttl', name) < tonumber(lease) then redis.call('pexpire', name, lease) end
            out[k] = '0 0'
        elseif n == 1 and times[name] == 1 then
            redis.call('del', name)
            freed[#freed + 1] = k
            out[k] = '1 0'
        else
            redis.call('del', name)
            pass_on(name, waiters, channel)
            out[k] = '1 0'
        end
    end
end
if #freed > 0 then
    -- Only where someone listens on the shared channel is the marker counted: with no
    -- registry (the probe counted the lock alone), pass_on_counted would hand nothing
    -- over and publish nothing whatever the marker's count (as in batch.lua).
    -- The classic listeners of every freed lock's channel in one call, beside the
    -- dialect's own count (one call per lock cost a call per release).
    local channels = {}
    for j, k in ipairs(freed) do channels[j] = ARGV[2 + stride * k] end
    local counts = redis.call('pubsub', NUMSUB, unpack(channels))
    local classic = classic_listeners_each(channels)
    for j, k in ipairs(freed) do
        local shared = counts[2 * j] + classic[j]
        if shared > 0 then
            local marker = redis.call('pubsub', NUMSUB, channels[j] .. ':redlatch-waiters')[2]
            pass_on_counted(ARGV[2 + stride * k - 2], ARGV[2 + stride * k - 1], channels[j], shared, marker)
        end
    end
end
return table.concat(out, ' ')
