-- Redisson 4.7 RedissonSemaphore.releaseAsync. KEYS: name, channel; ARGV: permits, publish command (publish, or spublish on a sharded cluster) (test fixture, as the Java client sends it).
local value = redis.call('incrby', KEYS[1], ARGV[1]); redis.call(ARGV[2], KEYS[2], value);
