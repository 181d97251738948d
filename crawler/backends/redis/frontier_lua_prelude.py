"""The prelude of every Redis frontier script (``frontier_lua``): it reads the keys and the
common arguments and defines the Mercator helpers the scripts share (the seen test, politeness
delays, host state, the ready set and wake-ups, the operator's halt, giving a host up, the
biased selector's refill, slots, requeues and lease expiry).

Host hash ``{crawl}:h:<host>`` fields: ``f<i>`` slot i's free time, ``b<i>`` slot i busy,
``nb`` busy slots, ``cd`` Crawl-delay, ``fl`` consecutive failures, ``fw`` the outcomes of the
last fetches (``1`` failed, ``0`` not; newest last, at most failure_window), ``ad`` URLs admitted,
``st`` ``dead``/``skip``, ``fi`` first entries in flight, ``bk`` holds a back queue, ``hq`` URLs
queued (front + back + first), ``fe`` fetches, ``le`` last fetch end, ``gs``/``gn`` sum and
count of real gaps between a fetch's end and the host's next lease, ``id`` the host's number in
the front queues (``host_id``; ``{crawl}:hid`` maps it back); under OPIC, ``fr`` its pointers in
the front queues (stale ones included), ``tr`` its first request was handed out once, ``lr``
URLs served in a row worth less than the best waiting.

Under OPIC (``CFG[18]``) the queues hold pointers and each host's queued URLs have a cash record
in one of its buckets ``{crawl}:cr:<b>:<host>`` (host field ``cb``: how many; see the comment
above ``cash_bucket``); the stats hash keeps the cash counters (``cash``, ``cn``, ``cs``,
``cc``, ``ct``, ``cx``) and ``br``, back queues given up.

Queued entries are :mod:`crawler.backends.redis.entries`'s bytes, which no script decodes: in a
front queue the host's number goes before them, and the refill takes it off.

A lease record (``{crawl}:lease`` hash, token -> msgpack) is
``[host, slot, is_first, completed, entry blob, issued_at, worker_id]``, under OPIC followed by
the URL's seen key, its cash and its crawl policy (a lease handed back gets its record again).
"""

from __future__ import annotations

from crawler.backends.redis.frontier_lua_opic import (
    OPIC_CASH_LUA,
    OPIC_LINKS_LUA,
    OPIC_REFILL_LUA,
)
from crawler.backends.redis.keys import CrawlKeys, ScriptKeys
from crawler.backends.redis.seen_lua import SEEN_LUA
from crawler.frontier.politeness import FAILURE_BACKOFF_MAX

# The keys the scripts touch, as FrontierKeys names them: each call is given the stats hash and
# builds the others on its tag (crawler.backends.redis.keys.ScriptKeys), these as locals of the
# prelude, the rest where a script writes @NAME@ (the per-host and per-priority ones are prefixes
# a host or a priority is appended to).
SCRIPT_KEYS = ScriptKeys(
    CrawlKeys("crawl").frontier(),
    "stats",
    local_keys=(
        ("READY", "ready"),
        ("LEASES", "leases"),
        ("LEASE", "lease"),
        ("HOSTS", "hosts"),
        ("SEEN", "seen"),
        ("SEL", "selector"),
        ("FETCHES", "fetches"),
        ("CTL", "controls"),
        ("BLOCKED", "blocked"),
        ("PROBE", "probe"),
        ("HOSTIDS", "host_ids"),
    ),
    inline_keys=(
        ("BLOOM", "seen_bloom"),
        ("BLOOM_N", "seen_bloom_count"),
        ("SEENX", "seen_bucket_prefix"),
        ("SEENI", "seen_info"),
        ("LAYER", "seen_layer_prefix"),
        ("WAKE", "wake"),
        ("FRONT", "front_prefix"),
        ("BACK", "back_prefix"),
        ("FIRST", "first_prefix"),
        ("HOST", "host_prefix"),
        ("CASH", "cash_prefix"),
    ),
)

