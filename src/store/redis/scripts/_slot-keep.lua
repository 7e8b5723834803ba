-- keep(ms): keeps an idle semaphore from living forever without ever dropping a live lease: its five keys only
-- ever get a longer expiry, and every deadline written is at most `ms` away.
local function keep(ms)
  for i = 1, 5 do
    local left = redis.call('PTTL', KEYS[i])
    if left == -1 or (left >= 0 and left < ms) then redis.call('PEXPIRE', KEYS[i], ms) end
  end
end
