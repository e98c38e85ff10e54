-- Redisson 3.x RedissonSemaphore.releaseAsync. KEYS: name, channel; ARGV: permits (test fixture, as the Java client sends it).
local value = redis.call('incrby', KEYS[1], ARGV[1]); redis.call('publish', KEYS[2], value); 
