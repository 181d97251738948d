-- heartbeat.lua: a worker's beat: its counters merged into the crawl's totals, its heartbeat
-- stamped with Redis's clock (the workers' clocks never meet), the operator's controls read.
--
-- KEYS[1]   the crawl's merged counters ({<crawl>}:totals)
-- KEYS[2]   the workers' heartbeats ({<crawl>}:workers): worker id -> JSON
-- KEYS[3]   the operator's controls ({<crawl>}:ctl)
-- KEYS[4]   the names the operator blocked ({<crawl>}:blocked)
-- ARGV[1]   the worker's id; ARGV[2] its heartbeat as JSON, without its time
-- ARGV[3..] the counters that moved since the last beat, each as: name, delta
--
-- A running worker of a paused crawl is "paused" in its heartbeat; a worker's start is kept
-- from its first beat. Returns Redis's time, the controls (HGETALL) and the blocked names: a
-- few, set by hand, so a worker can say in its log what the operator did.
for i = 3, #ARGV, 2 do
  if string.find(ARGV[i + 1], '.', 1, true) then
    redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1])
  else
    redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local beat = cjson.decode(ARGV[2])
beat.beat = now
if not beat.started then
  local old = redis.call('HGET', KEYS[2], ARGV[1])
  beat.started = old and cjson.decode(old).started or now
end
local ctl = redis.call('HGETALL', KEYS[3])
for i = 1, #ctl, 2 do
  if ctl[i] == 'paused' and ctl[i + 1] == '1' and beat.state == 'running' then
    beat.state = 'paused'
  end
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(beat))
return {string.format('%.17g', now), ctl, redis.call('HKEYS', KEYS[4])}
