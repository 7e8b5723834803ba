-- unlock: releases a lock only for the owner that holds it (one whose lock expired and was taken by another
-- releases nothing).
-- KEYS[1] the lock (string: its owner)
-- ARGV[1] owner
-- Returns 1 when released, 0 when the lock was not this owner's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
