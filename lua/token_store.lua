-- token_store.lua: the token-checking store of scripts/chaos.sh's fenced phase (not
-- used by the library). A write is accepted only if its fencing token is newer than
-- every token accepted before, as a storage that honours fencing tokens would do.
--
-- KEYS[1]  the newest accepted token
-- ARGV[1]  the writer's token
--
-- Returns 1 if accepted (and recorded), 0 if the token is stale.
if tonumber(redis.call('get', KEYS[1]) or '0') < tonumber(ARGV[1]) then
    redis.call('set', KEYS[1], ARGV[1])
    return 1
end
return 0
