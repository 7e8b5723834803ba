-- release-slot: a ticket leaves the holders and the line; waiters hear of it only when it was there.
-- KEYS as acquire-slot.lua
-- ARGV[1] ticket, ARGV[2] channel, ARGV[3] message
-- Returns how many places the ticket held (0 when none).
local removed = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if removed > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return removed
