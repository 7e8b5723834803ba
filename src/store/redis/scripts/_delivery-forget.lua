-- forget(id): takes a delivery's body out of the queue (KEYS[3] bodies hash) and its bytes off the queue's byte count
-- (KEYS[5] counter); returns 1 when it was there. The count goes with the last body, so it cannot drift.
local function forget(id)
  local size = redis.call('HSTRLEN', KEYS[3], id)
  local gone = redis.call('HDEL', KEYS[3], id)
  if gone == 1 then
    if redis.call('HLEN', KEYS[3]) == 0 then redis.call('DEL', KEYS[5])
    elseif redis.call('DECRBY', KEYS[5], size) < 0 then redis.call('SET', KEYS[5], '0', 'KEEPTTL') end
  end
  return gone
end
