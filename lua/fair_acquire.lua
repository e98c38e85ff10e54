-- fair_acquire.lua: take, re-enter or queue for a fair (FIFO) lock. fair_evict.lua is
-- prepended.
--
-- KEYS[1]  lock name (HASH holder -> hold count)
-- KEYS[2]  queue "redisson_lock_queue:{name}" (LIST of holder ids)
-- KEYS[3]  deadlines "redisson_lock_timeout:{name}" (ZSET holder -> ms deadline)
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}" (waiter channel = prefix:holder)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  holder id
-- ARGV[3]  stale timeout in ms: a waiter's deadline is now + this, refreshed by each call
-- ARGV[4]  "1" to join (or stay in) the queue when the lock is busy, "0" to only try
--
-- Returns {1, 1} acquired fresh, {2, count} re-entered, {0, pttl} not acquired (pttl of
-- the lock, -2 when the lock is free but another waiter is ahead).
--
-- Invariants: the lock is only granted to the queue head (or to anyone when the queue is
-- empty); the queue keys expire at the latest waiter deadline if every waiter dies.
local now = now_ms()
local evicted = evict_stale(KEYS[2], KEYS[3], now)
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 then
    if head == false or head == ARGV[2] then
        if head ~= false then
            redis.call('lpop', KEYS[2])
        end
        redis.call('zrem', KEYS[3], ARGV[2])
        redis.call('hincrby', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, 1}
    end
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end
    return {2, count}
end
local pttl = redis.call('pttl', KEYS[1])
if ARGV[4] == '1' then
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
    if redis.call('lpos', KEYS[2], ARGV[2]) == false then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
    -- The keys live until the latest deadline, whoever set it: clients may use
    -- different stale timeouts, and a short one must not cut the others' entries.
    local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')[2]
    last = string.format('%d', math.ceil(tonumber(last)))
    redis.call('pexpireat', KEYS[2], last)
    redis.call('pexpireat', KEYS[3], last)
end
if evicted > 0 and pttl == -2 then
    head = redis.call('lindex', KEYS[2], 0)
    if head ~= false and head ~= ARGV[2] then
        redis.call('publish', KEYS[4] .. ':' .. head, '0')
    end
end
return {0, pttl}
