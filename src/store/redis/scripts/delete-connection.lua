-- delete-connection: deletes a user's connection and unmarks the principal as connected to the upstream, in one step.
-- KEYS[1] the connection (hash: version, record), KEYS[2] the upstream's connected principals (set)
-- ARGV[1] principal
-- Returns the record's JSON that was there, or false when there was none.
local record = redis.call('HGET', KEYS[1], 'record')
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return record
