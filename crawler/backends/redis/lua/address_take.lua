-- address_take.lua: may this fetch start at this server address now? The line of hosts that
-- crawler.frontier.addresses.LocalAddressBudget keeps, shared by every worker on Redis's clock.
--
-- KEYS[1]   the address's state (HASH: ready, typical fetch time and its samples, fetches,
--           refusals)
-- KEYS[2]   its fetches in flight (ZSET: lease token -> when it expires)
-- KEYS[3]   its line of waiting hosts (ZSET: who -> priority * SCALE + waiting since)
-- KEYS[4]   when each waiter was told to come back (ZSET: who -> time)
-- ARGV[1]   the lease token; ARGV[2] the concurrency; ARGV[3] the gap between starts (s)
-- ARGV[4]   the lease TTL (s); ARGV[5] who asks (its host); ARGV[6] its priority
-- ARGV[7]   how late a waiter may be before it leaves the line (s); ARGV[8] how many waiters
--           ahead are looked at; ARGV[9] the time (tests only; '': Redis's)
-- ARGV[10]  fetches seen before the fetch time estimate is used (SEED); ARGV[11] the shortest
--           wait told while every slot is busy (POLL, s)
--
-- Returns '0' (taken: the token is in flight) or the seconds until the asker's turn.
local now
if ARGV[9] ~= '' then
  now = tonumber(ARGV[9])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function fmt(x) return string.format('%.17g', x) end
-- a waiter's rank as one score: priority, then since when it waited (Redis's clock, ~1.8e9 s:
-- below the scale until 2286; a priority step outweighs any wait)
local scale = 1e10
local conc, gap, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local who, prio, late, scan = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local ready = tonumber(redis.call('HGET', KEYS[1], 'ready') or '0')
local was = redis.call('ZSCORE', KEYS[3], who)
local since = was and (tonumber(was) % scale) or now
redis.call('ZADD', KEYS[3], fmt(prio * scale + since), who)
local held = false  -- a better waiter is due back about now
for _, other in ipairs(redis.call('ZRANGE', KEYS[3], 0, scan - 1)) do
  if other == who then break end
  local back = tonumber(redis.call('ZSCORE', KEYS[4], other) or '0')
  if back < now - late then  -- it missed its turn: out of line
    redis.call('ZREM', KEYS[3], other)
    redis.call('ZREM', KEYS[4], other)
  elseif back <= now + gap / 2 then
    held = true
  end
end
local flying = redis.call('ZCARD', KEYS[2])
redis.call('PEXPIRE', KEYS[1], math.floor(ttl * 4000))
if flying < conc and not held and now >= ready then
  redis.call('ZREM', KEYS[3], who)
  redis.call('ZREM', KEYS[4], who)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  if conc > 1 then redis.call('HSET', KEYS[1], 'ready', fmt(now + gap)) end
  redis.call('HINCRBY', KEYS[1], 'fetches', 1)
  redis.call('PEXPIRE', KEYS[2], math.floor(ttl * 1000))
  return '0'
end
redis.call('HINCRBY', KEYS[1], 'refusals', 1)
-- when to come back: crawler.frontier.addresses.turn_at
local est = redis.call('HMGET', KEYS[1], 'typical', 'samples')
local took = 0
if tonumber(est[2] or '0') >= tonumber(ARGV[10]) then took = tonumber(est[1] or '0') end
local start = math.max(ready, now)
if flying >= conc then  -- every slot busy: the first to free still rests a gap after it
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local poll = math.max(gap, tonumber(ARGV[11]))
  start = math.max(start, tonumber(first[2]) - ttl + took + gap, now + poll)
end
local back = start + redis.call('ZRANK', KEYS[3], who) * (gap + took / math.max(1, conc))
redis.call('ZADD', KEYS[4], fmt(back), who)
redis.call('PEXPIRE', KEYS[3], math.floor(ttl * 4000))
redis.call('PEXPIRE', KEYS[4], math.floor(ttl * 4000))
return fmt(math.max(back - now, 0.001))
