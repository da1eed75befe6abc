-- A fixed window in Redis Lua: INCR, and an expiry on the first request of
-- the window. KEYS[1] = key; ARGV = limit, window (seconds). Replies like
-- FW.CHECK.
local limit = tonumber(ARGV[1])
local count = redis.call("INCR", KEYS[1])
if count == 1 then
  redis.call("EXPIRE", KEYS[1], ARGV[2])
end
local ttl = redis.call("TTL", KEYS[1])
if count > limit then
  return {1, limit, 0, ttl, ttl}
end
return {0, limit, limit - count, -1, ttl}
