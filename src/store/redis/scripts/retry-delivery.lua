-- retry-delivery: a try failed; the delivery waits in line again, due in delay ms. Only while the replica still
-- holds that try's lease (else another replica claimed it after the lease ran out, and that one decides).
-- KEYS[1] waiting (zset), KEYS[2] leased (zset), KEYS[3] bodies (hash), KEYS[4] state (hash), KEYS[5] bytes of
-- the bodies (counter); one hash tag
-- ARGV[1] id, ARGV[2] owner, ARGV[3] attempt, ARGV[4] delay ms, ARGV[5] keep ms
-- Returns 1 when it was put back, 0 when the lease is not held.
--! include _now
--! include _delivery-keep
--! include _delivery-lease
if not held(ARGV[1], ARGV[2], ARGV[3]) then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
keep(tonumber(ARGV[5]))
return 1
