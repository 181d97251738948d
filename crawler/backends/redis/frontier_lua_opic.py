"""OPIC in the Redis frontier's scripts (``frontier_lua_prelude`` puts these pieces in its
prelude): the cash records beside the queues, the refill over pointers with the floor queue,
the cash a link brings, and a back queue given up by value. The rules are the embedded
frontier's (``crawler.frontier.opic``, ``MercatorFrontier``), as Lua over Redis keys.

``OPIC_CASH_LUA`` goes before the helpers that drop a host's URLs (they count its cash out),
``OPIC_REFILL_LUA`` before Mercator's refill (which hands over to it under OPIC),
``OPIC_LINKS_LUA`` after it (a back queue given up refills).
"""

from __future__ import annotations

OPIC_CASH_LUA = r"""
-- OPIC cash records (crawler.frontier.opic's CashLedger, in Redis): {crawl}:c:<host> maps a
-- queued URL's seen key (8 bytes) to its record: struct '<dfB' (its cash, the largest share
-- one link brought it, its live front queue or ROUTED once in its host's back queue), the
-- crawl policy's length and name, then the entry's bytes. The queues hold only pointers: a
-- front queue the host's number and the seen key, a back queue the seen key. Cash arriving for
-- a URL still in the front queues pushes a pointer into the better queue it now deserves; the
-- older one is stale (its queue is no longer the record's) and skipped by the refill.
local ROUTED = 255
local function rec_unpack(v)
  local cash, best, q, pos = struct.unpack('<dfB', v)
  local plen = string.byte(v, pos)
  return cash, best, q, string.sub(v, pos + 1, pos + plen), string.sub(v, pos + plen + 1)
end
local function rec_pack(cash, best, q, policy, blob)
  if #policy > 255 then policy = string.sub(policy, 1, 255) end
  return struct.pack('<dfB', cash, best, q) .. string.char(#policy) .. policy .. blob
end

-- The crawl's cash counters in the stats (cash: of the queued URLs, cn: queued URLs holding
-- some, cs seeded, cc credited, ct arrived for URLs no longer queued, cx spent: handed out or
-- dropped): read once per call, written through unless CASH_DEFER (the add script, which
-- writes them once at its end with cash_flush)
local CT, CASH_DEFER, CP = nil, false, {}
local function cash_state()
  if CT == nil then
    local v = redis.call('HMGET', STATS, 'cash', 'cn')
    CT = {tonumber(v[1]) or 0, tonumber(v[2]) or 0}
  end
  return CT
end
local function cash_flush()
  for field, d in pairs(CP) do
    if d ~= 0 then
      if field == 'cn' then
        redis.call('HINCRBY', STATS, field, d)
      else
        redis.call('HINCRBYFLOAT', STATS, field, fmt(d))
      end
    end
  end
  CP = {}
end
-- cash d moves into (or out of, d < 0) the queued URLs, n records with it; what it was is
-- counted in ``field`` (amount ``counted``)
local function cash_move(d, n, field, counted)
  local c = cash_state()
  c[1] = c[1] + d
  if c[1] < 0 then c[1] = 0 end  -- rounding
  c[2] = c[2] + n
  CP.cash = (CP.cash or 0) + d
  if n ~= 0 then CP.cn = (CP.cn or 0) + n end
  if field then CP[field] = (CP[field] or 0) + counted end
  if not CASH_DEFER then cash_flush() end
end
-- the front queue of a URL holding ``cash`` (0: the most): its log2 distance from the mean
-- cash of the queued URLs, around the middle queue (CashLedger.bucket)
local function bucket(cash)
  local last = K - 1
  if cash <= 0 then return last > 0 and last - 1 or 0 end  -- no cash known: not the floor
  local c = cash_state()
  local mean = (c[2] > 0 and c[1] > 0) and c[1] / c[2] or cash
  local _, e = math.frexp(mean / cash)
  local q = math.floor(K / 2) + e - 1
  if q < last then return q < 0 and 0 or q end
  -- the floor: only URLs worth next to nothing (crawler.frontier.opic.FLOOR_BITS)
  if e > FLOOR_BITS or last == 0 then return last end
  return last - 1
end

"""

