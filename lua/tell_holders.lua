-- tell_holders.lua: shared prelude of force_release.lua and fair_force_release.lua
-- (prepended at build time, never run on its own).
--
-- tell_holders(key, prefix): publishes '!deleted|<client id>|<key>' on the notice
-- channel "<prefix>:{<client id>}" of each client holding the lock hash `key` (its
-- fields are "<client id>:<n>"), once per client. Every redlatch client listens there
-- (one subscription per client, revoke.rs) and renews its holds of `key` at once, to
-- find them gone, instead of at its next renewal round. Classic PUBLISH, whatever the
-- dialect: a Redis Cluster's bus takes it to every node, so it reaches the client's
-- subscription on whichever node its channel's slot lives. Best effort: a user whose
-- ACL lacks HKEYS or the channel still force-unlocks, and the holder learns it at that
-- round.
local function tell_holders(key, prefix)
    local fields = redis.pcall('hkeys', key)
    if type(fields) ~= 'table' or fields.err then return end
    local told = {}
    for _, field in ipairs(fields) do
        local client = string.match(field, '^([^:]+):')
        if client and not told[client] then
            told[client] = true
            redis.pcall('publish', prefix .. ':{' .. client .. '}', '!deleted|' .. client .. '|' .. key)
        end
    end
end
