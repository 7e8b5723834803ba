-- record-upstream-session: a replica opened an upstream session; if it dies without ending it, the replica that
-- sweeps it does (take-upstream-sessions.lua). Recording is a sign of life, as in lease.lua: a replica records its
-- upstream sessions before its first heartbeat, and must not look dead meanwhile.
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms), KEYS[2] replicas with upstream sessions (set),
-- KEYS[3] this replica's upstream sessions (hash: JSON [upstream, session id] -> protocol version)
-- ARGV[1] replica, ARGV[2] lease ms, ARGV[3] field, ARGV[4] value
-- Returns 1.
--! include _now
local deadline = now + tonumber(ARGV[2])
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0') < deadline then redis.call('ZADD', KEYS[1], deadline, ARGV[1]) end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
return 1
