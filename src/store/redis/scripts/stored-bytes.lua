-- stored-bytes: one ledger of stored result bytes (a principal's, or the store-wide one): drops what expired, then
-- charges or releases one task's bytes, and answers the sum and when the oldest charge expires. The ledger's keys
-- expire with its last charge, so a principal that stores nothing more leaves nothing behind.
-- KEYS[1] task ids by expiry (sorted set), KEYS[2] bytes by task id (hash), KEYS[3] their sum (counter)
-- ARGV[1] 'charge' | 'release' | 'read', ARGV[2] task id (or ''), ARGV[3] bytes, ARGV[4] expiry (epoch ms),
-- ARGV[5] expired entries dropped at most
-- Returns {sum of bytes, oldest expiry (epoch ms) or -1}.
--! include _now
local function drop(id)
  local size = redis.call('HGET', KEYS[2], id)
  if size then
    redis.call('DECRBY', KEYS[3], size)
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREM', KEYS[1], id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))) do drop(id) end
if ARGV[1] == 'charge' then
  drop(ARGV[2]) -- a second charge for the task replaces the first
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  redis.call('INCRBY', KEYS[3], ARGV[3])
elseif ARGV[1] == 'release' then
  drop(ARGV[2])
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #last == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {0, -1}
end
local expireAt = string.format('%d', tonumber(last[2]))
for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], expireAt) end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {tonumber(redis.call('GET', KEYS[3]) or '0'), tonumber(first[2])}
