-- renew.lua: the watchdog's batched lease extension, one call for many locks.
--
-- KEYS[1]      the first lock's name: it routes the call (on a cluster, to the node
--              serving its slot); the locks are named in ARGV, so one call may renew
--              every lock a node serves, whatever their slots
-- ARGV[1]      lease in milliseconds
-- ARGV[2i]     lock i's name
-- ARGV[2i+1]   the holder id expected in it
--
-- Returns an array with one entry per lock: 1 = the holder still holds it and the lease
-- was set back to ARGV[1]; 0 = the holder is gone (the lock is lost) or the key is not a
-- lock; -1 = this node does not serve the key (its slot moved): renew it through
-- routing. A renewal never creates a key, so it cannot resurrect a released lock, and
-- never shortens a longer lease set by an explicit-lease hold of the same holder.
-- Any other error (a refused permission) fails the whole call: reporting such locks as
-- lost would hide the cause.
local out = {}
for i = 2, #ARGV, 2 do
    local name, holder = ARGV[i], ARGV[i + 1]
    local held = redis.pcall('hexists', name, holder)
    if type(held) == 'table' and held.err then
        local e = string.lower(held.err)
        if string.find(e, '^wrongtype') then
            held = 0
        elseif string.find(e, 'non local key') or string.find(e, 'slot') then
            held = -1
        else
            return redis.error_reply(held.err)
        end
    end
    if held == 1 then
        if redis.call('pttl', name) < tonumber(ARGV[1]) then redis.call('pexpire', name, ARGV[1]) end
        out[#out + 1] = 1
    else
        out[#out + 1] = held
    end
end
return out
