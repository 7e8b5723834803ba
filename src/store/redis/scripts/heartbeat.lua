-- heartbeat: a replica is alive for lease ms more, by Redis's clock. One write per replica, however many tasks it
-- runs: its tasks live and die with it.
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms)
-- ARGV[1] replica, ARGV[2] lease ms
-- Returns 1.
--! include _now
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
