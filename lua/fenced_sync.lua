-- fenced_sync.lua: raise a fencing counter to at least a value (Redlock write-back).
--
-- KEYS[1]  token counter "redisson_lock_token:{name}"
-- KEYS[2]  optional: the counter's epoch "redlatch_token_epoch:{name}"
-- KEYS[3]  with KEYS[2]: the lock name (HASH holder -> hold count)
-- ARGV[1]  the token about to be handed out (the maximum seen on a majority)
-- ARGV[2]  with KEYS[2]: the holder id of the acquisition writing back
--
-- Returns the counter after the call. The counter never decreases, so writing the
-- maximum back to a majority keeps tokens monotonic when a minority loses its counter.
--
-- With KEYS[2], the epoch is set to this server's run_id, which makes the server
-- *current* for fenced_acquire.lua until it restarts, but only while the holder holds
-- the lock here: a write-back that arrives late (its holder paused past the lease, or
-- this server restarted empty since it granted the lock) raises the counter and
-- leaves the epoch alone, so a server is current only by a write-back of a holder it
-- granted the lock to since it last started.
local run_id
if KEYS[2] then
    -- Read before any write: a server whose ACL refuses INFO fails the call unchanged.
    run_id = string.match(redis.call('info', 'server'), 'run_id:(%w+)')
    if not run_id then return redis.error_reply('ERR no run_id in INFO server') end
end
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then
    redis.call('set', KEYS[1], ARGV[1])
    current = wanted
end
if run_id and redis.call('hexists', KEYS[3], ARGV[2]) == 1 then
    redis.call('set', KEYS[2], run_id)
end
return current
