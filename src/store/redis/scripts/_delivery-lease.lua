-- held: whether `owner` holds the lease of try `attempt` of delivery `id` (KEYS[2] leased zset, KEYS[4] state hash):
-- the lease may have run out, but nobody has claimed the delivery since.
local function held(id, owner, attempt)
  if not redis.call('ZSCORE', KEYS[2], id) then return false end
  local state = redis.call('HGET', KEYS[4], id)
  if not state then return false end
  local tries, _, holder = string.match(state, '^(%d+)|(%d+)|(.*)$')
  return tries == attempt and holder == owner
end
