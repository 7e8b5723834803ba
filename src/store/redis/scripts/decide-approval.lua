-- decide-approval: decides a call held for approval, once: checks that the task has not ended and that its hold is
-- pending, and that the decision fits the deadline (expiry only past it, approval or denial only before it, in
-- store time), and that an approver decides the call they were shown (the hold's digest, when one is given), then
-- records the decision and the task's new status message and emits the change, atomically. Two replicas deciding
-- at once: the second finds it decided.
-- KEYS[1] task hash
-- ARGV[1] event channel, ARGV[2] decision ('approved'|'denied'|'expired'), ARGV[3] who decided or '',
-- ARGV[4] comment, ARGV[5] '1' when there is a comment, ARGV[6] the task's status message from now on,
-- ARGV[7] the digest of the call the approver was shown, or '' (expiry: nobody was shown anything)
-- Returns {'ok', summary...}, {reason, summary...} (reason: 'terminal', 'not_held', 'decided', 'changed',
-- 'not_due', 'expired') or {'not_found'}.
--! include _summary
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {'not_found'} end
local terminal = { completed = true, failed = true, cancelled = true }
if terminal[current] then return {'terminal', unpack(summary(KEYS[1]))} end
local held = redis.call('HGET', KEYS[1], 'approval')
if not held then return {'not_held', unpack(summary(KEYS[1]))} end
local approval = cjson.decode(held)
if approval.state ~= 'pending' then return {'decided', unpack(summary(KEYS[1]))} end
if ARGV[7] ~= '' and ARGV[7] ~= approval.digest then return {'changed', unpack(summary(KEYS[1]))} end
--! include _now
local due = now >= tonumber(approval.deadlineMs)
if ARGV[2] == 'expired' and not due then return {'not_due', unpack(summary(KEYS[1]))} end
if ARGV[2] ~= 'expired' and due then return {'expired', unpack(summary(KEYS[1]))} end
approval.state = ARGV[2]
approval.decidedMs = now
if ARGV[3] ~= '' then approval.decidedBy = ARGV[3] end
if ARGV[5] == '1' then approval.comment = ARGV[4] end
redis.call('HSET', KEYS[1], 'approval', cjson.encode(approval), 'updatedMs', tostring(now), 'message', ARGV[6])
local fields = summary(KEYS[1])
redis.call('PUBLISH', ARGV[1], cjson.encode(fields))
return {'ok', unpack(fields)}
