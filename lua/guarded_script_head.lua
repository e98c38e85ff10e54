-- guarded_script_head.lua: wraps a user's script so that it runs only while a lock is
-- held by the guard's holder: guarded_check.lua, this head, the user's script, then
-- guarded_script_tail.lua. The user's script sees its own KEYS and ARGV (from 1), as
-- if it were run alone.
--
-- KEYS[1]  the lock's key; KEYS[2] its fence; KEYS[3..] the user's keys
-- ARGV[1]  the guard's holder id; ARGV[2] its fencing token ('' for none); ARGV[3..]
--          the user's arguments
local refused = guarded_check(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if refused then
    return refused
end
local guarded_keys, guarded_argv = {}, {}
for i = 3, #KEYS do
    guarded_keys[#guarded_keys + 1] = KEYS[i]
end
for i = 3, #ARGV do
    guarded_argv[#guarded_argv + 1] = ARGV[i]
end
local function guarded_user_script(KEYS, ARGV)
