-- save-session: applies only to a session that exists, unless creating.
-- KEYS[1] session hash
-- ARGV[1] 'create'|'update', ARGV[2] expire after (ms), ARGV[3..] field/value triples (field, 'set'|'del', value)
-- Returns 1 when saved, 0 when the session does not exist.
if ARGV[1] ~= 'create' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 3, #ARGV, 3 do
  if ARGV[i + 1] == 'set' then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2]) else redis.call('HDEL', KEYS[1], ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
