-- revoke_request.lua: ask a lock's holders to release it (cooperative revocation,
-- Curator's makeRevocable; redlatch's own keys: Redisson holders never see it).
--
-- The request is kept in a marker beside the lock, so a holder whose client's pub/sub
-- connection was re-made (and may have missed the message) still finds it; the message
-- on each holder's client's notice channel tells it at once.
--
-- KEYS[1]  the lock's key (HASH holder -> hold count; a read-write lock's `mode` field
--          is not a holder)
-- KEYS[2]  the marker "redlatch_revoke:{name}" (HASH holder -> 1), expiring with the
--          lock's lease
-- ARGV[1]  the notice channel prefix "redlatch_client__channel"; every redlatch client
--          with uuid U listens on "<prefix>:{U}" (revoke.rs), whether or not its guards
--          asked for requests
-- ARGV[2]  the marker's lifetime in ms when the lock has no expiry
--
-- Publishes '!revoke|<holder>|<KEYS[1]>' for each holder, classic PUBLISH (a Redis
-- Cluster's bus takes it to every node).
--
-- Returns {listeners, holders}: how many subscribers the messages reached on this
-- server (once per client; on a Redis Cluster only those whose subscription is on this
-- node), and the holder ids asked. A holder id is "<client uuid>:<n>[:write]".
local holders = {}
local listeners = 0
local clients = {}
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if field ~= 'mode' then
        holders[#holders + 1] = field
        redis.call('hset', KEYS[2], field, '1')
        local client = string.match(field, '^([^:]+):')
        if client then
            local n = redis.call('publish', ARGV[1] .. ':{' .. client .. '}',
                '!revoke|' .. field .. '|' .. KEYS[1])
            if not clients[client] then
                clients[client] = true
                listeners = listeners + n
            end
        end
    end
end
if #holders > 0 then
    -- PTTL 0 is the lock's last millisecond (Redis drops a key once its millisecond
    -- clock passes the expiry): the marker goes 1 ms later, not after ARGV[2].
    local ttl = redis.call('pttl', KEYS[1])
    if ttl < 0 then
        ttl = tonumber(ARGV[2])
    elseif ttl == 0 then
        ttl = 1
    end
    redis.call('pexpire', KEYS[2], ttl)
end
return {listeners, holders}