PRELUDE = """
local STATS = KEYS[1]
""" + SCRIPT_KEYS.head() + r"""
local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
-- A key never written: on a cluster whose slot is being moved (resharding) touching it fails
-- at once, before this script writes anything (the client waits and calls again).
redis.call('EXISTS', PROBE)
local CFG = cmsgpack.unpack(ARGV[2])
local MIN_DELAY, FACTOR, MAX_DELAY = CFG[1], CFG[2], CFG[3]
local CONC, MAX_CD, MAX_FAIL, MAX_PAGES = CFG[4], CFG[5], CFG[6], CFG[7]
local K, B, TTL, REFILL, WEIGHTS = CFG[8], CFG[9], CFG[10], CFG[11], CFG[12]
local FAIL_WINDOW, WINDOW_FAIL = CFG[13] or 0, CFG[14] or 0
-- OPIC (crawler.frontier.opic): cash orders the front queues; BACK_RUN: a host gives its back
-- queue up after that many URLs in a row worth less than the best front queue waiting
local OPIC, BACK_RUN, FLOOR_BITS = CFG[18] == 1, CFG[19] or 0, CFG[20] or 8
local BACKOFF_MAX = """ + repr(FAILURE_BACKOFF_MAX) + r"""  -- politeness.FAILURE_BACKOFF_MAX

local function fmt(x) return string.format('%.17g', x) end
local function hkey(h) return @HOST@ .. h end
local function qkey(h) return @BACK@ .. h end
local function fqkey(h) return @FIRST@ .. h end
local function fkey(p) return @FRONT@ .. p end
local function num(v) return tonumber(v) or 0 end

""" + OPIC_CASH_LUA + r"""
-- The seen test (seen_add, seen_has, seen_count): crawler.backends.redis.seen_lua
""" + SEEN_LUA + r"""
local function delay(duration, cd)
  local wait = MIN_DELAY
  if duration and duration > 0 then wait = math.max(wait, FACTOR * duration) end
  wait = math.min(wait, MAX_DELAY)
  if cd and cd > 0 then wait = math.max(wait, cd) end
  return wait
end

local function backoff(failures)
  if failures <= 0 then return 0 end
  return math.min(MIN_DELAY * 2 ^ math.min(failures - 1, 30), BACKOFF_MAX)
end

local function load(name)
  local flat = redis.call('HGETALL', hkey(name))
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  return h
end

local function set(name, h, field, value)
  h[field] = value
  redis.call('HSET', hkey(name), field, value)
end

local function incr(name, h, field, delta)
  local v = redis.call('HINCRBY', hkey(name), field, delta)
  h[field] = tostring(v)
  return v
end

-- Operator blocks ({crawl}:blocked, field 'h:<host>' or 'd:<domain>'): is this host blocked,
-- by name or by one of its parent domains? O(labels of the name).
local function blocked_by(name)
  if redis.call('HEXISTS', BLOCKED, 'h:' .. name) == 1 then return true end
  local d = name
  while d do
    if redis.call('HEXISTS', BLOCKED, 'd:' .. d) == 1 then return true end
    local dot = string.find(d, '.', 1, true)
    d = dot and string.sub(d, dot + 1) or nil
  end
  return false
end

-- a host met for the first time gets its hash and joins the host set (blocked at once if
-- the operator blocked it, or its domain, before it was met)
local function ensure(name)
  local h = load(name)
  if next(h) == nil then
    redis.call('HSET', hkey(name), 'ad', 0)
    redis.call('SADD', HOSTS, name)
    h.ad = '0'
    if redis.call('EXISTS', BLOCKED) == 1 and blocked_by(name) then
      redis.call('HSET', hkey(name), 'st', 'blocked')
      h.st = 'blocked'
    end
  end
  return h
end

-- the free slot that comes due first, or -1
local function free_slot(h)
  local best, best_t = -1, nil
  for i = 0, CONC - 1 do
    if h['b' .. i] ~= '1' then
      local t = num(h['f' .. i])
      if best < 0 or t < best_t then best, best_t = i, t end
    end
  end
  return best, best_t
end

-- when the host can next hand out a URL, or nil if it has nothing it may hand out
local function ready_time(name, h)
  if h.st or num(h.fi) > 0 then return nil end
  if h.bk ~= '1' then
    if redis.call('LLEN', fqkey(name)) == 0 then return nil end
    -- OPIC: a host's first request (robots.txt) waits while its pages wait for a back queue
    -- (not a retry of it), as in the embedded frontier
    if OPIC and num(h.fr) > 0 and h.tr ~= '1' then return nil end
  end
  local slot, t = free_slot(h)
  if slot < 0 then return nil end
  return t
end

-- Idle workers block on the channel {crawl}:wake instead of polling: a script that makes a
-- host ready sooner than the earliest ready time (which idle workers already wait for), or
-- that drains the last lease, publishes there (see publish()).
local WAKE, FIRST = nil, nil
local function note_ready(t)
  if FIRST == nil then
    local top = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
    FIRST = top[2] and tonumber(top[2]) or math.huge
  end
  if t < FIRST and (WAKE == nil or t < WAKE) then WAKE = t end
end

local function publish()
  if WAKE then
    redis.call('PUBLISH', @WAKE@, fmt(math.max(0, WAKE - NOW)))
  elseif redis.call('ZCARD', LEASES) == 0 then
    redis.call('PUBLISH', @WAKE@, 'drained')
  end
end

local function reschedule(name, h)
  local t = ready_time(name, h)
  if t then
    note_ready(t)
    redis.call('ZADD', READY, fmt(t), name)
  else
    redis.call('ZREM', READY, name)
  end
end

-- The operator's controls ({crawl}:ctl): '' (hand out work), 'paused', or why the crawl is
-- over: 'deadline' (past the time in 'deadline'), 'byte_budget' (the bytes downloaded, counted
-- by complete, reached 'budget'; with several shards, each counts its own and a client that
-- found their sum over the budget sets 'over').
local HALT = nil
local function halted()
  if HALT == nil then
    HALT = ''
    local c = redis.call('HMGET', CTL, 'paused', 'deadline', 'budget', 'over')
    if c[2] and NOW >= tonumber(c[2]) then
      HALT = 'deadline'
    elseif c[3] and (c[4] or num(redis.call('HGET', STATS, 'bytes')) >= tonumber(c[3])) then
      HALT = 'byte_budget'
    elseif c[1] == '1' then
      HALT = 'paused'
    end
  end
  return HALT
end

-- what a worker's snapshot needs: {seconds until the earliest host is due ('' if none;
-- negative: how long it has been due, so a sharded crawl serves the most overdue shard first),
-- open leases, queued URLs, the operator's halt ('' if none)}
local function status()
  local top = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
  local due = ''
  -- halted: nothing is due (workers wait for the wake-up that lifts it, not poll)
  if #top > 0 and halted() == '' then due = fmt(tonumber(top[2]) - NOW) end
  return {due, redis.call('ZCARD', LEASES), num(redis.call('HGET', STATS, 'queued')), halted()}
end

local REASON_OF = {dead = 'host_dead', skip = 'host_skipped', blocked = 'host_blocked'}
local function drop_reason(h)
  return REASON_OF[h.st] or 'host_skipped'
end

-- the host this call gave up, for the caller to report: {name, reason, URLs dropped}
local GAVE_UP = nil

-- drop a host's queued URLs (front-queue URLs of it go when a refill meets them)
local function give_up(name, h, reason)
  if h.st then return end
  local n = redis.call('LLEN', fqkey(name))
  if OPIC then  -- its records go (front and back): its pointers left in front are skipped
    local cash, count = 0, 0
    for b = 0, math.max(num(h.cb), 1) - 1 do
      local flat = redis.call('HGETALL', bucket_key(b, name))
      for i = 1, #flat, 2 do
        if #flat[i] == 8 then  -- a record (not one of its pieces)
          cash = cash + rec_head(flat[i + 1])
          count = count + 1
        end
      end
      if #flat > 0 then redis.call('DEL', bucket_key(b, name)) end
    end
    redis.call('DEL', long_key(name))
    n = n + count
    if count > 0 then cash_move(-cash, -count, 'cx', cash) end
    if h.cb then
      redis.call('HDEL', hkey(name), 'cb')
      h.cb, h._ck = nil, nil
    end
  else
    n = n + redis.call('LLEN', qkey(name))
  end
  -- reported with its URLs still in front (hq counts them), which the refill drops
  GAVE_UP = {name, REASON_OF[reason], math.max(n, num(h.hq))}
  redis.call('DEL', fqkey(name), qkey(name))
  set(name, h, 'st', reason)
  if h.bk == '1' then
    set(name, h, 'bk', '0')
    redis.call('HINCRBY', STATS, 'used', -1)
  end
  if n > 0 then
    redis.call('HINCRBY', STATS, 'queued', -n)
    incr(name, h, 'hq', -n)
    redis.call('HINCRBY', STATS, 'drop:' .. drop_reason(h), n)
  end
  redis.call('ZREM', READY, name)
end

-- A host's number, as the varint that goes before its entries in the front queues (given
-- once, from the stats' 'hid' counter; {crawl}:hid maps it back to the name for the refill)
local function host_id(name, h)
  local id = h.id
  if not id then
    local n = redis.call('HINCRBY', STATS, 'hid', 1)
    id = ''
    while n >= 128 do
      id = id .. string.char(n % 128 + 128)
      n = math.floor(n / 128)
    end
    id = id .. string.char(n)
    redis.call('HSET', hkey(name), 'id', id)
    redis.call('HSET', HOSTIDS, id, name)
    h.id = id
  end
  return id
end

-- The biased selector's state for a refill (Mercator's and OPIC's): each front queue's length
-- and its current weight (smooth weighted round robin), or nil when the front queues are empty;
-- written back with the back queues in use when the refill is done
local function selector_load()
  local sizes, any = {}, false
  for p = 0, K - 1 do
    sizes[p] = redis.call('LLEN', fkey(p))
    if sizes[p] > 0 then any = true end
  end
  if not any then return nil end
  local fields = {}
  for p = 0, K - 1 do fields[p + 1] = 'c' .. p end
  local raw = redis.call('HMGET', SEL, unpack(fields))
  local cur = {}
  for p = 0, K - 1 do cur[p] = num(raw[p + 1]) end
  return sizes, cur
end

-- the selector's next front queue: smooth weighted round robin over the non-empty ones but
-- ``skip`` (-1: none), or -1 if there is none
local function selector_pick(sizes, cur, skip)
  local best, total = -1, 0
  for p = 0, K - 1 do
    if sizes[p] > 0 and p ~= skip then
      local w = WEIGHTS[p + 1]
      cur[p] = cur[p] + w
      total = total + w
      if best < 0 or cur[p] > cur[best] then best = p end
    end
  end
  if best >= 0 then cur[best] = cur[best] - total end
  return best
end

-- the host of a number in the front queues (host_id) and its state, each looked up once per
-- refill in ``names`` and ``hosts``; nil for a number no host has
local function host_by_id(id, names, hosts)
  local name = names[id]
  if name == nil then
    name = redis.call('HGET', HOSTIDS, id)
    names[id] = name
  end
  if not name then return nil, nil end
  local h = hosts[name]
  if not h then
    h = load(name)
    hosts[name] = h
  end
  return name, h
end

-- a refill moves a URL (its entry; under OPIC, its seen key) to its host's back queue, which
-- the host takes if it held none; returns the back queues in use
local function to_back(name, h, item, used)
  if h.bk ~= '1' then
    set(name, h, 'bk', '1')
    used = used + 1
  end
  if redis.call('RPUSH', qkey(name), item) == 1 then reschedule(name, h) end
  return used
end

local function selector_save(cur, used)
  local out = {}
  for p = 0, K - 1 do
    out[#out + 1] = 'c' .. p
    out[#out + 1] = cur[p]
  end
  redis.call('HSET', SEL, unpack(out))
  redis.call('HSET', STATS, 'used', used)
end

""" + OPIC_REFILL_LUA + r"""
-- Mercator's refill: move front-queue URLs to back queues (biased selector, back-queue router)
-- while fewer than B back queues are in use, at most REFILL moves per call
local function refill()
  if OPIC then return refill_opic() end
  local used = num(redis.call('HGET', STATS, 'used'))
  if used >= B then return end
  local sizes, cur = selector_load()
  if not sizes then return end
  local hosts, names = {}, {}
  local budget = REFILL
  while used < B and budget > 0 do
    local best = selector_pick(sizes, cur, -1)
    if best < 0 then break end
    budget = budget - 1
    local blob = redis.call('LPOP', fkey(best))
    sizes[best] = sizes[best] - 1
    -- the host's number before the entry (host_id): its varint ends at the first byte < 128
    local i = 1
    while string.byte(blob, i) >= 128 do i = i + 1 end
    local id = string.sub(blob, 1, i)
    blob = string.sub(blob, i + 1)
    local name, h = host_by_id(id, names, hosts)
    if not name then  -- a number no host has: only if keys were edited by hand
      redis.call('HINCRBY', STATS, 'queued', -1)
      redis.call('HINCRBY', STATS, 'drop:unknown_host', 1)
    elseif h.st then
      redis.call('HINCRBY', STATS, 'queued', -1)
      redis.call('HINCRBY', STATS, 'drop:' .. drop_reason(h), 1)
      incr(name, h, 'hq', -1)
    else
      used = to_back(name, h, blob, used)
    end
  end
  selector_save(cur, used)
end

""" + OPIC_LINKS_LUA + r"""
local function release_slot(name, h, slot, is_first)
  set(name, h, 'b' .. slot, '0')
  if incr(name, h, 'nb', -1) == 0 then redis.call('HINCRBY', STATS, 'busy', -1) end
  if is_first == 1 then incr(name, h, 'fi', -1) end
end

-- the slot rests for the politeness delay of a fetch of unknown length (it may have happened)
local function rest_slot(name, h, slot)
  local t = math.max(num(h['f' .. slot]), NOW + delay(nil, tonumber(h.cd)))
  set(name, h, 'f' .. slot, fmt(t))
end

-- a leased URL goes back to the head of its host's queue (or is dropped if the host is gone)
local function requeue(name, h, rec)
  if h.st then
    redis.call('HINCRBY', STATS, 'drop:' .. drop_reason(h), 1)
    return
  end
  if rec[3] == 1 then
    redis.call('LPUSH', fqkey(name), rec[5])
  else
    if rec[8] then  -- OPIC: its record again, with the cash the lease took
      local key, cash = rec[8], tonumber(rec[9]) or 0
      local ck = ckey(name, h, key)
      local v = redis.call('HGET', ck, key)
      if v then  -- queued again meanwhile (forced): one record, the cash added
        local c, top, q = rec_head(v)
        cash_move(cash, 0, 'cx', -cash)
        redis.call('HSET', ck, key, rec_repack(v, c + cash, top, q))
        return
      end
      cash_move(cash, 1, 'cx', -cash)
      rec_write(name, ck, key, cash, cash, ROUTED, rec[10] or '', rec[5])
      redis.call('LPUSH', qkey(name), key)
    else
      redis.call('LPUSH', qkey(name), rec[5])
    end
    if h.bk ~= '1' then
      -- may take B + 1 back queues for a while: the URL must not lose its place
      set(name, h, 'bk', '1')
      redis.call('HINCRBY', STATS, 'used', 1)
    end
  end
  redis.call('HINCRBY', STATS, 'queued', 1)
  incr(name, h, 'hq', 1)
end

local function forget_lease(token)
  redis.call('HDEL', LEASE, token)
  redis.call('ZREM', LEASES, token)
end

local function expire(limit)
  local tokens = redis.call('ZRANGEBYSCORE', LEASES, '-inf', fmt(NOW), 'LIMIT', 0, limit)
  for _, token in ipairs(tokens) do
    local raw = redis.call('HGET', LEASE, token)
    if raw then
      local rec = cmsgpack.unpack(raw)
      local name = rec[1]
      local h = load(name)
      if rec[4] == 0 then
        release_slot(name, h, rec[2], rec[3])
        rest_slot(name, h, rec[2])
      end
      requeue(name, h, rec)
      reschedule(name, h)
    end
    forget_lease(token)
  end
  return #tokens
end
"""
