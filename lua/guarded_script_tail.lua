
end
-- guarded_script_tail.lua: closes guarded_script_head.lua's function and runs it.
return guarded_user_script(guarded_keys, guarded_argv)
