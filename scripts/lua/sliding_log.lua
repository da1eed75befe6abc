-- The sliding window log in Redis Lua (scripts/bench_window.sh's recipe):
-- a sorted set of request times; refused requests are not added.
-- KEYS[1] = key; ARGV = limit, window (seconds). Replies like SW.CHECK … EXACT.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2]) * 1000000
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], 0, now - window)
local count = redis.call("ZCARD", KEYS[1])
if count < limit then
  redis.call("ZADD", KEYS[1], now, now .. "-" .. count)
  redis.call("PEXPIRE", KEYS[1], math.ceil(window / 1000))
  return {0, limit, limit - count - 1, -1, math.ceil(window / 1000000)}
end
local oldest = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
local retry = math.ceil((tonumber(oldest[2]) + window - now) / 1000000)
return {1, limit, 0, retry, math.ceil(redis.call("PTTL", KEYS[1]) / 1000)}
