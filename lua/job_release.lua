-- job_release.lua: end a scheduled job's run (docs/jobs.md): give back ShedLock's lock
-- the way ShedLock does, and write the run into redlatch's record in the same script.
--
-- KEYS[1]  the job's lock key (string)
-- KEYS[2]  the job's record (hash)
-- ARGV[1]  the run's value
-- ARGV[2]  ms the lock must still be kept (what is left of at_least); 0: delete it
-- ARGV[3]  the run's tick, ms since the epoch ('' none)
-- ARGV[4]  outcome: 'ran', 'panicked', 'cancelled', 'failed' (the run ended), or
--          'undo' (a Redlock attempt that took a minority: forget it, record nothing)
-- ARGV[5]  the run's start, ARGV[6] its end, ms since the epoch (the caller's clock)
-- ARGV[7]  host, ARGV[8] app
-- ARGV[9]  the record's expiry in milliseconds
-- ARGV[10] how many ticks the run was told were missed before it
--
-- Returns 1 if the key held the value (it was deleted, or kept for ARGV[2] ms), 0 if
-- not (the lease ran out, another run or a force-unlock took it: left alone). A key of
-- another type fails with WRONGTYPE.
--
-- Invariants: only the run's own key is changed (ShedLock's safe-update release:
-- compare-and-delete, or compare-and-pexpire for what is left of lockAtLeastFor);
-- `done` only grows, and only a run that ran to its end ('ran') marks its tick done,
-- so a tick whose run panicked, was cancelled or died is reported as missed to the
-- next run. (A wake signal for waiters, when simple-lock releases publish one, goes
-- here too.)
local held = redis.call('get', KEYS[1]) == ARGV[1]
if held then
    if tonumber(ARGV[2]) > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
    else
        redis.call('del', KEYS[1])
    end
end
local mine = redis.call('hget', KEYS[2], 'value') == ARGV[1]
if ARGV[4] == 'undo' then
    if mine then
        redis.call('hdel', KEYS[2], 'began', 'began_at', 'value', 'host', 'app')
    end
    return held and 1 or 0
end
if ARGV[4] == 'ran' and ARGV[3] ~= '' then
    local done = redis.call('hget', KEYS[2], 'done')
    if not done or tonumber(done) < tonumber(ARGV[3]) then
        redis.call('hset', KEYS[2], 'done', ARGV[3])
    end
end
if mine then
    -- The run is over; its holder fields stay while the lock is kept for at_least.
    redis.call('hdel', KEYS[2], 'began', 'began_at')
end
redis.call('hset', KEYS[2], 'last_missed', ARGV[10], 'last_tick', ARGV[3], 'last_start', ARGV[5], 'last_end', ARGV[6],
    'last_host', ARGV[7], 'last_app', ARGV[8], 'last_outcome', ARGV[4])
redis.call('hincrby', KEYS[2], 'runs', 1)
redis.call('pexpire', KEYS[2], ARGV[9])
return held and 1 or 0
