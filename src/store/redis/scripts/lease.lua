-- lease: claims or renews the leases of running tasks; the deadline is Redis time.
-- KEYS[1] running tasks (zset: id -> lease deadline ms), KEYS[2] owners (hash: id -> replica)
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] 'renew' (only leases still held) | 'claim', ARGV[4..] task ids
-- Returns 1.
--! include _now
local deadline = now + tonumber(ARGV[2])
for i = 4, #ARGV do
  if ARGV[3] == 'claim' or redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
  end
end
return 1
