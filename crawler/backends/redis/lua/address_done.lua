-- address_done.lua: a fetch at a server address ended; the next may start a gap after it.
--
-- KEYS[1]   the address's state (HASH: ready, typical fetch time and its samples, ...)
-- KEYS[2]   its fetches in flight (ZSET: lease token -> when it expires)
-- ARGV[1]   the lease token; ARGV[2] the gap after this fetch (s; '': it was never sent)
-- ARGV[3]   the fetch's duration (s); ARGV[4] the time (tests only; '': Redis's)
-- ARGV[5]   the share of a slower fetch's excess the estimate takes (RISE); ARGV[6] SEED
--
-- An end told twice (sent again after Redis came back) counts once. Returns 1, or 0 when the
-- token was not in flight.
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 or ARGV[2] == '' then return 0 end
local now
if ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function fmt(x) return string.format('%.17g', x) end
local after = now + tonumber(ARGV[2])
if after > tonumber(redis.call('HGET', KEYS[1], 'ready') or '0') then
  redis.call('HSET', KEYS[1], 'ready', fmt(after))
end
-- the fetch time estimate: crawler.frontier.addresses.quick_fetch
local est = redis.call('HMGET', KEYS[1], 'typical', 'samples')
local typical, samples = tonumber(est[1] or '0'), tonumber(est[2] or '0')
local took, rise, seed = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
if samples > 0 and took >= typical then took = typical + rise * (took - typical) end
redis.call('HSET', KEYS[1], 'typical', fmt(took), 'samples', math.min(samples + 1, seed))
return 1
