-- delete: removes an ended task's record and timeline before its TTL; a task still running is not deleted. Its
-- listing entries go as listings meet them (as an expired task's do), and its stored bytes are released by the
-- caller (another slot).
-- KEYS[1] task hash, KEYS[2] its timeline list, KEYS[3] its expired-marker (a deleted task is unknown, not expired)
-- Returns {'deleted', principal, ledger charged (when not the principal's)}, {'not_terminal'} or {'not_found'}.
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'not_found'} end
if status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then return {'not_terminal'} end
local principal = redis.call('HGET', KEYS[1], 'principal')
local ledger = redis.call('HGET', KEYS[1], 'chargedTo')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return {'deleted', principal, ledger}
