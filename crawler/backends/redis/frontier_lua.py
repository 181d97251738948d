"""Lua source of the Redis frontier's scripts (``frontier.py``), one script per operation.

Kept as a Python module rather than ``*.lua`` files so that it travels in a scrapyd egg without
package-data declarations. Every script is ``PRELUDE + body``; the prelude
(``frontier_lua_prelude``) reads the keys and the common arguments and defines the Mercator
helpers (refill, reschedule, expire, give up).

Calling convention, shared by all scripts:

* ``KEYS[1]`` is the stats hash (``{crawl}:stats``); every other key is built on its tag with
  the names :class:`crawler.backends.redis.keys.FrontierKeys` gives (``SCRIPT_KEYS``, a
  :class:`~crawler.backends.redis.keys.ScriptKeys`). All share the hash tag, so they live on
  one Redis Cluster slot.
* ``ARGV[1]`` is the time in seconds, or ``''`` for the server's ``TIME`` (the normal case: the
  workers' clocks never meet; tests pass a fake clock's time).
* ``ARGV[2]`` is the politeness configuration, msgpack-packed once by the client:
  ``[min_delay, delay_factor, max_delay, host_concurrency, max_crawl_delay, max_failures,
  max_pages_per_host (-1: none), front_queues K, back_queues B, lease_ttl, refill_batch,
  [weights], failure_window, failures in the window that give a host up (0: off), a fixed Bloom
  filter's bits and probes (0, 0: none), {the seen-set's exact limit, error, bucket bits, first
  layer, growth, tightening} (``seen_lua``), OPIC (1/0), FRONTIER_BACK_RUN under OPIC, the
  floor's bits (``crawler.frontier.opic.FLOOR_BITS``)]``.
* Floats go back to the client as strings (Redis truncates Lua numbers to integers).
"""

from __future__ import annotations

from crawler.backends.redis.frontier_lua_prelude import PRELUDE, SCRIPT_KEYS

__all__ = ["PRELUDE", "SCRIPTS", "SCRIPT_KEYS"]

ADD = r"""
-- items: seen key, host, front queue, entry bytes; under OPIC, seen key, host, kind ('a'), entry
-- bytes, cash, policy. Under OPIC, the last argument is the cash for URLs seen before
-- (Frontier.credit, no reply): msgpack {{seen key, host, cash, policy, largest share}, ...}
-- (cash.pack_credits: one per URL), or ''.
local force, first = ARGV[3] == '1', ARGV[4] == '1'
local out, hosts = {}, {}
local added, to_front = 0, false
local stride, last_item = 4, #ARGV
if OPIC then
  stride, last_item = 6, #ARGV - 1
end
CASH_DEFER = OPIC
for i = 5, last_item, stride do
  local key, name, prio, blob = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local h = hosts[name]
  if not h then
    h = ensure(name)
    h._ad, h._hq, h._fr = 0, 0, 0
    hosts[name] = h
  end
  do
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
        -- OPIC: a link to a URL seen before still brings its cash
        if OPIC then
          local cash = tonumber(ARGV[i + 4])
          credit_cash(name, h, key, cash, ARGV[i + 5], cash)
        end
      else
        h._ad = h._ad + 1
      end
    else
      -- a forced URL (a start URL, a retry) is known: its links back are not new
      seen_add(key, true)
    end
    if code == 0 then
      if first then
        added = added + 1
        h._hq = h._hq + 1
        redis.call('RPUSH', fqkey(name), blob)
      elseif OPIC then
        if admit_cash(name, h, key, blob, tonumber(ARGV[i + 4]), ARGV[i + 5], force) then
          added = added + 1
          h._hq = h._hq + 1
        end
        to_front = true
      else
        added = added + 1
        h._hq = h._hq + 1
        -- a front queue holds every host's URLs: the host's number goes before the entry
        redis.call('RPUSH', fkey(prio), host_id(name, h) .. blob)
        to_front = true
      end
    end
    out[#out + 1] = code
  end
end
if OPIC and ARGV[#ARGV] ~= '' then  -- after the links queued before them
  for _, c in ipairs(cmsgpack.unpack(ARGV[#ARGV])) do
    local name = c[2]
    local h = hosts[name]
    if not h then
      h = ensure(name)
      h._ad, h._hq, h._fr = 0, 0, 0
      hosts[name] = h
    end
    if not h.st then credit_cash(name, h, c[1], c[3], c[4], c[5]) end
  end
end
if added > 0 then redis.call('HINCRBY', STATS, 'queued', added) end
for name, h in pairs(hosts) do
  if h._ad > 0 then redis.call('HINCRBY', hkey(name), 'ad', h._ad) end
  if h._hq > 0 then redis.call('HINCRBY', hkey(name), 'hq', h._hq) end
  if h._fr > 0 then
    h.fr = tostring(redis.call('HINCRBY', hkey(name), 'fr', h._fr))
    -- OPIC: its robots.txt now waits with its pages for a back queue
    if h.bk ~= '1' then reschedule(name, h) end
  elseif first and h._hq > 0 then
    reschedule(name, h)
  end
end
-- routed to back queues when URLs are handed out (NEXT, DUE), by priority, as on a reopen:
-- a worker idle on the wake channel is told to come for them
if to_front then note_ready(NOW) end
cash_flush()
seen_flush()
if WAKE then publish() end
return out
"""

