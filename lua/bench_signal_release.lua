-- The release of python-redis-lock (4.0), the BLPOP-signalled lock, which the benchmark
-- harness runs as a W7 peer (redlatch-bench/src/bench/signal_peer.rs); not used by the
-- library. If the lock key still holds this acquisition's token: the signal list is
-- replaced by one element (waking one BLPOP waiter) that expires after ARGV[2] ms,
-- and the lock key is deleted.
-- KEYS[1] "lock:<name>", KEYS[2] "lock-signal:<name>"; ARGV[1] the token, ARGV[2] the
-- signal's expiry in ms. Returns 0 when released, 1 when the key held another token.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
    return 1
end
redis.call('del', KEYS[2])
redis.call('lpush', KEYS[2], 1)
redis.call('pexpire', KEYS[2], ARGV[2])
redis.call('del', KEYS[1])
return 0
