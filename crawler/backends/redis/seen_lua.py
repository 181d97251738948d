"""Lua source of the Redis frontier's seen-test, included in every script's prelude
(``frontier_lua_prelude``); the layout and the choices are explained in
:mod:`crawler.backends.redis.seen`, whose Python mirrors these functions.

Defines ``seen_add(key, known)`` (1 when the URL is new; ``known``: a URL the caller queues
anyway, a start URL or a retry, whose refusal is not counted), ``seen_flush()`` (writes the
counts ``seen_add`` kept: a script that calls ``seen_add`` must call it before it returns),
``seen_has(key)`` (the test alone, nothing written) and ``seen_count()``. Needs the prelude's
``CFG``, ``STATS``, ``SEEN`` and ``num``; the keys written ``@NAME@`` are the prelude's inline
keys.

``CFG[15]``, ``CFG[16]``: a fixed Bloom filter's bits and probes (``FRONTIER_SEEN_BLOOM_CAPACITY``;
0, 0: none). ``CFG[17]``: ``{exact limit (-1: none), error bound, bucket bits, first layer's
capacity, growth, tightening}`` of the exact set and the scalable Bloom filter after it.
"""

from __future__ import annotations

SEEN_LUA = r"""
local BLOOM_M, BLOOM_K = CFG[15] or 0, CFG[16] or 0
local SEEN_CFG = CFG[17] or {-1, 0.01, 20, 1024, 2, 0.8}
local X_LIMIT, S_ERROR, X_BITS = SEEN_CFG[1], SEEN_CFG[2], SEEN_CFG[3]
local L_FIRST, L_GROWTH, L_TIGHT = SEEN_CFG[4], SEEN_CFG[5], SEEN_CFG[6]
local LN2 = math.log(2)
local X_DIV = 2 ^ (32 - X_BITS)

-- a URL refused on a Bloom filter's word: a few of them (the false positives) were new
local function probable(known)
  if not known then redis.call('HINCRBY', STATS, 'drop:seen_probable', 1) end
end

-- The probes of an 8-byte key in a bitmap of `bits`, set with one BITFIELD (or only read:
-- `get`, GETBIT by GETBIT); 1 if one of them was 0. Double hashing of the key's two halves;
-- `enhanced` adds (i^3 - i)/6 (Dillinger & Manolios 2004) so the probes never cycle through a
-- few bits when h2 shares a factor with the size (the fixed filter keeps the plain form it was
-- built with). Blocked layouts (all of a key's probes in one block read with GETRANGE, tested
-- with the bit library, written with SETRANGE or SETBIT) were measured: no cheaper per layer
-- than these (BENCHMARKS.md, the seen-set's "After (session 10)").
-- Every offset is a decimal string made here with '%d' (a number handed to redis.call is
-- formatted with '%.17g', and a number joined to a string with '%.14g': both cost more), the
-- next from the last (no power per probe), the key's halves read once per URL, the BITFIELD
-- arguments in one table reused by every call (grown once, not per key): the glue around the
-- commands cost as much as the commands (callgrind, bench/seen_scale.py).
local fmt = string.format
local OPS = {}
local function bloom_probe(name, bits, probes, h1, h2, get, enhanced)
  -- o_i = h1 + i h2 (+ (i^3 - i)/6), mod bits: o_(i+1) = o_i + h2 (+ i (i + 1) / 2)
  local o, step = h1 % bits, h2 % bits
  if get then
    -- one GETBIT at a time, stopping at the first 0: a layer that does not hold the key is
    -- told after ~2 of them (a full layer has half its bits set), and a GETBIT costs about
    -- what one probe of a BITFIELD does (bench/seen_scale.py --micro)
    for i = 0, probes - 1 do
      if redis.call('GETBIT', name, fmt('%d', o)) == 0 then return 1 end
      o = o + step
      if enhanced then o = o + i * (i + 1) / 2 end
      o = o % bits
    end
    return 0
  end
  local n = 0
  for i = 0, probes - 1 do
    OPS[n + 1] = 'SET'; OPS[n + 2] = 'u1'; OPS[n + 3] = fmt('%d', o); OPS[n + 4] = '1'
    n = n + 4
    o = o + step
    if enhanced then o = o + i * (i + 1) / 2 end
    o = o % bits
  end
  for _, old in ipairs(redis.call('BITFIELD', name, unpack(OPS, 1, n))) do
    if old == 0 then return 1 end
  end
  return 0
end

-- layer i of the scalable filter: {capacity, bits, probes, key, count field} (Almeida et al.
-- 2007: capacity grows by L_GROWTH, the error bound shrinks by L_TIGHT, so the errors sum under
-- S_ERROR; a layer is at most one Redis string of 2^32 bits)
local LAYERS = {}
local function layer(i)
  local l = LAYERS[i]
  if l == nil then
    local cap = L_FIRST * L_GROWTH ^ i
    local err = S_ERROR * (1 - L_TIGHT) * L_TIGHT ^ i
    local bits = math.ceil(-cap * math.log(err) / (LN2 * LN2))
    if bits > 4294967296 then
      bits = 4294967296
      cap = math.floor(bits * LN2 * LN2 / -math.log(err))
    end
    l = {cap, bits, math.max(1, math.floor(bits / cap * LN2 + 0.5)), @LAYER@ .. fmt('%d', i),
      'n' .. fmt('%d', i)}
    LAYERS[i] = l
  end
  return l
end

-- {x = exact members, l = layers begun (0: the exact set still takes URLs), n = per layer,
-- legacy = a SET kept by a crawl started before the buckets, d = the counts' increments not
-- written yet (field -> delta: seen_flush)}, read once per call
local SEEN_STATE = nil
local function seen_state()
  if SEEN_STATE == nil then
    local s = {x = 0, l = 0, n = {}, d = {}, legacy = redis.call('EXISTS', SEEN) == 1}
    local flat = redis.call('HGETALL', @SEENI@)
    for i = 1, #flat, 2 do
      local f, v = flat[i], tonumber(flat[i + 1])
      if f == 'x' then
        s.x = v
      elseif f == 'l' then
        s.l = v
      else
        s.n[tonumber(string.sub(f, 2))] = v
      end
    end
    SEEN_STATE = s
  end
  return SEEN_STATE
end

-- the exact set's bucket of a key (its first X_BITS bits) and member (its last 32 bits as a
-- signed integer, so a bucket is a compact intset), from the key's halves
local function exact_slot(h1, h2)
  if h2 >= 2147483648 then h2 = h2 - 4294967296 end
  return @SEENX@ .. fmt('%d', math.floor(h1 / X_DIV)), fmt('%d', h2)
end

local unpack_key = struct.unpack
local function seen_has(key)
  local h1, h2 = unpack_key('>I4I4', key)
  if BLOOM_M > 0 then return 1 - bloom_probe(@BLOOM@, BLOOM_M, BLOOM_K, h1, h2, true) end
  local s = seen_state()
  if s.legacy and redis.call('SISMEMBER', SEEN, key) == 1 then return 1 end
  if s.x > 0 then
    local bucket, member = exact_slot(h1, h2)
    if redis.call('SISMEMBER', bucket, member) == 1 then return 1 end
  end
  for i = 0, s.l - 1 do
    local l = layer(i)
    if bloom_probe(l[4], l[2], l[3], h1, h2, true, true) == 0 then return 1 end
  end
  return 0
end

local function seen_add(key, known)
  local h1, h2 = unpack_key('>I4I4', key)
  if BLOOM_M > 0 then
    if bloom_probe(@BLOOM@, BLOOM_M, BLOOM_K, h1, h2, false) == 1 then
      redis.call('INCR', @BLOOM_N@)
      return 1
    end
    probable(known)
    return 0
  end
  local s = seen_state()
  if s.legacy and redis.call('SISMEMBER', SEEN, key) == 1 then return 0 end
  local bucket, member = exact_slot(h1, h2)
  if s.l == 0 and (X_LIMIT < 0 or s.x < X_LIMIT) then
    if redis.call('SADD', bucket, member) == 0 then return 0 end
    s.x = s.x + 1
    s.d.x = (s.d.x or 0) + 1
    return 1
  end
  if s.l == 0 then  -- the limit reached: the exact set is kept, frozen, and layers begin
    s.l = 1
    redis.call('HSET', @SEENI@, 'l', 1)
  end
  if s.x > 0 and redis.call('SISMEMBER', bucket, member) == 1 then return 0 end
  for i = 0, s.l - 2 do  -- the full layers: read only
    local l = layer(i)
    if bloom_probe(l[4], l[2], l[3], h1, h2, true, true) == 0 then
      probable(known)
      return 0
    end
  end
  local live = s.l - 1
  local l = layer(live)
  if bloom_probe(l[4], l[2], l[3], h1, h2, false, true) == 0 then
    probable(known)
    return 0
  end
  local n = (s.n[live] or 0) + 1
  s.n[live] = n
  local field = l[5]
  s.d[field] = (s.d[field] or 0) + 1
  if n >= l[1] then  -- full: the next URL goes to a new, bigger, tighter layer
    s.l = s.l + 1
    redis.call('HSET', @SEENI@, 'l', s.l)
  end
  return 1
end

-- the counts seen_add kept in SEEN_STATE, written once per script call (one HINCRBY per
-- count changed, not one per URL): every script that calls seen_add ends with this
local function seen_flush()
  local s = SEEN_STATE
  if s == nil then return end
  for field, delta in pairs(s.d) do redis.call('HINCRBY', @SEENI@, field, delta) end
  s.d = {}
end

local function seen_count()
  if BLOOM_M > 0 then return num(redis.call('GET', @BLOOM_N@)) end
  local s = seen_state()
  local total = s.x
  for _, n in pairs(s.n) do total = total + n end
  if s.legacy then total = total + redis.call('SCARD', SEEN) end
  return total
end
"""

# mark keys seen outside ``add`` (RedisFrontier.mark_seen): ARGV[3..] are 8-byte keys
MARK_SEEN = r"""
local fresh = 0
for i = 3, #ARGV do fresh = fresh + seen_add(ARGV[i], true) end
seen_flush()
return fresh
"""

# the seen-test alone, nothing written (benchmarks sample the false-positive rate with it)
HAS_SEEN = r"""
local out = {}
for i = 3, #ARGV do out[#out + 1] = seen_has(ARGV[i]) end
return out
"""
