-- guarded_write.lua: one write that Redis applies only while a lock is held by the
-- guard's holder (guarded_check.lua is prepended). All keys are in the lock's hash slot.
--
-- KEYS[1]  the lock's key
-- KEYS[2]  its fence "redlatch_fence:{name}" (guarded_check.lua)
-- KEYS[3..] the keys written
-- ARGV[1]  the guard's holder id
-- ARGV[2]  its fencing token, '' for none
-- ARGV[3]  the write: 'set' value [px-ms] | 'hset' field value [field value ...] | 'del' |
--          'incrby' n | 'rpush' value [value ...] | 'xadd' field value [field value ...]
-- ARGV[4..] the write's arguments
--
-- Returns the command's reply (SET: 'OK'; HSET: fields added; DEL: keys removed; INCRBY:
-- the new value; RPUSH: the list's length; XADD: the entry's id), or guarded_check's
-- error when the lock is not held.
local refused = guarded_check(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if refused then
    return refused
end
local op = ARGV[3]
local args = {}
for i = 4, #ARGV do
    args[#args + 1] = ARGV[i]
end
if op == 'set' then
    if args[2] then
        return redis.call('set', KEYS[3], args[1], 'px', args[2])
    end
    return redis.call('set', KEYS[3], args[1])
elseif op == 'hset' then
    return redis.call('hset', KEYS[3], unpack(args))
elseif op == 'del' then
    local keys = {}
    for i = 3, #KEYS do
        keys[#keys + 1] = KEYS[i]
    end
    return redis.call('del', unpack(keys))
elseif op == 'incrby' then
    return redis.call('incrby', KEYS[3], args[1])
elseif op == 'rpush' then
    return redis.call('rpush', KEYS[3], unpack(args))
elseif op == 'xadd' then
    return redis.call('xadd', KEYS[3], '*', unpack(args))
end
return redis.error_reply('ERR unknown guarded write ' .. tostring(op))
