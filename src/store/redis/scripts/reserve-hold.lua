-- reserve-hold: reserves a place for a new hold among its principal's pending ones, before the task is stored, so
-- a principal over tasks.maxPendingApprovalsPerPrincipal is refused however many replicas create at once. Places
-- past their deadline are dropped first (a reservation whose task was never stored frees itself there; a hold's
-- own place leaves with its index entry, unindex-hold.lua).
-- KEYS[1] the principal's pending holds (zset: task id -> deadline ms)
-- ARGV[1] task id, ARGV[2] its deadline (ms), ARGV[3] the cap (0: none)
-- Returns {1} (reserved, or held already) or {0, pending}.
--! include _now
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {1} end
local cap = tonumber(ARGV[3])
local pending = redis.call('ZCARD', KEYS[1])
if cap > 0 and pending >= cap then return {0, pending} end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
-- The set goes by itself once its last place is past its deadline.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.max(tonumber(last[2]), now) + 1000)
return {1}
