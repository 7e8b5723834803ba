-- create: the task record appears whole or not at all, with the first entry of its timeline, and its event goes
-- out in the same step. A task an idempotency key made (createOnce) keeps the key's digest in its record: the id
-- is derived from the key, so finding the id taken is finding the key used, in this one step.
-- A key whose task was deleted (its tombstone) or expired (its expired-marker) is retired while those last: its id
-- never serves a new task (an approver's decision about that id must not run another call).
-- KEYS[1] task hash, KEYS[2] its timeline list, KEYS[3] its expired-marker, KEYS[4] its deleted-tombstone
-- ARGV[1] event channel; ARGV[2] timeline length; ARGV[3] the idempotency digest ('' when no key made the id);
-- ARGV[4..] field/value pairs
-- Returns {'created', summary} (without the stored call: it can be megabytes, and the event reaches every
-- replica). When the task exists already: {'exists'} without a digest; with one, {'existing', summary} when it is
-- the same principal's task made for the same digest, else {'conflict'}; with a digest and no task, {'retired',
-- 'deleted' | 'expired'} for a retired key.
--! include _now
--! include _summary
--! include _timeline
local digest = ARGV[3]
if redis.call('EXISTS', KEYS[1]) == 1 then
  if digest == '' then return {'exists'} end
  local principal
  for i = 4, #ARGV, 2 do
    if ARGV[i] == 'principal' then principal = ARGV[i + 1] end
  end
  local held = redis.call('HMGET', KEYS[1], 'principal', 'idempotency')
  if held[1] == principal and held[2] == digest then return {'existing', summary(KEYS[1])} end
  return {'conflict'}
end
if digest ~= '' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return {'retired', 'deleted'} end
  if redis.call('EXISTS', KEYS[3]) == 1 then return {'retired', 'expired'} end
end
local us = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'createdMs', tostring(now), 'createdUs', us, 'updatedMs', tostring(now), 'status', 'working', unpack(ARGV, 4))
if digest ~= '' then redis.call('HSET', KEYS[1], 'idempotency', digest) end
-- A timeline left by an earlier task of this id (a native id an upstream reused, a key used again after its task
-- went) is not this task's.
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
return {'created', fields}
