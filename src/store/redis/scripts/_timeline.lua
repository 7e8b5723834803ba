-- timeline(key, status, now, message, length): appends a status change to a task's timeline list and keeps
-- only its last `length` entries. An entry is JSON: s (status), t (epoch ms, as text), m (message, when set).
local function timeline(key, status, at, message, length)
  local entry = { s = status, t = tostring(at) }
  if message then entry.m = message end
  redis.call('RPUSH', key, cjson.encode(entry))
  redis.call('LTRIM', key, -length, -1)
end
