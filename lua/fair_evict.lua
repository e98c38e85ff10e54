-- fair_evict.lua: shared prelude of the fair_*.lua scripts and drop.lua (prepended at
-- build time, never run on its own): the fair queue on Redisson's wire.
--
-- KEYS (the same in every script using this prelude):
-- KEYS[1]  lock name (HASH holder -> hold count)
-- KEYS[2]  queue "redisson_lock_queue:{name}" (LIST of waiting holder ids, head first)
-- KEYS[3]  deadlines "redisson_lock_timeout:{name}" (ZSET holder -> ms since the epoch)
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}" (waiter channel = prefix:holder)
-- KEYS[5]  liveness "redlatch_fair_alive:{name}" (ZSET redlatch holder -> ms until which
--          it is known alive; not a Redisson key, Redisson never reads it)
--
-- Design (issue 13). Redisson's RFairLock scripts (Java, in the same queue) apply this
-- arithmetic to every entry, ours included; w is a waiter's wait time (Redisson's
-- threadWaitTime = Config.fairLockWaitTimeout, 300 s by default, or tryLock's waitTime):
--   R1 join: deadline = (deadline of the last entry, or now + lock PTTL) + w;
--   R2 the head (or anyone, with no queue) acquires: every deadline left -= its w;
--   R3 a waiter gives up: every deadline behind it -= its w;
--   R4 a head whose deadline has passed is evicted; no other deadline changes.
-- Our scripts apply R1-R4 in the same way, with w = Config::fair_wait_time (set it to
-- Redisson's fairLockWaitTimeout, or more), so on the wire a redlatch waiter is a
-- Redisson waiter and Redisson's subtractions never strand one of theirs behind ours.
-- On top of that, for redlatch waiters only:
--   A1 liveness: a live waiter refreshes KEYS[5] to now + its stale timeout every third
--      of it; an entry whose liveness lapsed is provably dead and our scripts evict it
--      wherever it is (as R4: no other deadline changes).
--   A2 re-anchoring: at each refresh a live waiter raises (never lowers) its own
--      deadline to what a join at its place would give now, plus a margin behind
--      another entry: head: now + max(PTTL, 0) + w; else max(deadline ahead, now +
--      max(PTTL, 0)) + w + stale. Why enough: an entry ahead that leaves takes at most
--      w off ours (R2, R3), and it had a deadline in the future when it acquired (else
--      R4 evicts it, taking nothing off); so ours stays at least `stale` in the future,
--      and is re-anchored within stale/3. A head loses nothing until it leaves. So
--      neither Redisson's R4 nor ours ever evicts a live redlatch waiter.
--   A3 our scripts never apply R4 to an entry with live liveness; a Redisson head they
--      evict by R4 is told on its own channel, so a live thread retries (rejoins) at
--      once instead of sleeping out its TTL.
--   A4 whenever our scripts find the lock free with a queue, they wake the head.
-- Bounds: a dead redlatch waiter is evicted by the next script of a redlatch client on
-- the lock once its liveness lapsed (fair_stale_timeout after its last refresh; live
-- redlatch waiters run one every stale/3); with only Redisson clients left it goes by
-- R4, at most max(PTTL, 0) + w (+ stale) after its last refresh. A dead Redisson
-- waiter goes by R4 only: its deadline, (deadline ahead or PTTL) + threadWaitTime when
-- it joined, less the w of each waiter ahead that left since.
-- Clocks: Redisson's "now" is its client's clock, ours the Redis server's (TIME).
local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Removes `holder` from the queue, the deadlines and the liveness set.
local function forget(holder)
    redis.call('lrem', KEYS[2], 0, holder)
    redis.call('zrem', KEYS[3], holder)
    redis.call('zrem', KEYS[5], holder)
end

-- A1, then R4 (with A3): evicts dead redlatch entries anywhere, then heads whose
-- deadline has passed (or that have none, left by a broken client). Returns how many
-- entries it evicted.
local function evict(now)
    local dead = redis.call('zrangebyscore', KEYS[5], '-inf', now)
    for i = 1, #dead do
        forget(dead[i])
    end
    local evicted = #dead
    while true do
        local head = redis.call('lindex', KEYS[2], 0)
        if head == false then
            return evicted
        end
        local deadline = redis.call('zscore', KEYS[3], head)
        if deadline ~= false and (tonumber(deadline) > now
                or redis.call('zscore', KEYS[5], head) ~= false) then
            return evicted
        end
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], head)
        if deadline ~= false then
            publish(KEYS[4] .. ':' .. head, '0')
        end
        evicted = evicted + 1
    end
end

-- R2: `holder` (the head, or anyone when nobody is queued) takes the lock: it leaves
-- the queue and every deadline left moves w earlier.
local function take(holder, w)
    if redis.call('lindex', KEYS[2], 0) == holder then
        redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], holder)
    redis.call('zrem', KEYS[5], holder)
    local rest = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #rest do
        redis.call('zincrby', KEYS[3], -w, rest[i])
    end
end

-- R3: `holder` gives up: the deadlines behind it move w earlier and it leaves. Returns
-- whether it was queued.
local function leave(holder, w)
    local queue = redis.call('lrange', KEYS[2], 0, -1)
    local found = false
    for i = 1, #queue do
        if found then
            if redis.call('zscore', KEYS[3], queue[i]) ~= false then
                redis.call('zincrby', KEYS[3], -w, queue[i])
            end
        elseif queue[i] == holder then
            found = true
        end
    end
    forget(holder)
    return found
end

-- R1 and A2: queues `holder` at the tail if it is not queued, raises its deadline to
-- at least what a join at its place gives now (plus `stale` behind another entry),
-- and marks it alive until now + stale. `pttl` is the lock's PTTL.
local function join(holder, w, stale, now, pttl)
    local free_at = now + math.max(pttl, 0)
    local at = redis.call('lpos', KEYS[2], holder)
    local ahead = false
    if at == false then
        ahead = redis.call('lindex', KEYS[2], -1)
        redis.call('rpush', KEYS[2], holder)
    elseif at > 0 then
        ahead = redis.call('lindex', KEYS[2], at - 1)
    end
    local floor = free_at + w
    if ahead ~= false then
        local before = redis.call('zscore', KEYS[3], ahead)
        before = before and tonumber(before) or free_at
        floor = math.max(before, free_at) + w + stale
    end
    local current = redis.call('zscore', KEYS[3], holder)
    if current == false or tonumber(current) < floor then
        redis.call('zadd', KEYS[3], string.format('%d', floor), holder)
    end
    redis.call('zadd', KEYS[5], now + stale, holder)
    -- The liveness set lives as long as its longest-lived entry. Redisson's keys get no
    -- expiry: a Redisson waiter joining later would lose its entry with them.
    local last = redis.call('zrange', KEYS[5], -1, -1, 'withscores')[2]
    redis.call('pexpireat', KEYS[5], string.format('%d', math.ceil(tonumber(last))))
end

-- Wake whoever may take a free lock now: the queue head on its own channel, or, with
-- no queue, waiters of the plain channel (non-fair waiters of the same name).
local function wake_next(message)
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        publish(KEYS[4] .. ':' .. head, message)
    else
        publish(KEYS[4], message)
    end
end
