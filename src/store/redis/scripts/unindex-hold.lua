-- unindex-hold: takes a hold out of the pending index (decided, ended, or its task gone): its id, its entry, and
-- its place among its principal's pending holds (the principal read from the entry). Idempotent.
-- KEYS[1] pending index (zset), KEYS[2] entries (hash: task id -> JSON entry)
-- ARGV[1] task id, ARGV[2] key prefix of the principals' pending holds (+ principal: the zset's key)
-- Returns 1.
local entry = redis.call('HGET', KEYS[2], ARGV[1])
if entry then
  local ok, hold = pcall(cjson.decode, entry)
  if ok and type(hold) == 'table' and type(hold.principal) == 'string' then
    redis.call('ZREM', ARGV[2] .. hold.principal, ARGV[1])
  end
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
