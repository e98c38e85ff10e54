-- dialect_classic.lua: prepended to every script run on a standalone server, a
-- Redlock master or a Sentinel primary (and a cluster older than Redis 7): unlock
-- messages go out with classic pub/sub.
local PUBLISH, NUMSUB = 'publish', 'numsub'
