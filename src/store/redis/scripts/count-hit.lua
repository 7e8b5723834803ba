-- count-hit: counts hits in a fixed window that starts with its first hit, and says how long it has left.
-- KEYS[1] the window's counter
-- ARGV[1] window length (ms)
-- ARGV[2] hits to count (a JSON-RPC batch counts one per message)
-- Returns {hits in the window, ms until it ends}.
local added = tonumber(ARGV[2])
local hits = redis.call('INCRBY', KEYS[1], added)
local left = redis.call('PTTL', KEYS[1])
if hits == added or left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {hits, left}
