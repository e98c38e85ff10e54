-- election_proclaim.lua: record the leader of an election and log the change
-- (redlatch's own keys; Redisson has no election).
--
-- An election is a fenced lock: its holder leads, its fencing token is the term. The
-- leader record says who leads and what it advertises; the change log lets observers
-- see every change once, in order (they read it after each message on the channel).
--
-- KEYS[1]  the election's lock "redlatch_election:{name}" (HASH holder -> hold count)
-- KEYS[2]  the leader record "redlatch_election_leader:{name}" (HASH holder, term, value)
-- KEYS[3]  the change log "redlatch_election_log:{name}" (STREAM event, term, value)
-- ARGV[1]  the leader's holder id
-- ARGV[2]  its term (the fencing token of its lock)
-- ARGV[3]  the value it advertises
-- ARGV[4]  'elected' (first record of the term) or 'proclaimed' (a new value, same term)
-- ARGV[5]  the change channel "redlatch_election__channel:{name}" (same hash slot)
-- ARGV[6]  how many log entries to keep (approximately: MAXLEN ~)
--
-- Returns the log entry's id, or 0 when nothing was written: the holder does not hold
-- the lock any more (its lease ran out: another may lead), a later term is recorded,
-- or (proclaimed) the record is not this holder's term.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
local rec = redis.call('hmget', KEYS[2], 'holder', 'term')
local recorded = tonumber(rec[2] or '0')
if recorded > tonumber(ARGV[2]) then
    return 0
end
if ARGV[4] == 'proclaimed' and (rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2]) then
    return 0
end
redis.call('hset', KEYS[2], 'holder', ARGV[1], 'term', ARGV[2], 'value', ARGV[3])
local id = redis.call('xadd', KEYS[3], 'MAXLEN', '~', ARGV[6], '*',
    'event', ARGV[4], 'term', ARGV[2], 'value', ARGV[3])
redis.call(PUBLISH, ARGV[5], ARGV[2])
return id
