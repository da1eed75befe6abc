-- A sliding window counter in Redis Lua, the two-fixed-windows way: the
-- current window's count plus the previous one's, weighted by how much of
-- it still overlaps the sliding window. KEYS[1] = key; ARGV = limit,
-- window (seconds). Replies like SW.CHECK.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2]) * 1000000
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local index = math.floor(now / window)
local cur = KEYS[1] .. ":" .. index
local prev = tonumber(redis.call("GET", KEYS[1] .. ":" .. (index - 1)) or "0")
local count = tonumber(redis.call("GET", cur) or "0")
local weight = 1 - (now - index * window) / window
local used = math.floor(prev * weight) + count
if used < limit then
  redis.call("INCR", cur)
  redis.call("PEXPIRE", cur, math.ceil(2 * window / 1000))
  return {0, limit, limit - used - 1, -1, math.ceil(window / 1000000)}
end
return {1, limit, 0, 1, math.ceil(window / 1000000)}
