-- Redisson 4.7 (unchanged since 3.x) RedissonSemaphore.tryAcquireAsync. KEYS: name; ARGV: permits (test fixture, as the Java client sends it).
local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;
