-- create: the task record appears whole or not at all, with the first entry of its timeline, and its event goes
-- out in the same step.
-- KEYS[1] task hash, KEYS[2] its timeline list
-- ARGV[1] event channel; ARGV[2] timeline length; ARGV[3..] field/value pairs
-- Returns the record's summary (without the stored call: it can be megabytes, and the event reaches every
-- replica), or false when the task exists already.
--! include _now
--! include _summary
--! include _timeline
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local us = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'createdMs', tostring(now), 'createdUs', us, 'updatedMs', tostring(now), 'status', 'working', unpack(ARGV, 3))
-- A timeline left by an earlier task of this id (a native id an upstream reused) is not this task's.
redis.call('DEL', KEYS[2])
timeline(KEYS[2], 'working', now, redis.call('HGET', KEYS[1], 'message'), tonumber(ARGV[2]))
-- An upstream's own task (native) may never be heard of again: it expires with its TTL from creation, running or not
-- (a terminal transition later sets its expiry anew).
if redis.call('HGET', KEYS[1], 'native') == '1' then
  local retention = tonumber(redis.call('HGET', KEYS[1], 'retentionMs'))
  redis.call('PEXPIRE', KEYS[1], retention)
  redis.call('PEXPIRE', KEYS[2], retention)
end
local fields = summary(KEYS[1])
redis.call('PUBLISH', ARGV[1], cjson.encode(fields))
return fields
