-- lease: claims or renews the leases of running tasks; the deadline is Redis time.
-- KEYS[1] running tasks (zset: id -> lease deadline ms), KEYS[2] owners (hash: id -> replica)
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] 'renew' (only leases this owner still holds) | 'claim',
-- ARGV[4..] task ids (at most IDS_PER_SCRIPT_CALL: the caller splits longer lists)
-- Returns how many leases were written.
--! include _now
local deadline = now + tonumber(ARGV[2])
local written = 0
for i = 4, #ARGV do
  -- A task taken as an orphan belongs to its taker now: the old owner's late heartbeat does not take it back.
  if ARGV[3] == 'claim' or redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[1] then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
    written = written + 1
  end
end
return written
