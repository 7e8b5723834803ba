-- acquire-slot: drops expired holders and waiters of one semaphore, then grants, keeps waiting or joins the line,
-- atomically. A lease has run out when its deadline is <= now.
-- KEYS[1] holders (zset: ticket -> lease deadline ms), KEYS[2] queue (zset: ticket -> arrival sequence),
-- KEYS[3] queue deadlines (zset: ticket -> lease deadline ms), KEYS[4] owners (hash: ticket -> replica),
-- KEYS[5] sequence counter; all under one hash tag (one Cluster slot)
-- ARGV[1] ticket, ARGV[2] owner, ARGV[3] limit, ARGV[4] lease ms, ARGV[5] 'queue'|'once', ARGV[6] channel,
-- ARGV[7] message (published when dropped leases freed room), ARGV[8] key expiry ms
-- Returns {1} when granted, {0, ahead} otherwise.
--! include _now
--! include _slot-keep
local ticket = ARGV[1]
local deadline = now + tonumber(ARGV[4])
local dropped = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], gone)
  dropped[#dropped + 1] = gone
end
if #dropped > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  for _, gone in ipairs(dropped) do redis.call('HDEL', KEYS[4], gone) end
end
local reply
if redis.call('ZSCORE', KEYS[1], ticket) then
  redis.call('ZADD', KEYS[1], deadline, ticket)
  redis.call('HSET', KEYS[4], ticket, ARGV[2])
  reply = {1}
else
  local holders = redis.call('ZCARD', KEYS[1])
  local position = redis.call('ZRANK', KEYS[2], ticket)
  local queued = position ~= false
  if not queued then position = redis.call('ZCARD', KEYS[2]) end
  if position < tonumber(ARGV[3]) - holders then
    redis.call('ZREM', KEYS[2], ticket)
    redis.call('ZREM', KEYS[3], ticket)
    redis.call('ZADD', KEYS[1], deadline, ticket)
    redis.call('HSET', KEYS[4], ticket, ARGV[2])
    reply = {1}
  else
    if not queued and ARGV[5] == 'queue' then
      redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[5]), ticket)
      queued = true
    end
    if queued then
      redis.call('ZADD', KEYS[3], deadline, ticket)
      redis.call('HSET', KEYS[4], ticket, ARGV[2])
    end
    reply = {0, holders + position}
  end
end
keep(tonumber(ARGV[8]))
if #dropped > 0 then redis.call('PUBLISH', ARGV[6], ARGV[7]) end
return reply
