-- enqueue-delivery: queues a webhook delivery to one endpoint, due at once, unless the same id is queued already or
-- the queue is full (the newest is the one refused). Keeps the endpoint's keys keep ms from now.
-- KEYS[1] waiting (zset: id -> due ms), KEYS[2] leased (zset: id -> lease deadline ms), KEYS[3] bodies (hash: id ->
-- body), KEYS[4] state (hash: id -> "attempt|enqueued ms|owner"), KEYS[5] dead letters (list); one hash tag
-- ARGV[1] id, ARGV[2] body, ARGV[3] most deliveries queued (leased or waiting), ARGV[4] keep ms
-- Returns 'queued', 'duplicate' or 'full'.
--! include _now
--! include _delivery-keep
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 'duplicate' end
if redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[3]) then return 'full' end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], '0|' .. now .. '|')
redis.call('ZADD', KEYS[1], now, ARGV[1])
keep(tonumber(ARGV[4]))
return 'queued'
