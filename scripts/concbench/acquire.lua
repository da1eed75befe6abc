-- A concurrency lease in Redis Lua, the sorted-set way (Stripe's concurrent
-- requests limiter): members are request ids scored by their expiry in ms.
-- KEYS[1] = key; ARGV = limit, lease (ms), request id. Release is ZREM.
-- Replies like CONC.ACQUIRE: {limited, limit, remaining, retry_after, reset_after}.
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local id = ARGV[3]
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local held = redis.call("ZSCORE", KEYS[1], id)
local count = redis.call("ZCARD", KEYS[1])
if held or count < limit then
  redis.call("ZADD", KEYS[1], now + lease, id)
  redis.call("PEXPIRE", KEYS[1], lease)
  if not held then count = count + 1 end
  return {0, limit, limit - count, -1, math.ceil(lease / 1000)}
end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
local last = redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")
return {1, limit, 0, math.ceil((tonumber(first[2]) - now) / 1000), math.ceil((tonumber(last[2]) - now) / 1000)}
