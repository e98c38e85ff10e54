-- acquire_op.lua: one plain acquire inside a group-commit call (batch.lua,
-- batch_node.lua, each prepends this file): exactly acquire.lua's steps on the lock's
-- own keys, and its answers as the batch's two integers:
--   {1, 1} fresh or claimed, {2, count} re-entered, {0, pttl} busy (the waiter's
--   ticket registered), {3, 0} the key holds a value of another type; nothing changed
--
-- fresh:      the caller knows the lock does not exist (its probe counted 0): no TYPE
-- registered: the ticket may be in the waiter registry: a take removes it from there
--             and a hand-over to it is claimed (false when the caller's probe knows
--             the registry does not exist, or no attempt carried the ticket before:
--             batch.lua's op "A")
-- client:     the waiter's ticket or "" (as acquire.lua)
--
-- "<registry>:handed" is read with pcall, as acquire.lua reads it: on a cluster slot being
-- migrated, a missing key is refused inside a script (pass_on.lua invariant 5), and a
-- missing key names no hand-over.

local function acquire_op(name, waiters, lease, holder, client, fresh, registered)
    local kind = fresh and 'none' or redis.call('type', name).ok
    if kind == 'none' then
        redis.call('hincrby', name, holder, '1')
        redis.call('pexpire', name, lease)
        if client ~= '' and registered then redis.call('zrem', waiters, client) end
        return 1, 1
    elseif kind ~= 'hash' then
        return 3, 0
    end
    local mine = redis.call('hexists', name, holder) == 1
    if mine and client ~= '' and registered
        and redis.pcall('get', waiters .. ':handed') == client then
        redis.call('del', waiters .. ':handed')
        redis.call('pexpire', name, lease)
        return 1, 1
    elseif mine then
        local count = redis.call('hincrby', name, holder, '1')
        if redis.call('pttl', name) < tonumber(lease) then redis.call('pexpire', name, lease) end
        if client ~= '' and registered then redis.call('zrem', waiters, client) end
        return 2, count
    end
    local pttl = redis.call('pttl', name)
    if client ~= '' then
        local t = redis.call('time')
        redis.call('zadd', waiters, 'NX', t[1] * 1000 + math.floor(t[2] / 1000), client)
        local keep = math.max(pttl, tonumber(lease)) + 10000
        if redis.call('pttl', waiters) < keep then redis.call('pexpire', waiters, keep) end
    end
    return 0, pttl
end
