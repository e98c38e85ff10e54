-- tell_holders.lua: shared prelude of force_release.lua and fair_force_release.lua
-- (prepended at build time, never run on its own).
--
-- tell_holders(key, prefix): publishes 'deleted' on "<prefix>:<client id>" for each
-- client holding the lock hash `key` (its fields are "<client id>:<n>"), once per
-- client: a holder listening there (revoke.rs) renews at once and finds its hold gone,
-- instead of at its next renewal round. Best effort: a user whose ACL lacks HKEYS or
-- the revoke channel still force-unlocks, and the holder learns it at that round.
local function tell_holders(key, prefix)
    local fields = redis.pcall('hkeys', key)
    if type(fields) ~= 'table' or fields.err then return end
    local told = {}
    for _, field in ipairs(fields) do
        local client = string.match(field, '^([^:]+):')
        if client and not told[client] then
            told[client] = true
            redis.pcall(PUBLISH, prefix .. ':' .. client, 'deleted')
        end
    end
end
