-- job_acquire.lua: begin a scheduled job's run (docs/jobs.md). The job's lock is
-- ShedLock's: a STRING at `<prefix>:<env>:<name>` holding `ADDED:<instant>@<host>:<uuid>`,
-- taken with `SET NX PX lockAtMostFor`, so ShedLock's RedisLockProvider and redlatch
-- exclude each other on one name. Beside it, in the same hash slot, redlatch's record
-- (HASH `redlatch_job:{<key>}`): the last completed tick and the run in progress, which
-- ShedLock neither reads nor writes.
--
-- KEYS[1]  the job's lock key (string)
-- KEYS[2]  the job's record (hash)
-- ARGV[1]  lease (at_most) in milliseconds
-- ARGV[2]  the run's value, `ADDED:<ISO instant>@<host>:<uuid>`
-- ARGV[3]  the tick this run is for, ms since the epoch; '' when the job has no tick
-- ARGV[4]  the job's period in ms ('0': none, explicit ticks)
-- ARGV[5]  now, ms since the epoch (the caller's clock: the run's start as recorded)
-- ARGV[6]  host, ARGV[7] app (who runs it, for `redlatch jobs` and skipped runs)
-- ARGV[8]  the record's expiry in milliseconds
--
-- Returns:
--   {1, done, abandoned}  granted; done = the last completed tick before it ('' none),
--                         abandoned = a tick begun after it and never completed ('')
--   {0, value, pttl, app} held by another run: its value, its lease left (-1 none),
--                         its app when the record names the run ('' otherwise)
--   {2, done}             the tick is done already (done >= ARGV[3]): not taken
--   {3, which}            KEYS[which] holds a value of another type: not taken
--
-- Invariants: the lock is written only by SET NX (ShedLock's own acquire), so a
-- running ShedLock or redlatch run is never displaced; a tick recorded as done is
-- never run again through this script, whoever holds the lock, because the record
-- is read in the same script that takes the lock.
local t = redis.call('type', KEYS[2]).ok
if t ~= 'none' and t ~= 'hash' then
    return {3, 2}
end
t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
    return {3, 1}
end
local done = redis.call('hget', KEYS[2], 'done')
if ARGV[3] ~= '' and done and tonumber(done) >= tonumber(ARGV[3]) then
    return {2, done}
end
if not redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
    local value = redis.call('get', KEYS[1])
    local app = ''
    if redis.call('hget', KEYS[2], 'value') == value then
        app = redis.call('hget', KEYS[2], 'app') or ''
    end
    return {0, value, redis.call('pttl', KEYS[1]), app}
end
local abandoned = ''
local began = redis.call('hget', KEYS[2], 'began')
if began and began ~= '' and (not done or tonumber(began) > tonumber(done))
        and (ARGV[3] == '' or tonumber(began) < tonumber(ARGV[3])) then
    abandoned = began
end
redis.call('hset', KEYS[2], 'began', ARGV[3], 'began_at', ARGV[5], 'value', ARGV[2],
    'host', ARGV[6], 'app', ARGV[7], 'period', ARGV[4])
redis.call('pexpire', KEYS[2], ARGV[8])
return {1, done or '', abandoned}
