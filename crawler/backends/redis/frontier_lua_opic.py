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
-- OPIC cash records (crawler.frontier.opic's CashLedger, in Redis): a queued URL's seen key (8
-- bytes) maps to its record: struct '<dfBB' (its cash, the largest share one link brought it,
-- its live front queue or ROUTED once in its host's back queue, where the record goes on),
-- then its tail: the crawl policy's length and name, then the entry's bytes. A value of
-- a listpack hash may not pass 64 bytes (the stock hash-max-listpack-value) or the whole hash
-- becomes a hash table, so a tail longer than the first value holds goes on elsewhere (see
-- REC_PIECE: a third of documentation links with their referrer). Cash, share and queue
-- change in the first value only. The queues hold only
-- pointers: a front queue the host's number and the seen key, a back queue the seen key. Cash
-- arriving for a URL still in the front queues pushes a pointer into the better queue it now
-- deserves; the older one is stale (its queue is no longer the record's) and skipped by the
-- refill.
--
-- A host's records are spread over hashes {crawl}:cr:<b>:<host> (b = 0 .. cb - 1, the host
-- field 'cb', absent: 1) by linear hashing on the key's last 24 bits (a piece's field has the
-- same): one bucket more, split from one (in turn, 0 first), each time the host's queued URLs
-- reach CASH_LOAD x (buckets + 1). A bucket not split yet in a round holds twice a split one's
-- share, ~2 x CASH_LOAD records at most (with their tails' rest: < 100 fields), so each stays
-- a listpack under Redis's stock hash-max-listpack-entries (128), where one hash per host
-- became a hash table past 128 records (~101 B a record). A host with nothing queued starts
-- again from one bucket.
local ROUTED = 255
local CASH_LOAD = 24
local REC_VALUE, REC_HEAD = 64, 14  -- a listpack's largest value; struct '<dfBB'
local function cash_bits(key)
  local a, b, c = string.byte(key, 6, 8)
  return (a * 256 + b) * 256 + c
end
-- the level of linear hashing over n buckets: 2^(e-1) <= n < 2^e
local function cash_level(n)
  local _, e = math.frexp(n)
  return 2 ^ (e - 1)
end
local function bucket_key(b, name) return @CASH@ .. string.format('%d:', b) .. name end
-- the key of the bucket holding ``key``'s record (the host's bucket count and key names are
-- kept in h._ck for the call)
local function ckey(name, h, key)
  local ck = h._ck
  if not ck then
    local n = math.max(num(h.cb), 1)
    ck = {n = n, low = cash_level(n)}
    h._ck = ck
  end
  local b = 0
  if ck.n > 1 then
    local x = cash_bits(key)
    b = x % (2 * ck.low)
    if b >= ck.n then b = x % ck.low end
  end
  local k = ck[b]
  if not k then
    k = bucket_key(b, name)
    ck[b] = k
  end
  return k
end
-- one bucket more for ``name``: the records of the bucket it splits from whose bits now say
-- the new one move there (linear hashing: the buckets split in turn, 0 first)
local function cash_split(name, h)
  local n = math.max(num(h.cb), 1)
  local low = cash_level(n)
  local from = bucket_key(n - low, name)
  local flat = redis.call('HGETALL', from)
  local moved, gone = {}, {}
  for i = 1, #flat, 2 do
    if cash_bits(flat[i]) % (2 * low) == n then
      moved[#moved + 1] = flat[i]
      moved[#moved + 1] = flat[i + 1]
      gone[#gone + 1] = flat[i]
    end
  end
  if #gone > 0 then
    redis.call('HSET', bucket_key(n, name), unpack(moved))
    redis.call('HDEL', from, unpack(gone))
  end
  h.cb, h._ck = tostring(n + 1), nil
  redis.call('HSET', hkey(name), 'cb', h.cb)
end
-- Where a record's tail goes on past its first value (the header's last byte): nowhere
-- (REC_WHOLE), in one more field of its bucket, <seen key>\1 (REC_PIECE), or, longer than that
-- holds too (a URL of some hundred characters), whole in the host's hash of long tails
-- {crawl}:cr:x:<host> (REC_LONG: few records, which would fill a bucket's 128 entries in pieces)
local REC_WHOLE, REC_PIECE, REC_LONG = 0, 1, 2
local function long_key(name) return @CASH@ .. 'x:' .. name end
-- cash, largest share, queue and where the tail goes on, of a record's first value
local function rec_head(v)
  return struct.unpack('<dfBB', v)
end
-- the first value with new cash, largest share and queue, the rest as it was
local function rec_repack(v, cash, best, q)
  local at = string.byte(v, REC_HEAD)
  return struct.pack('<dfBB', cash, best, q, at) .. string.sub(v, REC_HEAD + 1)
end
-- a record's policy and entry (the rest of its tail read if it goes on)
local function rec_tail(name, ck, key, v)
  local tail = string.sub(v, REC_HEAD + 1)
  local at = string.byte(v, REC_HEAD)
  if at == REC_PIECE then
    tail = tail .. redis.call('HGET', ck, key .. '\1')
  elseif at == REC_LONG then
    tail = redis.call('HGET', long_key(name), key)
  end
  local plen = string.byte(tail, 1)
  return string.sub(tail, 2, plen + 1), string.sub(tail, plen + 2)
end
-- is the record's policy ``policy``? (read from its first value, where it nearly always is)
local function rec_policy_is(name, ck, key, v, policy)
  if string.byte(v, REC_HEAD) ~= REC_LONG then
    local plen = string.byte(v, REC_HEAD + 1)
    if REC_HEAD + 1 + plen <= #v then
      return plen == #policy and string.sub(v, REC_HEAD + 2, REC_HEAD + 1 + plen) == policy
    end
  end
  return (rec_tail(name, ck, key, v)) == policy
end
-- the rest of a record's tail goes (``at``: where it went on)
local function rec_drop_rest(name, ck, key, at)
  if at == REC_PIECE then
    redis.call('HDEL', ck, key .. '\1')
  elseif at == REC_LONG then
    redis.call('HDEL', long_key(name), key)
  end
end
-- write a record (``old``: where its tail went on before, if it was there); with ``nx``, only
-- if there is none (false if there was)
local function rec_write(name, ck, key, cash, best, q, policy, blob, old, nx)
  if #policy > 255 then policy = string.sub(policy, 1, 255) end
  local tail = string.char(#policy) .. policy .. blob
  local room = REC_VALUE - REC_HEAD
  local at = REC_WHOLE
  if #tail > room + REC_VALUE then
    at = REC_LONG
  elseif #tail > room then
    at = REC_PIECE
  end
  local v = struct.pack('<dfBB', cash, best, q, at)
  if at ~= REC_LONG then v = v .. string.sub(tail, 1, room) end
  if nx then
    if redis.call('HSETNX', ck, key, v) == 0 then return false end
  else
    redis.call('HSET', ck, key, v)
  end
  if old and old ~= at then rec_drop_rest(name, ck, key, old) end
  if at == REC_PIECE then
    redis.call('HSET', ck, key .. '\1', string.sub(tail, room + 1))
  elseif at == REC_LONG then
    redis.call('HSET', long_key(name), key, tail)
  end
  return true
end
-- a URL leaves its host's records (leased): its cash, policy and entry, or nil
local function rec_take(name, h, key)
  local ck = ckey(name, h, key)
  local v = redis.call('HGET', ck, key)
  local cash, policy, blob
  if v then
    cash = rec_head(v)
    policy, blob = rec_tail(name, ck, key, v)
    redis.call('HDEL', ck, key)
    rec_drop_rest(name, ck, key, string.byte(v, REC_HEAD))
  end
  if h.cb and num(h.hq) <= 1 then  -- nothing else queued: the host starts from one bucket
    redis.call('HDEL', hkey(name), 'cb')
    h.cb, h._ck = nil, nil
  end
  return cash, policy, blob
end

-- The crawl's cash counters in the stats (cash: of the queued URLs, cn: queued URLs holding
-- some, cs seeded, cc credited, ct arrived for URLs no longer queued, cx spent: handed out or
-- dropped): read once per call, written back in one HSET, at once unless CASH_DEFER (the add
-- script, which writes them once at its end with cash_flush)
local CT, CASH_DEFER, CASH_DIRTY = nil, false, false
local CASH_AT = {cs = 3, cc = 4, ct = 5, cx = 6}
local function cash_state()
  if CT == nil then
    local v = redis.call('HMGET', STATS, 'cash', 'cn', 'cs', 'cc', 'ct', 'cx')
    CT = {}
    for i = 1, 6 do CT[i] = tonumber(v[i]) or 0 end
  end
  return CT
end
local function cash_flush()
  if not CASH_DIRTY then return end
  local c = CT
  redis.call('HSET', STATS, 'cash', fmt(c[1]), 'cn', c[2], 'cs', fmt(c[3]), 'cc', fmt(c[4]),
    'ct', fmt(c[5]), 'cx', fmt(c[6]))
  CASH_DIRTY = false
end
-- cash d moves into (or out of, d < 0) the queued URLs, n records with it; what it was is
-- counted in ``field`` (amount ``counted``)
local function cash_move(d, n, field, counted)
  local c = cash_state()
  c[1] = c[1] + d
  if c[1] < 0 then c[1] = 0 end  -- rounding
  c[2] = c[2] + n
  if field then
    local i = CASH_AT[field]
    c[i] = c[i] + counted
  end
  CASH_DIRTY = true
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
  local sizes, cur = selector_load()
  if not sizes then return end
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
    local best = selector_pick(sizes, cur, above and floor or -1)
    if best < 0 then break end
    local el = redis.call('LPOP', fkey(best))
    sizes[best] = sizes[best] - 1
    local id, key = string.sub(el, 1, -9), string.sub(el, -8)
    local name, h = host_by_id(id, names, hosts)
    if name and not h.st then
      local fp = h._fp or 0  -- its pointers taken from the front queues, written below
      if num(h.fr) > fp then h._fp = fp + 1 end
      local ck = ckey(name, h, key)
      local v = redis.call('HGET', ck, key)
      if v then
        local cash, top, q = rec_head(v)
        if q == best then  -- its live pointer
          budget = budget - 1
          redis.call('HSET', ck, key, rec_repack(v, cash, top, ROUTED))
          used = to_back(name, h, key, used)
        end
      end
    end
  end
  for name, h in pairs(hosts) do
    if h._fp then incr(name, h, 'fr', -h._fp) end
  end
  selector_save(cur, used)
end

"""

OPIC_LINKS_LUA = r"""
-- OPIC: a URL in front queue ``q`` (or ROUTED) now holding cash ``c``: the queue it is in
-- from now on, a pointer pushed into a better one it deserves (the older pointer is stale)
local function raise(name, h, key, c, q)
  if q == ROUTED then return q end
  local better = bucket(c)
  if better >= q then return q end
  redis.call('RPUSH', fkey(better), host_id(name, h) .. key)
  h._fr = h._fr + 1
  return better
end

-- OPIC, a URL of the add script: a new URL's record and its pointer in the front queue its
-- cash deserves. A URL forced in again (a retry, a seed given again) while still queued keeps
-- one record: the cash added, the newest entry and policy kept, raised if it deserves a better
-- queue now. True when a URL was queued anew. (h._fr: pointers pushed, h._hq: URLs queued,
-- written by the caller; ``force``: the URL may be queued already, else it is new to the
-- seen-set and has no record)
local function admit_cash(name, h, key, blob, cash, policy, force)
  if num(h.hq) + h._hq >= CASH_LOAD * (math.max(num(h.cb), 1) + 1) then cash_split(name, h) end
  local ck = ckey(name, h, key)
  local v = nil
  if force then
    v = redis.call('HGET', ck, key)
  else
    cash_move(cash, 1, 'cs', cash)
    local q = bucket(cash)
    if rec_write(name, ck, key, cash, cash, q, policy, blob, nil, true) then
      redis.call('RPUSH', fkey(q), host_id(name, h) .. key)
      h._fr = h._fr + 1
      return true
    end
    cash_move(-cash, -1, 'cs', -cash)  -- a record already: only if keys were edited by hand
    v = redis.call('HGET', ck, key)
  end
  if v then
    local c, top, q, n = rec_head(v)
    cash_move(cash, 0, 'cs', cash)
    c = c + cash
    if cash > top then top = cash end
    q = raise(name, h, key, c, q)
    rec_write(name, ck, key, c, top, q, policy, blob, n)
    return false
  end
  cash_move(cash, 1, 'cs', cash)
  local q = bucket(cash)
  rec_write(name, ck, key, cash, cash, q, policy, blob)
  redis.call('RPUSH', fkey(q), host_id(name, h) .. key)
  h._fr = h._fr + 1
  return true
end

-- OPIC: cash for a URL seen before (CashLedger.credit): a queued URL gathers it and, still in
-- the front queues, moves to the better queue it now deserves; it takes the crawl policy of
-- the link that brought it the largest share (a tie: the first). Cash for a URL no longer
-- queued is its history ('ct'). ``cash``: the sum of the links' shares (the worker sums a
-- batch's links to one URL, cash.credit_items), ``share`` the largest of them.
local function credit_cash(name, h, key, cash, policy, share)
  local ck = ckey(name, h, key)
  local v = redis.call('HGET', ck, key)
  if not v then
    cash_move(0, 0, 'ct', cash)
    return
  end
  local c, top, q, n = rec_head(v)
  cash_move(cash, 0, 'cc', cash)
  c = c + cash
  local blob = nil  -- the record's entry, written again only if its policy changes
  if share > top * (1 + 1e-6) then  -- (top is a float: a tie stays a tie)
    top = share
    if not rec_policy_is(name, ck, key, v, policy) then
      local _, b = rec_tail(name, ck, key, v)
      blob = b
    end
  end
  q = raise(name, h, key, c, q)
  if blob then
    rec_write(name, ck, key, c, top, q, policy, blob, n)
  else
    redis.call('HSET', ck, key, rec_repack(v, c, top, q))
  end
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
  local id, n = host_id(name, h), 0
  for _, key in ipairs(keys) do
    local ck = ckey(name, h, key)
    local v = redis.call('HGET', ck, key)
    if v then
      local c, top = rec_head(v)
      local q = bucket(c)
      redis.call('HSET', ck, key, rec_repack(v, c, top, q))
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
  local run = 0
  if num(redis.call('HGET', STATS, 'used')) >= B then  -- (else no front queue waits for one)
    for p = 0, bucket(cash) - 1 do  -- a better front queue than its own holds URLs
      if redis.call('LLEN', fkey(p)) > 0 then
        run = num(h.lr) + 1
        break
      end
    end
  end
  if run >= BACK_RUN then
    bounce(name, h)
  elseif run ~= num(h.lr) then
    set(name, h, 'lr', run)
  end
end

"""
