-- address.lua: politeness per server address for the whole fleet, on Redis's clock: the line of
-- hosts crawler.frontier.addresses.LocalAddressBudget keeps. ARGV[1] 'take': may this fetch
-- start now? '0' (taken: the token is in flight) or the seconds until the asker's turn. 'done':
-- a fetch ended, the next may start a gap after it; 1, or 0 for a token not in flight (an end
-- told twice, sent again after an outage, counts once).
--
-- KEYS[1]   the address's state (HASH: ready, typical fetch time, its samples and the last
--           fetch's time, fetches, refusals)
-- KEYS[2]   its fetches in flight (ZSET: lease token -> when it expires)
-- KEYS[3]   (take) its line (ZSET: waiting host -> priority * 1e10 + since when: a priority
--           step outweighs any wait on Redis's clock, ~1.8e9 s, until 2286)
-- KEYS[4]   (take) when each waiter was told to come back (ZSET: host -> time)
-- KEYS[5]   (take) waiters out for missing their turns (ZSET: host -> since when it waited)
-- ARGV[2]   the lease token; ARGV[3] the time (tests only; '': Redis's); ARGV[4] SEED
-- take:     ARGV[5] the concurrency; ARGV[6] the gap between starts (s); ARGV[7] the lease TTL
--           (s); ARGV[8] who asks (its host); ARGV[9] its priority; ARGV[10] LATE; ARGV[11]
--           SCAN; ARGV[12] POLL; ARGV[13] MISSED_KEPT (crawler.frontier.addresses says what
--           each constant is)
-- done:     ARGV[5] the gap after this fetch (s; '': it was never sent); ARGV[6] its duration
--           (s); ARGV[7] RISE
local t = redis.call('TIME')
local now = tonumber(ARGV[3]) or t[1] + t[2] / 1000000
local h = redis.call('HMGET', KEYS[1], 'ready', 'typical', 'samples', 'last')
local ready, typical, samples = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0
if ARGV[1] == 'done' then
  if redis.call('ZREM', KEYS[2], ARGV[2]) == 0 or ARGV[5] == '' then return 0 end
  -- the fetch time estimate: crawler.frontier.addresses.quick_fetch
  local last, took = tonumber(ARGV[6]), tonumber(ARGV[6])
  if samples > 0 and took >= typical then
    took = typical + ARGV[7] * math.max(0, math.min(took, tonumber(h[4]) or 0) - typical)
  end
  redis.call('HSET', KEYS[1], 'ready', math.max(ready, now + ARGV[5]), 'typical', took,
    'samples', math.min(samples + 1, ARGV[4]), 'last', last)
  return 1
end
local conc, gap, ttl, who = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
-- the turn the asker was told, if it waits in line: a waiter whose turn came LATE before it
-- (the frontier hands hosts out in turn order) and LATE before now, and has not come, is out
local told = math.min(tonumber(redis.call('ZSCORE', KEYS[4], who)) or -math.huge, now)
-- one that missed its turn comes back to the place its wait gives it
local was = redis.call('ZSCORE', KEYS[3], who) or redis.call('ZSCORE', KEYS[5], who)
redis.call('ZREM', KEYS[5], who)
redis.call('ZADD', KEYS[3], ARGV[9] * 1e10 + (was and was % 1e10 or now), who)
local held = false  -- a better waiter is due back about now
local late = 0  -- waiters ahead LATE past their turn: out at the next ask if they do not come
for _, other in ipairs(redis.call('ZRANGE', KEYS[3], 0, ARGV[11] - 1)) do
  if other == who then break end
  local back = tonumber(redis.call('ZSCORE', KEYS[4], other)) or 0
  if back < told - ARGV[10] then  -- out, its wait kept (the MISSED_KEPT latest joined)
    redis.call('ZADD', KEYS[5], redis.call('ZSCORE', KEYS[3], other) % 1e10, other)
    redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -ARGV[13] - 1)
    redis.call('PEXPIRE', KEYS[5], math.floor(ttl * 4000))  -- (this ask may take the address)
    redis.call('ZREM', KEYS[3], other)
    redis.call('ZREM', KEYS[4], other)
  else
    if back <= now + gap / 2 then held = true end
    if back < now - ARGV[10] then late = late + 1 end
  end
end
local flying = redis.call('ZCARD', KEYS[2])
redis.call('PEXPIRE', KEYS[1], math.floor(ttl * 4000))
if flying < conc and not held and now >= ready then
  redis.call('ZREM', KEYS[3], who)
  redis.call('ZREM', KEYS[4], who)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
  if conc > 1 then redis.call('HSET', KEYS[1], 'ready', now + gap) end
  redis.call('HINCRBY', KEYS[1], 'fetches', 1)
  redis.call('PEXPIRE', KEYS[2], math.floor(ttl * 1000))
  return '0'
end
redis.call('HINCRBY', KEYS[1], 'refusals', 1)
-- when to come back: crawler.frontier.addresses.turn_at
local took = samples >= tonumber(ARGV[4]) and typical or 0
local start = math.max(ready, now)
if flying >= conc then  -- every slot busy: the first to free still rests a gap after it
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  start = math.max(start, first[2] - ttl + took + gap, now + math.max(gap, ARGV[12]))
end
local back = start + (redis.call('ZRANK', KEYS[3], who) - late) * (gap + took / math.max(1, conc))
-- they have LATE to come; those that do not are out when this one asks again
if late > 0 then back = math.max(back, now + ARGV[10]) end
redis.call('ZADD', KEYS[4], back, who)
redis.call('PEXPIRE', KEYS[3], math.floor(ttl * 4000))
redis.call('PEXPIRE', KEYS[4], math.floor(ttl * 4000))
redis.call('PEXPIRE', KEYS[5], math.floor(ttl * 4000))
return string.format('%.17g', math.max(back - now, 0.001))
