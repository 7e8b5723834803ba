-- claim-deliveries: leases due deliveries of one endpoint to a replica, as many as keep the endpoint's leased ones
-- (every replica's) at most its concurrency. Leases that ran out go back in line first, due at once: their replica
-- died or never settled the try.
-- KEYS[1] waiting (zset: id -> due ms), KEYS[2] leased (zset: id -> lease deadline ms), KEYS[3] bodies (hash),
-- KEYS[4] state (hash: id -> "attempt|enqueued ms|owner"), KEYS[5] bytes of the bodies (counter); one hash tag
-- ARGV[1] owner (replica), ARGV[2] concurrency, ARGV[3] lease ms, ARGV[4] keep ms, ARGV[5] most per call
-- Returns {now, next due ms or '', depth, id, body, attempt, enqueued ms, id, ...}.
--! include _now
--! include _delivery-keep
--! include _delivery-forget
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  redis.call('ZREM', KEYS[2], id)
  if redis.call('HEXISTS', KEYS[3], id) == 1 then redis.call('ZADD', KEYS[1], now, id) end
end
local claimed = {}
local free = math.min(tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[2]), tonumber(ARGV[5]))
if free > 0 then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, free)) do
    redis.call('ZREM', KEYS[1], id)
    local body = redis.call('HGET', KEYS[3], id)
    local state = redis.call('HGET', KEYS[4], id)
    local attempt, enqueued = nil, nil
    if state then attempt, enqueued = string.match(state, '^(%d+)|(%d+)|') end
    if body and attempt then
      attempt = tonumber(attempt) + 1
      redis.call('HSET', KEYS[4], id, attempt .. '|' .. enqueued .. '|' .. ARGV[1])
      redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), id)
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = body
      claimed[#claimed + 1] = tostring(attempt)
      claimed[#claimed + 1] = enqueued
    else
      -- half a delivery (cannot happen through these scripts): dropped rather than claimed forever
      forget(id)
      redis.call('HDEL', KEYS[4], id)
    end
  end
  if #claimed > 0 then keep(tonumber(ARGV[4])) end
end
local nextDue = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] or ''
local reply = {tostring(now), nextDue, tostring(redis.call('HLEN', KEYS[3]))}
for _, value in ipairs(claimed) do reply[#reply + 1] = value end
return reply
