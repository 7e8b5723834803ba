-- put-connection: writes a user's connection if the stored one is still at the version the writer read (compare
-- and set: of two writers from one version, one wins), and marks the principal connected to the upstream.
-- KEYS[1] the connection (hash: version, record), KEYS[2] the upstream's connected principals (set)
-- ARGV[1] expected version (0: none stored), ARGV[2] the record's JSON (at version ARGV[1] + 1), ARGV[3] principal
-- Returns 1 when written, 0 when another write came first.
local stored = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local expected = tonumber(ARGV[1])
if stored ~= expected then return 0 end
redis.call('HSET', KEYS[1], 'version', tostring(expected + 1), 'record', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 1
