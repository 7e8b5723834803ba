-- reserve: records that a task about to be created runs on a replica, BEFORE its record is written (the record
-- lives in another Cluster slot, so the two cannot be one step): a replica that dies between the two leaves an id
-- the sweep finds (take-orphans hands it over; with no record it is dropped), never a record nobody leased. An id
-- some replica holds already (a key's task being created or run there, or left by a dead replica for the sweep)
-- is never taken from it. Like lease, a sign of life.
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms), KEYS[2] owners (hash: id -> replica),
-- KEYS[3] this replica's running tasks (set)
-- ARGV[1] replica, ARGV[2] lease ms, ARGV[3] task id
-- Returns 1 when the id is reserved for the replica now, 0 when a replica (this one included) held it already.
--! include _now
local deadline = now + tonumber(ARGV[2])
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0') < deadline then redis.call('ZADD', KEYS[1], deadline, ARGV[1]) end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
