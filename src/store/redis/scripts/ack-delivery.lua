-- ack-delivery: the endpoint acknowledged a delivery (2xx): it leaves the queue, whoever holds its lease now.
-- KEYS[1] waiting (zset), KEYS[2] leased (zset), KEYS[3] bodies (hash), KEYS[4] state (hash), KEYS[5] bytes of the
-- bodies (counter); one hash tag
-- ARGV[1] id
-- Returns 1 when it was queued, 0 otherwise.
--! include _delivery-forget
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return forget(ARGV[1])
