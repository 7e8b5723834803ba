-- slot-holders: the holders of one semaphore whose lease still runs.
-- KEYS[1] holders (zset: ticket -> lease deadline ms)
-- Returns their tickets.
--! include _now
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
