-- unlease: a task stops running (it ended, whoever ended it): it leaves its replica's set, the owners hash, and
-- the per-task deadline index of earlier releases (a task one of them leased, during a rolling upgrade).
-- KEYS[1] owners (hash: id -> replica), KEYS[2] pre-liveness deadlines (zset: id -> lease deadline ms)
-- ARGV[1] task id, ARGV[2] key prefix of the replicas' task sets (as lease.lua)
-- Returns 1.
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner then
  redis.call('SREM', ARGV[2] .. owner, ARGV[1])
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