NEXT = r"""
local n, worker = tonumber(ARGV[3]), ARGV[4]
CASH_DEFER = OPIC  -- the leases' cash leaves the counters in one write, at the end
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
  local key, cash, policy, stray = nil, 0, '', false
  if slot >= 0 then
    if redis.call('LLEN', fqkey(name)) > 0 then
      blob = redis.call('LPOP', fqkey(name))
      is_first = 1
      incr(name, h, 'fi', 1)
      if OPIC and h.tr ~= '1' then set(name, h, 'tr', '1') end
    else
      blob = redis.call('LPOP', qkey(name))
      if redis.call('LLEN', qkey(name)) == 0 and h.bk == '1' then
        set(name, h, 'bk', '0')
        redis.call('HINCRBY', STATS, 'used', -1)
        emptied = true
      end
      if OPIC and blob then  -- a pointer: the URL leaves with its record and the cash it holds
        key = blob
        local c, pol, b = rec_take(name, h, key)
        if c then
          cash_move(-c, -1, 'cx', c)
          blob, cash, policy = b, c, pol
        else
          stray = true  -- no record: only if keys were edited by hand
        end
      end
    end
  end
  if stray then
    redis.call('HINCRBY', STATS, 'queued', -1)
    incr(name, h, 'hq', -1)
    reschedule(name, h)
    if emptied then refill() end
  elseif not blob then
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
    if key then
      redis.call('HSET', LEASE, token,
        cmsgpack.pack({name, slot, is_first, 0, blob, NOW, worker, key, fmt(cash), policy}))
    else
      redis.call('HSET', LEASE, token,
        cmsgpack.pack({name, slot, is_first, 0, blob, NOW, worker}))
    end
    redis.call('ZADD', LEASES, fmt(NOW + TTL), token)
    if key and BACK_RUN > 0 and not emptied then judge_run(name, h, cash) end
    reschedule(name, h)
    if emptied then refill() end
    if key then
      out[#out + 1] = {token, slot, blob, name, fmt(cash), policy}
    else
      out[#out + 1] = {token, slot, blob, name}
    end
  end
end
cash_flush()
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
    else
      -- held longer at each failure, as PolitenessPolicy.backoff
      local counted = FAIL_WINDOW > 0 and in_window or row
      local held = t + backoff(counted)
      set(name, h, 'f' .. slot, fmt(held))
      rest = fmt(held - NOW)
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
redis.call('PUBLISH', @WAKE@, 'ctl')
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
redis.call('PUBLISH', @WAKE@, 'ctl')
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
redis.call('PUBLISH', @WAKE@, 'ctl')
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
    name: SCRIPT_KEYS.render(PRELUDE + body)
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
