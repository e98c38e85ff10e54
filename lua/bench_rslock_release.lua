-- The release script of rslock (the Rust Redlock crate), which the benchmark harness
-- runs as its reference peer (redlatch-bench/src/bench/peer.rs); not used by the
-- library. Deletes the key only if it still holds this acquisition's random value.
-- KEYS[1] the lock key; ARGV[1] the value its SET NX PX wrote.
-- Returns 1 if deleted, 0 if the key held another value or none.
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
