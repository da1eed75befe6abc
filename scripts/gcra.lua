-- GCRA in Redis Lua: what users run today without redis-cell.
-- KEYS[1] = key; ARGV = max_burst, count, period (seconds), quantity.
-- Replies like CL.THROTTLE: {limited, limit, remaining, retry_after, reset_after}.
local burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local quantity = tonumber(ARGV[4] or "1")
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ei = period * 1000000 / count
local limit = burst + 1
local dvt = ei * limit
local tat = tonumber(redis.call("GET", KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + ei * quantity
local diff = now - (new_tat - dvt)
local limited, retry, ttl
if diff < 0 then
  limited, retry, ttl = 1, -diff, tat - now
else
  limited, retry, ttl = 0, -1, new_tat - now
  redis.call("SET", KEYS[1], new_tat, "PX", math.ceil(ttl / 1000))
end
local remaining = 0
if dvt - ttl > -ei then remaining = math.floor((dvt - ttl) / ei) end
if retry > 0 then retry = math.ceil(retry / 1000000) end
return {limited, limit, remaining, retry, math.ceil(ttl / 1000000)}
