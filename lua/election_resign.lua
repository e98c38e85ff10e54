-- election_resign.lua: a leader steps down: its record goes and the change is logged.
-- Run while the leader still holds the lock, before it releases it, so no later
-- leader's record can be removed (the record must name this holder and term).
--
-- KEYS[1]  the leader record "redlatch_election_leader:{name}" (HASH holder, term, value)
-- KEYS[2]  the change log "redlatch_election_log:{name}" (STREAM event, term, value)
-- ARGV[1]  the leader's holder id
-- ARGV[2]  its term
-- ARGV[3]  the change channel "redlatch_election__channel:{name}"
-- ARGV[4]  how many log entries to keep (approximately)
--
-- Returns the log entry's id, or 0 when the record is not this holder's term (nothing
-- changed: another leader was elected since, or it resigned already).
local rec = redis.call('hmget', KEYS[1], 'holder', 'term', 'value')
if rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2] then
    return 0
end
redis.call('del', KEYS[1])
local id = redis.call('xadd', KEYS[2], 'MAXLEN', '~', ARGV[4], '*',
    'event', 'resigned', 'term', ARGV[2], 'value', rec[3] or '')
redis.call(PUBLISH, ARGV[3], ARGV[2])
return id
