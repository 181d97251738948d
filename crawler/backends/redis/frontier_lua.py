"""Lua source of the Redis frontier's scripts (``redis.py``), one script per operation.

Kept as a Python module rather than ``*.lua`` files so that it travels in a scrapyd egg without
package-data declarations. Every script is ``PRELUDE + body``; the prelude reads the common
arguments and defines the Mercator helpers (refill, reschedule, expire, give up).

Calling convention, shared by all scripts:

* ``KEYS[1]`` is ``{crawl}:stats``; every other key is derived from its ``{crawl}`` prefix. All
  keys share the hash tag, so they live on one Redis Cluster slot.
* ``ARGV[1]`` is the time in seconds, or ``''`` for the server's ``TIME`` (the normal case: the
  workers' clocks never meet; tests pass a fake clock's time).
* ``ARGV[2]`` is the politeness configuration, msgpack-packed once by the client:
  ``[min_delay, delay_factor, max_delay, host_concurrency, max_crawl_delay, max_failures,
  max_pages_per_host (-1: none), front_queues K, back_queues B, lease_ttl, refill_batch,
  [weights], failure_window, failures in the window that give a host up (0: off), Bloom bits
  and probes of the seen-set (0, 0: an exact SET)]``.
* Floats go back to the client as strings (Redis truncates Lua numbers to integers).

Host hash ``{crawl}:h:<host>`` fields: ``f<i>`` slot i's free time, ``b<i>`` slot i busy,
``nb`` busy slots, ``cd`` Crawl-delay, ``fl`` consecutive failures, ``fw`` the outcomes of the
last fetches (``1`` failed, ``0`` not; newest last, at most failure_window), ``ad`` URLs admitted,
``st`` ``dead``/``skip``, ``fi`` first entries in flight, ``bk`` holds a back queue, ``hq`` URLs
queued (front + back + first), ``fe`` fetches, ``le`` last fetch end, ``gs``/``gn`` sum and
count of real gaps between a fetch's end and the host's next lease.

A lease record (``{crawl}:lease`` hash, token -> msgpack) is
``[host, slot, is_first, completed, entry blob, issued_at, worker_id]``.
"""

from __future__ import annotations

