-- count-hit: counts one hit in a fixed window that starts with its first hit, and says how long it has left.
-- KEYS[1] the window's counter
-- ARGV[1] window length (ms)
-- Returns {hits in the window, ms until it ends}.
local hits = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if hits == 1 or left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {hits, left}
