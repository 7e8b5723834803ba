-- transition: checks the current status, applies the change (a status change also goes on the task's timeline),
-- sets the expiry of a terminal task and emits the event, atomically. Terminal is forever.
-- KEYS[1] task hash, KEYS[2] expired-marker, KEYS[3] timeline list
-- ARGV[1] event channel, ARGV[2] new status, ARGV[3] message mode ('keep'|'set'|'clear'), ARGV[4] message,
-- ARGV[5] outcome JSON or '', ARGV[6] result grace ms, ARGV[7] how long the marker outlives the record,
-- ARGV[8] input-requests mode ('keep'|'set'|'clear'), ARGV[9] input requests JSON, ARGV[10] attempt or '',
-- ARGV[11] queued mark ('keep'|'set'|'clear'), ARGV[12] timeline length
-- Returns {'ok', summary...}, {'terminal', summary...} or {'not_found'}.
--! include _summary
--! include _timeline
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {'not_found'} end
local terminal = { completed = true, failed = true, cancelled = true }
if terminal[current] then return {'terminal', unpack(summary(KEYS[1]))} end
--! include _now
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updatedMs', tostring(now))
if ARGV[3] == 'set' then redis.call('HSET', KEYS[1], 'message', ARGV[4])
elseif ARGV[3] == 'clear' then redis.call('HDEL', KEYS[1], 'message') end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'outcome', ARGV[5]) end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'attempt', ARGV[10]) end
if ARGV[11] == 'set' then redis.call('HSET', KEYS[1], 'queued', '1')
elseif ARGV[11] == 'clear' or terminal[ARGV[2]] then redis.call('HDEL', KEYS[1], 'queued') end
-- A task's stored call is kept only to run it again, which an ended task never is.
if terminal[ARGV[2]] then redis.call('HDEL', KEYS[1], 'call') end
if ARGV[8] == 'clear' or terminal[ARGV[2]] then redis.call('HDEL', KEYS[1], 'openRequests')
elseif ARGV[8] == 'set' then redis.call('HSET', KEYS[1], 'openRequests', ARGV[9]) end
if current ~= ARGV[2] then timeline(KEYS[3], ARGV[2], now, redis.call('HGET', KEYS[1], 'message'), tonumber(ARGV[12])) end
if terminal[ARGV[2]] then
  local created = tonumber(redis.call('HGET', KEYS[1], 'createdMs'))
  local retention = tonumber(redis.call('HGET', KEYS[1], 'retentionMs'))
  local expireAt = math.max(created + retention, now + tonumber(ARGV[6]))
  redis.call('PEXPIREAT', KEYS[1], expireAt)
  redis.call('PEXPIREAT', KEYS[3], expireAt)
  redis.call('SET', KEYS[2], '1', 'PXAT', expireAt + tonumber(ARGV[7]))
end
local fields = summary(KEYS[1])
redis.call('PUBLISH', ARGV[1], cjson.encode(fields))
return {'ok', unpack(fields)}
