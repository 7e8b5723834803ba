-- lease: records that tasks run on a replica from now on (created there, taken over, or handed back to it), and
-- that the replica is alive: claiming is a sign of life, so a replica that dies before its first heartbeat is
-- found like any other. A task moves out of its previous replica's set.
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms), KEYS[2] owners (hash: id -> replica),
-- KEYS[3] this replica's running tasks (set)
-- ARGV[1] replica, ARGV[2] lease ms, ARGV[3] key prefix of the replicas' task sets (a set's key is prefix ..
-- replica; same hash tag as KEYS), ARGV[4..] task ids (at most IDS_PER_SCRIPT_CALL: the caller splits longer lists)
-- Returns how many tasks were leased.
--! include _now
local deadline = now + tonumber(ARGV[2])
-- Never shortens a liveness a heartbeat just extended.
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0') < deadline then redis.call('ZADD', KEYS[1], deadline, ARGV[1]) end
for i = 4, #ARGV do
  local previous = redis.call('HGET', KEYS[2], ARGV[i])
  if previous and previous ~= ARGV[1] then redis.call('SREM', ARGV[3] .. previous, ARGV[i]) end
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[i])
end
return #ARGV - 3
