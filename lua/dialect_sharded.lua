-- dialect_sharded.lua: prepended to every script run on a Redis >= 7 cluster: unlock
-- messages go out with sharded pub/sub (SPUBLISH), where Redisson's waiters and ours
-- SSUBSCRIBE; classic and sharded pub/sub do not reach each other.
local PUBLISH, NUMSUB = 'spublish', 'shardnumsub'
