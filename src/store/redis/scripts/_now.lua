-- now: the current time in epoch ms from Redis itself, one clock for every replica.
local t = redis.call('TIME')
local now = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
