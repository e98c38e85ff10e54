-- acquire.lua: take or re-enter a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock name: a HASH holder -> hold count, PEXPIRE = lease
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder id "<client uuid>:<n>"
-- KEYS[2]  optional: the waiter registry "redlatch_lock_waiters:{name}" (pass_on.lua)
-- ARGV[3]  with KEYS[2]: the waiter's ticket "<holder id>:<wait n>:<lease ms>".
--          Refused, it is registered (keeping the time it was first refused);
--          granted, it is removed; handed the lock already, it claims it.
-- ARGV[4]  optional, "1": no attempt carried the ticket before, so it is neither
--          registered nor handed the lock: a grant leaves the registry alone.
--
-- Returns one string "<status> <value>" (two decimal integers, as batch.lua answers
-- each operation; a client reads one string for less than a two-integer array):
--   1 1         acquired fresh (the key did not exist), or claimed: a release handed
--               this very ticket the lock before this call ran (pass_on.lua); the
--               lease is applied again from now, as for a fresh acquisition
--   2 count     re-entered: the holder already held it, count is the new hold count
--   0 pttl      held by someone else; pttl = ms the current holder still has (-1: no expiry)
--
-- Invariants: the key is only ever created together with its PEXPIRE, so a crashed
-- holder's lock always expires; another holder's hash is never modified; a re-entry
-- never shortens the lease (an inner short lease must not cut an outer long one).
-- A key of another type fails with WRONGTYPE (reported to the caller, never overwritten).
-- A claim is recognised only by "<registry>:handed" naming this ticket: a hold of the
-- same holder from anything else is a re-entry.
local registered = ARGV[3] and not ARGV[4]
-- One PTTL answers both "does it exist" (-2: no) and, if held, for how long; a refusal
-- and a re-entry then need no second read of it.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if registered then redis.call('zrem', KEYS[2], ARGV[3]) end
    return '1 1'
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- pcall: on a slot being migrated, a missing key is refused (pass_on.lua
    -- invariant 5); missing, it names no hand-over.
    if registered and redis.pcall('get', KEYS[2] .. ':handed') == ARGV[3] then
        redis.call('del', KEYS[2] .. ':handed')
        redis.call('pexpire', KEYS[1], ARGV[1])
        return '1 1'
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if pttl < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
    if registered then redis.call('zrem', KEYS[2], ARGV[3]) end
    return string.format('2 %d', count)
end
if ARGV[3] then
    local t = redis.call('time')
    redis.call('zadd', KEYS[2], 'NX', t[1] * 1000 + math.floor(t[2] / 1000), ARGV[3])
    -- A waiter asks again at the latest when the holder's lease runs out, so the
    -- registry outlives every live entry; one of dead waiters only goes stale.
    local keep = math.max(pttl, tonumber(ARGV[1])) + 10000
    if redis.call('pttl', KEYS[2]) < keep then redis.call('pexpire', KEYS[2], keep) end
end
return string.format('0 %d', pttl)
