-- renew-slots: extends only leases still running; one already run out stays out even before an acquire drops it.
-- KEYS as acquire-slot.lua
-- ARGV[1] lease ms, ARGV[2] key expiry ms, ARGV[3..] tickets (at most IDS_PER_SCRIPT_CALL: the caller splits longer lists)
-- Returns how many leases were renewed.
--! include _now
--! include _slot-keep
local deadline = now + tonumber(ARGV[1])
local renewed = 0
for i = 3, #ARGV do
  if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]) or '0') > now then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
    renewed = renewed + 1
  elseif tonumber(redis.call('ZSCORE', KEYS[3], ARGV[i]) or '0') > now then
    redis.call('ZADD', KEYS[3], deadline, ARGV[i])
    renewed = renewed + 1
  end
end
if renewed > 0 then keep(tonumber(ARGV[2])) end
return renewed
