-- enqueue-delivery: queues a webhook delivery to one endpoint, due at once, unless the same id is queued already or
-- the queue is full, in deliveries or in bytes (the newest is the one refused). Keeps the endpoint's keys keep ms
-- from now.
-- KEYS[1] waiting (zset: id -> due ms), KEYS[2] leased (zset: id -> lease deadline ms), KEYS[3] bodies (hash: id ->
-- body), KEYS[4] state (hash: id -> "attempt|enqueued ms|owner"), KEYS[5] bytes of the bodies (counter), KEYS[6]
-- dead letters (list); one hash tag
-- ARGV[1] id, ARGV[2] body, ARGV[3] most deliveries queued (leased or waiting), ARGV[4] keep ms, ARGV[5] most bytes
-- of bodies queued
-- Returns 'queued', 'duplicate', 'full' or 'full_bytes'.
--! include _now
--! include _delivery-keep
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 'duplicate' end
if redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[3]) then return 'full' end
-- Lua strings are bytes: the body's UTF-8 length, as the gateway counts it.
local size = string.len(ARGV[2])
if tonumber(redis.call('GET', KEYS[5]) or '0') + size > tonumber(ARGV[5]) then return 'full_bytes' end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('INCRBY', KEYS[5], size)
redis.call('HSET', KEYS[4], ARGV[1], '0|' .. now .. '|')
redis.call('ZADD', KEYS[1], now, ARGV[1])
keep(tonumber(ARGV[4]))
return 'queued'
