-- take-upstream-sessions: the recorded upstream sessions of replicas whose liveness ran out (or that left the
-- liveness index: take-orphans.lua drops a dead replica once its tasks are taken), each handed to exactly one
-- caller, which ends it at the upstream. A dead replica with no session left leaves the set.
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms), KEYS[2] replicas with upstream sessions (set)
-- ARGV[1] most to take, ARGV[2] key prefix of the replicas' session hashes
-- (a hash's key is prefix .. replica; same hash tag as KEYS)
-- Returns replica, field, value triples.
--! include _now
local most = tonumber(ARGV[1])
local out = {}
local taken = 0
for _, replica in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if taken >= most then break end
  local alive = tonumber(redis.call('ZSCORE', KEYS[1], replica) or '0')
  if alive <= now then
    local key = ARGV[2] .. replica
    local cursor = '0'
    repeat
      local step = redis.call('HSCAN', key, cursor, 'COUNT', most - taken)
      cursor = step[1]
      local entries = step[2]
      for i = 1, #entries, 2 do
        if taken >= most then break end
        redis.call('HDEL', key, entries[i])
        out[#out + 1] = replica
        out[#out + 1] = entries[i]
        out[#out + 1] = entries[i + 1]
        taken = taken + 1
      end
    until cursor == '0' or taken >= most
    if redis.call('HLEN', key) == 0 then redis.call('SREM', KEYS[2], replica) end
  end
end
return out
