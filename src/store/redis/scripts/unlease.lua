-- unlease: a task stops running (it ended, whoever ended it), or a reservation is given back (its creation did not
-- happen): it leaves its replica's set, the owners hash, and the per-task deadline index of earlier releases (a
-- task one of them leased, during a rolling upgrade). Given back with an owner, only while that replica holds it.
-- KEYS[1] owners (hash: id -> replica), KEYS[2] pre-liveness deadlines (zset: id -> lease deadline ms)
-- ARGV[1] task id, ARGV[2] key prefix of the replicas' task sets (as lease.lua), ARGV[3] the replica it must be
-- held by ('' for whoever holds it)
-- Returns 1, or 0 when another replica than ARGV[3] holds it (nothing changed).
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[3] ~= nil and ARGV[3] ~= '' and owner ~= ARGV[3] then return 0 end
if owner then
  redis.call('SREM', ARGV[2] .. owner, ARGV[1])
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
