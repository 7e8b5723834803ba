-- take-orphans: tasks past their lease deadline, removed as they are taken, so exactly one replica gets each.
-- KEYS as lease.lua
-- ARGV[1] most to take
-- Returns id, owner pairs.
--! include _now
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
  redis.call('HDEL', KEYS[2], id)
end
return out
