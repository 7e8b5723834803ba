-- expire-replica: a replica that shuts down gives up its liveness at once (issue 42): the tasks it hands over are
-- orphans from now on, taken by the next sweep of any replica instead of after lease ms without heartbeats. A
-- replica the index does not know is left out (nothing of its to take).
-- KEYS[1] replicas' liveness (zset: replica -> deadline ms)
-- ARGV[1] replica
-- Returns 1 when its liveness was given up, 0 when it had none.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
-- Run out long ago: take-orphans.lua and take-upstream-sessions.lua see it dead by any clock.
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 1