PRELUDE = r"""
local STATS = KEYS[1]
local P = string.sub(STATS, 1, -7)
local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local CFG = cmsgpack.unpack(ARGV[2])
local MIN_DELAY, FACTOR, MAX_DELAY = CFG[1], CFG[2], CFG[3]
local CONC, MAX_CD, MAX_FAIL, MAX_PAGES = CFG[4], CFG[5], CFG[6], CFG[7]
local K, B, TTL, REFILL, WEIGHTS = CFG[8], CFG[9], CFG[10], CFG[11], CFG[12]
local FAIL_WINDOW, WINDOW_FAIL = CFG[13] or 0, CFG[14] or 0
local READY = P .. ':ready'
local LEASES = P .. ':leases'
local LEASE = P .. ':lease'
local HOSTS = P .. ':hosts'
local SEEN = P .. ':seen'
local SEL = P .. ':sel'
local FETCHES = P .. ':fetches'
local CTL = P .. ':ctl'
local BLOCKED = P .. ':blocked'

local function fmt(x) return string.format('%.17g', x) end
local function hkey(h) return P .. ':h:' .. h end
local function qkey(h) return P .. ':q:' .. h end
local function fqkey(h) return P .. ':fq:' .. h end
local function fkey(p) return P .. ':f:' .. p end
local function num(v) return tonumber(v) or 0 end

-- The seen test: a SET of 8-byte URL digests, or (FRONTIER_SEEN_BLOOM_CAPACITY) a Bloom filter
-- of BLOOM_M bits and BLOOM_K probes (double hashing of the digest's two halves) in one string,
-- with a count of the URLs it took. 1 when the URL is new.
local BLOOM_M, BLOOM_K = CFG[15] or 0, CFG[16] or 0
local function seen_add(key)
  if BLOOM_M == 0 then return redis.call('SADD', SEEN, key) end
  local h1, h2 = struct.unpack('>I4I4', key)
  local ops = {}
  for i = 0, BLOOM_K - 1 do
    ops[#ops + 1] = 'SET'; ops[#ops + 1] = 'u1'
    ops[#ops + 1] = (h1 + i * h2) % BLOOM_M; ops[#ops + 1] = 1
  end
  for _, old in ipairs(redis.call('BITFIELD', SEEN .. ':bloom', unpack(ops))) do
    if old == 0 then redis.call('INCR', SEEN .. ':bloom:n'); return 1 end
  end
  return 0
end
local function seen_count()
  if BLOOM_M == 0 then return redis.call('SCARD', SEEN) end
  return num(redis.call('GET', SEEN .. ':bloom:n'))
end

local function delay(duration, cd)
  local wait = MIN_DELAY
  if duration and duration > 0 then wait = math.max(wait, FACTOR * duration) end
  wait = math.min(wait, MAX_DELAY)
  if cd and cd > 0 then wait = math.max(wait, cd) end
  return wait
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
  if h.bk ~= '1' and redis.call('LLEN', fqkey(name)) == 0 then return nil end
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
    redis.call('PUBLISH', P .. ':wake', fmt(math.max(0, WAKE - NOW)))
  elseif redis.call('ZCARD', LEASES) == 0 then
    redis.call('PUBLISH', P .. ':wake', 'drained')
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
-- by complete, reached 'budget').
local HALT = nil
local function halted()
  if HALT == nil then
    HALT = ''
    local c = redis.call('HMGET', CTL, 'paused', 'deadline', 'budget')
    if c[2] and NOW >= tonumber(c[2]) then
      HALT = 'deadline'
    elseif c[3] and num(redis.call('HGET', STATS, 'bytes')) >= tonumber(c[3]) then
      HALT = 'byte_budget'
    elseif c[1] == '1' then
      HALT = 'paused'
    end
  end
  return HALT
end

-- what a worker's snapshot needs: {seconds until the earliest host is due ('' if none),
-- open leases, queued URLs, the operator's halt ('' if none)}
local function status()
  local top = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
  local due = ''
  -- halted: nothing is due (workers wait for the wake-up that lifts it, not poll)
  if #top > 0 and halted() == '' then due = fmt(math.max(0, tonumber(top[2]) - NOW)) end
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
  local n = redis.call('LLEN', fqkey(name)) + redis.call('LLEN', qkey(name))
  GAVE_UP = {name, REASON_OF[reason], n}
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

-- Mercator's refill: move front-queue URLs to back queues (biased selector, back-queue router)
-- while fewer than B back queues are in use, at most REFILL moves per call
local function refill()
  local used = num(redis.call('HGET', STATS, 'used'))
  if used >= B then return end
  local sizes, any = {}, false
  for p = 0, K - 1 do
    sizes[p] = redis.call('LLEN', fkey(p))
    if sizes[p] > 0 then any = true end
  end
  if not any then return end
  local fields = {}
  for p = 0, K - 1 do fields[p + 1] = 'c' .. p end
  local raw = redis.call('HMGET', SEL, unpack(fields))
  local cur = {}
  for p = 0, K - 1 do cur[p] = num(raw[p + 1]) end
  local hosts = {}
  local budget = REFILL
  while used < B and budget > 0 do
    local best, total = -1, 0
    for p = 0, K - 1 do
      if sizes[p] > 0 then
        local w = WEIGHTS[p + 1]
        cur[p] = cur[p] + w
        total = total + w
        if best < 0 or cur[p] > cur[best] then best = p end
      end
    end
    if best < 0 then break end
    cur[best] = cur[best] - total
    budget = budget - 1
    local blob = redis.call('LPOP', fkey(best))
    sizes[best] = sizes[best] - 1
    local _, name = cmsgpack.unpack_one(blob)
    local h = hosts[name]
    if not h then
      h = load(name)
      hosts[name] = h
    end
    if h.st then
      redis.call('HINCRBY', STATS, 'queued', -1)
      redis.call('HINCRBY', STATS, 'drop:' .. drop_reason(h), 1)
      incr(name, h, 'hq', -1)
    else
      if h.bk ~= '1' then
        set(name, h, 'bk', '1')
        used = used + 1
      end
      if redis.call('RPUSH', qkey(name), blob) == 1 then reschedule(name, h) end
    end
  end
  local out = {}
  for p = 0, K - 1 do
    out[#out + 1] = 'c' .. p
    out[#out + 1] = cur[p]
  end
  redis.call('HSET', SEL, unpack(out))
  redis.call('HSET', STATS, 'used', used)
end

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
    redis.call('LPUSH', qkey(name), rec[5])
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

ADD = r"""
local force, first = ARGV[3] == '1', ARGV[4] == '1'
local out, hosts = {}, {}
local added, to_front = 0, false
for i = 5, #ARGV, 4 do
  local key, name, prio, blob = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local h = hosts[name]
  if not h then
    h = ensure(name)
    h._ad, h._hq = 0, 0
    hosts[name] = h
  end
  local code = 0
  if h.st == 'dead' then
    code = 4
  elseif h.st == 'blocked' then
    code = 5
  elseif h.st then
    code = 3
  elseif not force then
    if MAX_PAGES >= 0 and num(h.ad) + h._ad >= MAX_PAGES then
      code = 2
    elseif seen_add(key) == 0 then
      code = 1
    else
      h._ad = h._ad + 1
    end
  else
    seen_add(key)  -- a forced URL (a start URL, a retry) is known: its links back are not new
  end
  if code == 0 then
    added = added + 1
    h._hq = h._hq + 1
    if first then
      redis.call('RPUSH', fqkey(name), blob)
    else
      redis.call('RPUSH', fkey(prio), blob)
      to_front = true
    end
  end
  out[#out + 1] = code
end
if added > 0 then redis.call('HINCRBY', STATS, 'queued', added) end
for name, h in pairs(hosts) do
  if h._ad > 0 then redis.call('HINCRBY', hkey(name), 'ad', h._ad) end
  if h._hq > 0 then redis.call('HINCRBY', hkey(name), 'hq', h._hq) end
  if first and h._hq > 0 then reschedule(name, h) end
end
if to_front then refill() end
if WAKE then publish() end
return out
"""

NEXT = r"""
local n, worker = tonumber(ARGV[3]), ARGV[4]
expire(16)
refill()
local out = {}
local guard = 0
if halted() ~= '' then n = 0 end  -- paused, or the operator's deadline or byte budget reached
while #out < n and guard < n + 64 do
  guard = guard + 1
  local top = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
  if #top == 0 or tonumber(top[2]) > NOW then break end
  local name = top[1]
  local h = load(name)
  local slot = free_slot(h)
  local blob, is_first, emptied = nil, 0, false
  if slot >= 0 then
    if redis.call('LLEN', fqkey(name)) > 0 then
      blob = redis.call('LPOP', fqkey(name))
      is_first = 1
      incr(name, h, 'fi', 1)
    else
      blob = redis.call('LPOP', qkey(name))
      if redis.call('LLEN', qkey(name)) == 0 and h.bk == '1' then
        set(name, h, 'bk', '0')
        redis.call('HINCRBY', STATS, 'used', -1)
        emptied = true
      end
    end
  end
  if not blob then
    redis.call('ZREM', READY, name)  -- a stale entry: only if keys were edited by hand
  else
    redis.call('HINCRBY', STATS, 'queued', -1)
    incr(name, h, 'hq', -1)
    set(name, h, 'b' .. slot, '1')
    if incr(name, h, 'nb', 1) == 1 then redis.call('HINCRBY', STATS, 'busy', 1) end
    if h.le then
      redis.call('HINCRBYFLOAT', hkey(name), 'gs', fmt(NOW - tonumber(h.le)))
      redis.call('HINCRBY', hkey(name), 'gn', 1)
    end
    local token = tostring(redis.call('HINCRBY', STATS, 'seq', 1))
    redis.call('HSET', LEASE, token,
      cmsgpack.pack({name, slot, is_first, 0, blob, NOW, worker}))
    redis.call('ZADD', LEASES, fmt(NOW + TTL), token)
    reschedule(name, h)
    if emptied then refill() end
    out[#out + 1] = {token, slot, blob}
  end
end
return {fmt(NOW), out, status()}
"""

COMPLETE = r"""
local token, outcome, and_ack = ARGV[3], ARGV[5], ARGV[6] == '1'
local duration = tonumber(ARGV[4])
local size = tonumber(ARGV[7] or '0') or 0
-- the reply: {the slot's rest in seconds from now ('' if the fetch moved no time, or the lease
-- was not open and uncompleted)}, then the host this call gave up, if any
local raw = redis.call('HGET', LEASE, token)
if not raw then return {''} end
local rec = cmsgpack.unpack(raw)
if rec[4] == 1 then
  if and_ack then forget_lease(token) end
  return {''}
end
local rest = ''
if size > 0 then redis.call('HINCRBY', STATS, 'bytes', size) end  -- the byte budget
local name, slot = rec[1], rec[2]
local h = load(name)
release_slot(name, h, slot, rec[3])
if outcome ~= 'not_sent' then
  incr(name, h, 'fe', 1)
  redis.call('ZINCRBY', FETCHES, 1, name)
  set(name, h, 'le', fmt(NOW))
  -- max(): a hold placed while the fetch was in flight must not be shortened
  local t = math.max(num(h['f' .. slot]), NOW + delay(duration, tonumber(h.cd)))
  set(name, h, 'f' .. slot, fmt(t))
  rest = fmt(t - NOW)
  local failed = outcome == 'failed'
  local in_window = 0
  if FAIL_WINDOW > 0 then
    local w = (h.fw or '') .. (failed and '1' or '0')
    if #w > FAIL_WINDOW then w = string.sub(w, -FAIL_WINDOW) end
    if w ~= h.fw then set(name, h, 'fw', w) end
    in_window = select(2, string.gsub(w, '1', ''))
  end
  if failed then
    local row = incr(name, h, 'fl', 1)
    if row >= MAX_FAIL or (WINDOW_FAIL > 0 and in_window >= WINDOW_FAIL) then
      give_up(name, h, 'dead')
    end
  elseif h.fl ~= '0' and h.fl then
    set(name, h, 'fl', '0')
  end
end
if and_ack then
  forget_lease(token)
else
  rec[4] = 1
  redis.call('HSET', LEASE, token, cmsgpack.pack(rec))
end
reschedule(name, h)
if h.st then refill() end
if and_ack or WAKE then publish() end
if GAVE_UP then return {rest, GAVE_UP[1], GAVE_UP[2], GAVE_UP[3]} end
return {rest}
"""

ACK = r"""
local token = ARGV[3]
local raw = redis.call('HGET', LEASE, token)
if not raw then return 0 end
local rec = cmsgpack.unpack(raw)
if rec[4] == 0 then
  -- acknowledged without a completion: the fetch may have happened, so the slot rests
  local name, slot = rec[1], rec[2]
  local h = load(name)
  release_slot(name, h, slot, rec[3])
  rest_slot(name, h, slot)
  reschedule(name, h)
end
forget_lease(token)
publish()
return 1
"""

RENEW = r"""
local n = 0
for i = 3, #ARGV do
  if redis.call('ZSCORE', LEASES, ARGV[i]) then
    redis.call('ZADD', LEASES, 'XX', fmt(NOW + TTL), ARGV[i])
    n = n + 1
  end
end
return n
"""

RELEASE = r"""
local n = 0
local rest = ARGV[3] == '1'
for i = 4, #ARGV do
  local token = ARGV[i]
  local raw = redis.call('HGET', LEASE, token)
  if raw then
    local rec = cmsgpack.unpack(raw)
    local name = rec[1]
    local h = load(name)
    if rec[4] == 0 then
      release_slot(name, h, rec[2], rec[3])
      -- a download cut short (a worker stopping): the server may have seen the request
      if rest then rest_slot(name, h, rec[2]) end
    end
    requeue(name, h, rec)
    reschedule(name, h)
    forget_lease(token)
    n = n + 1
  end
end
if n > 0 then publish() end
return n
"""

EXPIRE = r"""
local n = expire(tonumber(ARGV[3]))
if n > 0 then publish() end
return n
"""

HOLD = r"""
local name, seconds = ARGV[3], tonumber(ARGV[4])
local h = ensure(name)
local until_t = NOW + seconds
for i = 0, CONC - 1 do
  if num(h['f' .. i]) < until_t then set(name, h, 'f' .. i, fmt(until_t)) end
end
reschedule(name, h)
if WAKE then publish() end
return 1
"""

CRAWL_DELAY = r"""
local name, seconds = ARGV[3], tonumber(ARGV[4])
local h = ensure(name)
if seconds then
  set(name, h, 'cd', fmt(seconds))
else
  redis.call('HDEL', hkey(name), 'cd')
  h.cd = nil
end
if seconds and seconds > MAX_CD then
  give_up(name, h, 'skip')
  refill()
  if WAKE then publish() end
  return GAVE_UP or 0
end
reschedule(name, h)
if WAKE then publish() end
return 1
"""

DUE = r"""
expire(16)
refill()
return status()
"""

# block a host: its queued URLs dropped (counted in drop:host_blocked), nothing more handed
# out or admitted. ARGV[4] '1': blocked by its own name (kept in {crawl}:blocked), '0': by a
# domain block (the client walks the host set with SSCAN; no script walks it)
BLOCK = r"""
local name = ARGV[3]
if ARGV[4] == '1' then redis.call('HSET', BLOCKED, 'h:' .. name, fmt(NOW)) end
local h = load(name)
if next(h) == nil then  -- not met yet: its URLs will be refused when they come
  redis.call('HSET', hkey(name), 'ad', 0)
  redis.call('SADD', HOSTS, name)
  h.ad = '0'
end
local n = 0
if h.st ~= 'blocked' then
  if h.st then set(name, h, 'was', h.st) end  -- given up before: restored by an unblock
  h.st = nil
  give_up(name, h, 'blocked')
  n = GAVE_UP[3]
end
redis.call('PUBLISH', P .. ':wake', 'ctl')
return n
"""

# unblock a host (ARGV[4] '1': its own block is lifted) unless it is still blocked by name or
# by a domain; its dropped URLs stay dropped (and seen), new ones are admitted again
UNBLOCK = r"""
local name = ARGV[3]
if ARGV[4] == '1' then redis.call('HDEL', BLOCKED, 'h:' .. name) end
local h = load(name)
if h.st ~= 'blocked' or blocked_by(name) then return 0 end
if h.was then
  set(name, h, 'st', h.was)
  redis.call('HDEL', hkey(name), 'was')
else
  redis.call('HDEL', hkey(name), 'st')
  h.st = nil
  reschedule(name, h)
end
redis.call('PUBLISH', P .. ':wake', 'ctl')
return 1
"""

# set ('' deletes) one control: paused, deadline (ARGV[5] 'rel': seconds from now), budget
CONTROL = r"""
local field, value = ARGV[3], ARGV[4]
if value == '' then
  redis.call('HDEL', CTL, field)
else
  if ARGV[5] == 'rel' then value = fmt(NOW + tonumber(value)) end
  redis.call('HSET', CTL, field, value)
end
redis.call('PUBLISH', P .. ':wake', 'ctl')
return {fmt(NOW), halted()}
"""

COUNTS = r"""
local front = 0
for p = 0, K - 1 do front = front + redis.call('LLEN', fkey(p)) end
local ready = redis.call('ZCOUNT', READY, '-inf', fmt(NOW))
local s = redis.call('HGETALL', STATS)
return {fmt(NOW), redis.call('ZCARD', LEASES), seen_count(),
  redis.call('SCARD', HOSTS), ready, redis.call('ZCARD', READY) - ready, front, s, halted()}
"""

SCRIPTS: dict[str, str] = {
    name: PRELUDE + body
    for name, body in {
        "add": ADD,
        "next": NEXT,
        "complete": COMPLETE,
        "ack": ACK,
        "renew": RENEW,
        "release": RELEASE,
        "expire": EXPIRE,
        "hold": HOLD,
        "crawl_delay": CRAWL_DELAY,
        "due": DUE,
        "counts": COUNTS,
        "block": BLOCK,
        "unblock": UNBLOCK,
        "control": CONTROL,
    }.items()
}
