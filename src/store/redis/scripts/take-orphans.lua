-- take-orphans: the running tasks of replicas whose liveness ran out, each handed to exactly one caller (the
-- taker), which settles them (or runs them again) from then on: they move to the taker's set, so if the taker
-- dies before it settled them they are found with its own. A dead replica with no task left leaves the liveness
-- index. Tasks an earlier release leased with a deadline of their own (a rolling upgrade) are taken once it ran out.
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms), KEYS[2] owners (hash: id -> replica),
-- KEYS[3] the taker's running tasks (set), KEYS[4] pre-liveness deadlines (zset: id -> lease deadline ms)
-- ARGV[1] most to take (at most IDS_PER_SCRIPT_CALL), ARGV[2] taker (replica), ARGV[3] lease ms,
-- ARGV[4] key prefix of the replicas' task sets (as lease.lua)
-- Returns id, previous owner pairs.
--! include _now
local most = tonumber(ARGV[1])
local taker = ARGV[2]
-- The taker is alive (it sweeps), and holds what it takes from here on.
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), taker)
local out = {}
local taken = 0
local function take(id, owner)
  redis.call('HSET', KEYS[2], id, taker)
  redis.call('SADD', KEYS[3], id)
  out[#out + 1] = id
  out[#out + 1] = owner
  taken = taken + 1
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, most)
for _, replica in ipairs(dead) do
  if taken >= most then break end
  local set = ARGV[4] .. replica
  for _, id in ipairs(redis.call('SPOP', set, most - taken)) do take(id, replica) end
  if redis.call('SCARD', set) == 0 then redis.call('ZREM', KEYS[1], replica) end
end
if taken < most then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, most - taken)) do
    redis.call('ZREM', KEYS[4], id)
    take(id, redis.call('HGET', KEYS[2], id) or '')
  end
end
return out
