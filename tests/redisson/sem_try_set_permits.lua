-- Redisson 3.x RedissonSemaphore.trySetPermitsAsync. KEYS: name, channel; ARGV: permits (test fixture, as the Java client sends it).
local value = redis.call('get', KEYS[1]); if (value == false) then redis.call('set', KEYS[1], ARGV[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1;end;return 0;
