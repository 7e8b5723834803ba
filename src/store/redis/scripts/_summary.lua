-- summary(key): the task record without its outcome and call, as events and transition replies carry it (an
-- outcome can be large).
local function summary(key)
  local all = redis.call('HGETALL', key)
  local out = {}
  for i = 1, #all, 2 do
    if all[i] ~= 'outcome' and all[i] ~= 'call' then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end
