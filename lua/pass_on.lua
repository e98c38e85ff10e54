-- pass_on.lua: prepended to the scripts that free a plain lock (release.lua,
-- batch.lua, unwait.lua). Defines pass_on(lock, waiters, channel), called once the lock
-- key is gone: it gives the lock straight to the longest-waiting live redlatch waiter
-- (a cross-process hand-over: no acquire round trip), or, when someone else listens,
-- wakes everyone as Redisson does.
--
-- The waiter registry (ZSET "redlatch_lock_waiters:{name}", same hash tag as the lock)
-- maps a waiter's ticket to the server time (ms) it was first refused; acquire.lua adds
-- a refused waiter and removes it when granted, unwait.lua when it stops waiting. A
-- ticket is "<client uuid>:<task n>:<wait n>:<lease ms>": the waiter's holder id
-- "<client uuid>:<task n>", a number unique to this wait in its process, and the lease
-- it asked for. A waiting client listens on three channels: the shared unlock channel
-- "redisson_lock__channel:{name}" (Redisson's releases publish "0" there), its own
-- "redisson_lock__channel:{name}:<client uuid>" and the marker
-- "redisson_lock__channel:{name}:redlatch-waiters", which only says "a redlatch waiter
-- listens here" and never carries a message. The key "<registry>:handed" names the
-- ticket the lock was last handed to, until that waiter claims it (acquire.lua) or
-- disowns it (unwait.lua), the lock is freed again (a hand-over that ended needs no
-- claim) or the handed lease runs out.
--
-- Invariants:
-- 1. A subscriber of the shared channel that is not a redlatch waiter (a Redisson
--    waiter, an older redlatch) is counted as NUMSUB(shared) - NUMSUB(marker), plus
--    on a Redis 7 cluster the classic subscribers that are not redlatch's
--    (classic_listeners, dialect_sharded.lua: a Redisson that subscribes classic); when
--    there is one, "0" is published on the shared channel (publish: both ways where a
--    classic one listens), which wakes every waiter (Redisson's own behaviour), and the
--    lock is left free for them to compete.
-- 2. Otherwise the head ticket leaves the registry. If anyone listens on its client's
--    own channel here, the lock now belongs to the ticket's holder (count 1, PEXPIRE
--    the ticket's lease, "<registry>:handed" = the ticket) and the client is sent
--    "<ticket>|<lock name>" there. Nobody listening (its process died, or it was not
--    subscribed yet; one not yet subscribed asks again after subscribing): the next
--    ticket is tried, so a hand-over is never spent on a dead waiter.
-- 3. That message is published only with a hand-over: it also reaches subscribers on
--    this server's replicas (messages are replicated), who must never read one for a
--    hand-over that did not happen. So the listeners are counted first (NUMSUB, this
--    server's own), not by PUBLISH's answer after the fact.
-- 4. Every ticket skipped: "0" goes on the shared channel after all, so a live waiter
--    whose subscription is not on this server (just failed over to it, or not made
--    yet) is woken, by replication if need be, rather than left to its TTL bound.
--    Nobody registered and nobody subscribed: nothing is published, the lock stays free.
--
-- 5. On a cluster slot being migrated (MIGRATING / IMPORTING), a script may only touch
--    the slot's keys that exist here: a missing one is refused mid-script ("non local
--    key", ASK / TRYAGAIN inside a script). So the registry is read with pcall, and a
--    hand-over, which writes the lock key again after its DEL, first checks that the
--    slot is settled (EXISTS of a key nobody writes, "<registry>:absent", answers
--    instead of failing); when it is not, "0" goes on the shared channel instead, and
--    the waiters compete through ordinary acquisitions, which follow ASK. The
--    "<registry>:handed" key is deleted with pcall: missing here, it has nothing to
--    delete. On a settled slot these pcalls answer as calls do; the check costs one
--    EXISTS per hand-over.
--
-- Returns 1 if the lock was handed over, else 0.
--
-- pass_on_counted(lock, waiters, channel, shared, marker) is the same once the caller has
-- deleted "<registry>:handed" and counted the subscribers of the shared channel and of
-- the marker itself (batch.lua does both for all the locks one call frees at once).
local function settled(waiters)
    return type(redis.pcall('exists', waiters .. ':absent')) == 'number'
end

local function pass_on_counted(lock, waiters, channel, shared, marker)
    if shared > marker then
        publish(channel, '0')
        return 0
    end
    local skipped = false
    while true do
        local head = redis.pcall('zrange', waiters, 0, 0)
        if head.err then
            -- Invariant 5: the registry is not here (its slot is being migrated).
            publish(channel, '0')
            return 0
        end
        local ticket = head[1]
        if not ticket then
            if skipped then publish(channel, '0') end
            return 0
        end
        redis.call('zrem', waiters, ticket)
        local client, task, lease = string.match(ticket, '^([^:]+):([^:]+):[^:]+:(%d+)$')
        local own = client and channel .. ':' .. client
        if own and redis.call('pubsub', NUMSUB, own)[2] > 0 then
            if not settled(waiters) then
                publish(channel, '0')
                return 0
            end
            redis.call('hincrby', lock, client .. ':' .. task, 1)
            redis.call('pexpire', lock, lease)
            redis.call('set', waiters .. ':handed', ticket, 'px', lease)
            redis.call(PUBLISH, own, ticket .. '|' .. lock)
            return 1
        end
        skipped = true
    end
end

local function pass_on(lock, waiters, channel)
    redis.pcall('del', waiters .. ':handed')
    local n = redis.call('pubsub', NUMSUB, channel, channel .. ':redlatch-waiters')
    return pass_on_counted(lock, waiters, channel, n[2] + classic_listeners(channel), n[4])
end
