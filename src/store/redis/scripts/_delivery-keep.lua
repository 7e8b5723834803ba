-- keep: the delivery queue's keys (KEYS[1..5], and KEYS[6] when given) expire ms from now, so the queue of an
-- endpoint no longer configured goes once nothing has touched it for that long.
local function keep(ms)
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ms) end
end
