-- index-hold: lists a pending hold (idempotent): its id by deadline in the index, its small entry (who asked, tool,
-- approvers, deadline) beside it, and its place among its principal's pending holds.
-- KEYS[1] pending index (zset: task id -> deadline ms), KEYS[2] entries (hash: task id -> JSON entry),
-- KEYS[3] the principal's pending holds (zset: task id -> deadline ms)
-- ARGV[1] task id, ARGV[2] deadline (ms), ARGV[3] the entry (JSON)
-- Returns 1.
--! include _now
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], math.max(tonumber(last[2]), now) + 1000)
return 1
