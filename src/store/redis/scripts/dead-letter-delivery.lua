-- dead-letter-delivery: the last try failed; the delivery leaves the queue for the endpoint's dead letters (the
-- newest `kept` stay). Only while the replica still holds that try's lease, as retry-delivery.
-- KEYS[1] waiting (zset), KEYS[2] leased (zset), KEYS[3] bodies (hash), KEYS[4] state (hash), KEYS[5] bytes of the
-- bodies (counter), KEYS[6] dead letters (list of JSON, newest first); one hash tag
-- ARGV[1] id, ARGV[2] owner, ARGV[3] attempt, ARGV[4] reason, ARGV[5] keep ms, ARGV[6] dead letters kept
-- Returns 1 when it was dead-lettered, 0 when the lease is not held.
--! include _now
--! include _delivery-keep
--! include _delivery-lease
--! include _delivery-forget
if not held(ARGV[1], ARGV[2], ARGV[3]) then return 0 end
local body = redis.call('HGET', KEYS[3], ARGV[1]) or ''
redis.call('ZREM', KEYS[2], ARGV[1])
forget(ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('LPUSH', KEYS[6], cjson.encode({id = ARGV[1], body = body, attempts = tonumber(ARGV[3]), reason = ARGV[4], atMs = now}))
redis.call('LTRIM', KEYS[6], 0, tonumber(ARGV[6]) - 1)
keep(tonumber(ARGV[5]))
return 1
