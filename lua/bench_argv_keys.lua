-- bench_argv_keys.lua: `redlatch bench --workload grouping` only. Put before a batch
-- script (lock names in KEYS) to send it per cluster node: the call declares no keys
-- and passes ARGV[1] = n, ARGV[2..n+1] = the names, then the script's own arguments;
-- the script below runs unchanged, seeing those as its KEYS and ARGV.
local n = tonumber(ARGV[1])
local keys, args = {}, {}
for i = 1, n do keys[i] = ARGV[i + 1] end
for i = n + 2, #ARGV do args[#args + 1] = ARGV[i] end
local KEYS, ARGV = keys, args
