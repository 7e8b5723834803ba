-- delete: removes an ended task's record and timeline before its TTL; a task still running is not deleted. Its
-- listing entries go as listings meet them (as an expired task's do), and its stored bytes are released by the
-- caller (another slot). A task an idempotency key made leaves a tombstone for as long as its expired-marker would
-- have lasted (its TTL, then the time expired ids are remembered): its id, which the key gives, serves no new task.
-- KEYS[1] task hash, KEYS[2] its timeline list, KEYS[3] its expired-marker (a deleted task is unknown, not expired),
-- KEYS[4] its deleted-tombstone
-- ARGV[1] how long the tombstone lasts when the task has no expired-marker (ms)
-- Returns {'deleted', principal, ledger charged (when not the principal's)}, {'not_terminal'} or {'not_found'}.
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'not_found'} end
if status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then return {'not_terminal'} end
local principal, keyed, ledger = unpack(redis.call('HMGET', KEYS[1], 'principal', 'idempotency', 'chargedTo'))
if keyed then
  local left = redis.call('PTTL', KEYS[3])
  if left <= 0 then left = tonumber(ARGV[1]) end
  redis.call('SET', KEYS[4], '1', 'PX', left)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return {'deleted', principal, ledger}
