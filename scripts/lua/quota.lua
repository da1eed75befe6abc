-- A calendar quota in Redis Lua: a counter per period, expiring when the
-- period ends; a refused request is taken back. KEYS[1] = key; ARGV =
-- limit, cost, period end (Unix seconds). Replies like QUOTA.CHECK.
local limit = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local used = redis.call("INCRBY", KEYS[1], cost)
if used == cost then
  redis.call("EXPIREAT", KEYS[1], ARGV[3])
end
local ttl = redis.call("TTL", KEYS[1])
if used > limit then
  redis.call("DECRBY", KEYS[1], cost)
  return {1, limit, limit - used + cost, ttl, ttl}
end
return {0, limit, limit - used, -1, ttl}
