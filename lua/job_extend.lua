-- job_extend.lua: keep a scheduled job's run alive (ShedLock's KeepAliveLockProvider
-- and its safe-update extend): compare-and-pexpire of the job's lock.
--
-- KEYS[1]  the job's lock key (string)
-- ARGV[1]  the run's value
-- ARGV[2]  the new lease in milliseconds
--
-- Returns 1 if the key held the value and its lease was set, 0 if not (the run lost
-- it). A key of another type answers 0 too (the run does not hold it).
local v = redis.pcall('get', KEYS[1])
if type(v) == 'string' and v == ARGV[1] then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
return 0
