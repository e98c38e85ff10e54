-- election_read.lua: who leads an election now, and the changes logged after an id.
--
-- KEYS[1]  the election's lock "redlatch_election:{name}" (HASH holder -> hold count)
-- KEYS[2]  the leader record "redlatch_election_leader:{name}" (HASH holder, term, value)
-- KEYS[3]  the change log "redlatch_election_log:{name}" (STREAM event, term, value)
-- ARGV[1]  the id of the last change the caller has seen, or '' for none (then no
--          entries are returned: the caller starts from now)
-- ARGV[2]  at most this many entries
--
-- Returns {leader, last, entries}:
--   leader   {term, value, holder, pttl} while the recorded holder still holds the
--            lock (a leader whose lease ran out is no leader), else an empty array
--   last     the id of the newest log entry, '0-0' when the log is empty
--   entries  the log entries after ARGV[1] (XRANGE's shape: {id, {field, value, ...}})
local leader = {}
local rec = redis.call('hmget', KEYS[2], 'holder', 'term', 'value')
if rec[1] and redis.call('hexists', KEYS[1], rec[1]) == 1 then
    leader = {rec[2], rec[3] or '', rec[1], redis.call('pttl', KEYS[1])}
end
local newest = redis.call('xrevrange', KEYS[3], '+', '-', 'COUNT', 1)[1]
local last = newest and newest[1] or '0-0'
local entries = {}
if ARGV[1] ~= '' then
    entries = redis.call('xrange', KEYS[3], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
end
return {leader, last, entries}
