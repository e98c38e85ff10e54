-- examples/cas.lua: compare-and-set, run guarded by a lock (GuardedScript's example and
-- tests). KEYS[1] the key; ARGV[1] the expected value; ARGV[2] the new value.
-- Returns 1 if the value was swapped, 0 if it was not the expected one.
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('set', KEYS[1], ARGV[2])
    return 1
end
return 0
