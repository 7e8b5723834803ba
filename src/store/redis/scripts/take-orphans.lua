-- take-orphans: tasks past their lease deadline, each handed to exactly one caller (the taker), which holds
-- their leases from then on: if it dies before it settled them, they run out again and another replica takes them.
-- KEYS as lease.lua
-- ARGV[1] most to take (at most IDS_PER_SCRIPT_CALL), ARGV[2] taker (replica), ARGV[3] lease ms
-- Returns id, previous owner pairs.
--! include _now
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local deadline = now + tonumber(ARGV[3])
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
  redis.call('ZADD', KEYS[1], deadline, id)
  redis.call('HSET', KEYS[2], id, ARGV[2])
end
return out
