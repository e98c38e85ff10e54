-- Redisson 4.7 (unchanged since 3.x) RedissonCountDownLatch.trySetCountAsync. KEYS: name, channel; ARGV: 1, count, publish (test fixture, as the Java client sends it).
if redis.call('exists', KEYS[1]) == 0 then redis.call('set', KEYS[1], ARGV[2]); redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1 else return 0 end