OPIC_REFILL_LUA = r"""
-- The refill under OPIC (Mercator's, over pointers): the last front queue is a floor (URLs
-- worth little: a distrusted source's), drawn only once no other front queue holds anything
-- and no back queue is in use (crawler.frontier.opic.pick_above_floor); a stale pointer (left
-- behind by a raise) or one of a host given up is skipped without costing a move.
local function refill_opic()
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
  local hosts, names = {}, {}
  local budget, guard, floor = REFILL, 8 * REFILL + 64, K - 1
  while used < B and budget > 0 and guard > 0 do
    guard = guard - 1
    local above = false
    if floor > 0 and sizes[floor] > 0 then
      for p = 0, floor - 1 do
        if sizes[p] > 0 then above = true break end
      end
      if not above and used > 0 then break end  -- the floor waits for the back queues
    end
    local best, total = -1, 0
    for p = 0, K - 1 do
      if sizes[p] > 0 and not (above and p == floor) then
        local w = WEIGHTS[p + 1]
        cur[p] = cur[p] + w
        total = total + w
        if best < 0 or cur[p] > cur[best] then best = p end
      end
    end
    if best < 0 then break end
    cur[best] = cur[best] - total
    local el = redis.call('LPOP', fkey(best))
    sizes[best] = sizes[best] - 1
    local id, key = string.sub(el, 1, -9), string.sub(el, -8)
    local name = names[id]
    if name == nil then
      name = redis.call('HGET', HOSTIDS, id)
      names[id] = name
    end
    local h = name and hosts[name]
    if name and not h then
      h = load(name)
      hosts[name] = h
    end
    if name and not h.st then
      if num(h.fr) > 0 then incr(name, h, 'fr', -1) end
      local v = redis.call('HGET', ckey(name), key)
      if v then
        local cash, top, q, policy, blob = rec_unpack(v)
        if q == best then  -- its live pointer
          budget = budget - 1
          redis.call('HSET', ckey(name), key, rec_pack(cash, top, ROUTED, policy, blob))
          if h.bk ~= '1' then
            set(name, h, 'bk', '1')
            used = used + 1
          end
          if redis.call('RPUSH', qkey(name), key) == 1 then reschedule(name, h) end
        end
      end
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

"""

OPIC_LINKS_LUA = r"""
-- OPIC, a URL of the add script: a new URL's record and its pointer in the front queue its
-- cash deserves. A URL forced in again (a retry, a seed given again) while still queued keeps
-- one record: the cash added, the newest entry and policy kept, raised if it deserves a better
-- queue now. True when a URL was queued anew. (h._fr: pointers pushed, written by the caller)
local function admit_cash(name, h, key, blob, cash, policy)
  local ck = ckey(name)
  local v = redis.call('HGET', ck, key)
  if v then
    local c, top, q = rec_unpack(v)
    cash_move(cash, 0, 'cs', cash)
    c = c + cash
    if cash > top then top = cash end
    if q ~= ROUTED then
      local better = bucket(c)
      if better < q then
        redis.call('RPUSH', fkey(better), host_id(name, h) .. key)
        h._fr = h._fr + 1
        q = better
      end
    end
    redis.call('HSET', ck, key, rec_pack(c, top, q, policy, blob))
    return false
  end
  cash_move(cash, 1, 'cs', cash)
  local q = bucket(cash)
  redis.call('HSET', ck, key, rec_pack(cash, cash, q, policy, blob))
  redis.call('RPUSH', fkey(q), host_id(name, h) .. key)
  h._fr = h._fr + 1
  return true
end

-- OPIC: cash for a URL seen before (CashLedger.credit): a queued URL gathers it and, still in
-- the front queues, moves to the better queue it now deserves; it takes the crawl policy of
-- the link that brought it the largest share (a tie: the first). Cash for a URL no longer
-- queued is its history ('ct').
local function credit_cash(name, h, key, cash, policy)
  local ck = ckey(name)
  local v = redis.call('HGET', ck, key)
  if not v then
    cash_move(0, 0, 'ct', cash)
    return
  end
  local c, top, q, pol, blob = rec_unpack(v)
  cash_move(cash, 0, 'cc', cash)
  c = c + cash
  if cash > top * (1 + 1e-6) then  -- (top is a float: a tie stays a tie)
    top = cash
    pol = policy
  end
  if q ~= ROUTED then
    local better = bucket(c)
    if better < q then
      redis.call('RPUSH', fkey(better), host_id(name, h) .. key)
      h._fr = h._fr + 1
      q = better
    end
  end
  redis.call('HSET', ck, key, rec_pack(c, top, q, pol, blob))
end

-- OPIC: the host gives its back queue up (MercatorFrontier._bounce): its URLs go back to the
-- front queues by the cash they hold now
local function bounce(name, h)
  local keys = redis.call('LRANGE', qkey(name), 0, -1)
  redis.call('DEL', qkey(name))
  set(name, h, 'bk', '0')
  set(name, h, 'lr', '0')
  redis.call('HINCRBY', STATS, 'used', -1)
  redis.call('HINCRBY', STATS, 'br', 1)
  local ck, id, n = ckey(name), host_id(name, h), 0
  for _, key in ipairs(keys) do
    local v = redis.call('HGET', ck, key)
    if v then
      local c, top, _, pol, blob = rec_unpack(v)
      local q = bucket(c)
      redis.call('HSET', ck, key, rec_pack(c, top, q, pol, blob))
      redis.call('RPUSH', fkey(q), id .. key)
      n = n + 1
    end
  end
  if n > 0 then incr(name, h, 'fr', n) end
  reschedule(name, h)
  refill()
end

-- OPIC: after the host served a URL worth ``cash`` from its back queue: a run of BACK_RUN
-- URLs worth less than the best front queue waiting, while no back queue is free, gives its
-- back queue up (MercatorFrontier._judge_run)
local function judge_run(name, h, cash)
  local value = bucket(cash)
  local best = value
  for p = 0, K - 1 do
    if redis.call('LLEN', fkey(p)) > 0 then
      best = p
      break
    end
  end
  local low = num(redis.call('HGET', STATS, 'used')) >= B and value > best
  local run = low and num(h.lr) + 1 or 0
  if run >= BACK_RUN then
    bounce(name, h)
  elseif run ~= num(h.lr) then
    set(name, h, 'lr', run)
  end
end

"""
