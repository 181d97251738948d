"""Lua source of the shared near-duplicate detector's scripts on the crawl's own tag
(``neardup``): ``READ``, what a worker needs to decide on a page (and which of its originals'
postings are written now); ``PICK``, the first live candidates and the records the worker lacks;
``COMMIT``, the decision recorded if nothing it depended on changed since, else ``retry``. The
anchor postings, on tags of their own, are ``neardup_anchors``'s.

Calling convention: ``KEYS[1]`` is the detector's versions hash (``{crawl}:nd:v``); every other
key is built on its tag with the names :class:`crawler.backends.redis.keys.NeardupKeys` gives
(:data:`SCRIPT_KEYS`, a :class:`~crawler.backends.redis.keys.ScriptKeys`); ``ARGV[1]`` and
``ARGV[2]`` are the bits of the URL and fingerprint bucket numbers; then each script's own
arguments.
"""

from __future__ import annotations

from crawler.backends.redis.keys import CrawlKeys, ScriptKeys
from crawler.backends.redis.neardup_anchors import WRITE

# The keys both scripts touch, as NeardupKeys names them: each call is given the versions hash
# (KEYS[1]) and builds the others on its tag where a script writes @NAME@ (the bucketed and
# per-host ones are prefixes a bucket, a piece or a host id is appended to).
SCRIPT_KEYS = ScriptKeys(
    CrawlKeys("crawl").neardup(),
    "versions",
    inline_keys=(
        ("TP", "template_meta"),
        ("V", "versions"),
        ("HIDS", "host_ids"),
        ("HNAMES", "host_names"),
        ("HNEXT", "last_host_id"),
        ("HC", "host_counts"),
        ("NEXT", "last_id"),
        ("U", "urls_prefix"),
        ("F", "fingerprints_prefix"),
        ("PEND", "pending"),
        ("RECENT", "recent"),
        ("O", "slots_prefix"),
        ("R", "heap_prefix"),
        ("T", "template_prefix"),
        ("TS", "snapshot_prefix"),
        ("TL", "lessons_prefix"),
        ("PROBE", "probe"),
    ),
)
# A heap string of 16,378 bytes is one 16 KiB allocation (with its 5-byte header and the
# terminating zero); a record table string of 508 entries of 8 bytes, one 4 KiB allocation.
CHUNK = 16_378
SLOTS = 508
# Originals kept in :recent for COMMIT's check (a check spanning more commits than this retries)
RECENT = 4096

_COMMON = r"""
@HEAD@
redis.call('EXISTS', @PROBE@)  -- a slot being moved refuses the script here, before any write
local UB, FB = tonumber(ARGV[1]), tonumber(ARGV[2])
local HOSTS = 2 ^ 26  -- :hc packs a host's pages and duplicates as pages * HOSTS + duplicates
local SHIFT = 2 ^ 24  -- :tp packs a host's pages learned * SHIFT + its template length
local CHUNK, SLOTS = @CHUNK@, @SLOTS@
local function bucket(s, bits)  -- the top `bits` bits of a binary string's first 4 bytes
  local v = struct.unpack('>I4', s)
  return math.floor(v / 2 ^ (32 - bits))
end
local function field(s, bits)  -- its field in that bucket: without the whole bytes the bucket
  return string.sub(s, math.floor(bits / 8) + 1)  -- number gives (lossless)
end
local metas = {}
local function meta(hid)  -- a host's (pages learned, template length), as at the script's start
  if hid == 0 then return 0, 0 end
  local m = metas[hid]
  if not m then
    m = tonumber(redis.call('HGET', @TP@, hid) or 0)
    metas[hid] = m
  end
  return math.floor(m / SHIFT), m % SHIFT
end
local function tlens_of(hids)  -- the template lengths of several hosts: one HMGET
  local ask = {}
  for _, h in ipairs(hids) do
    if not metas[h] and h > 0 then ask[#ask + 1] = h end
  end
  if #ask > 0 then
    local got = redis.call('HMGET', @TP@, unpack(ask))
    for i, h in ipairs(ask) do metas[h] = tonumber(got[i] or 0) end
  end
  local out = {}
  for i, h in ipairs(hids) do
    local _, n = meta(h)
    out[i] = n
  end
  return out
end
local function versions()  -- commits and originals replaced, so far
  local v = redis.call('HMGET', @V@, 'seq', 'forget')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
end
local function span(prefix, off, len)  -- bytes [off, off + len) of a string kept in CHUNK-byte
  local parts = {}                     -- pieces (the heap, the index log)
  while len > 0 do
    local at = off % CHUNK
    local n = math.min(len, CHUNK - at)
    parts[#parts + 1] = redis.call('GETRANGE', prefix .. math.floor(off / CHUNK), at, at + n - 1)
    off, len = off + n, len - n
  end
  return table.concat(parts)
end
local function slot(id)  -- the record table's string and the byte of id's entry in it
  return @O@ .. math.floor(id / SLOTS), (id % SLOTS) * 8
end
local function record(id)  -- the record of original `id`, or nil
  local key, at = slot(id)
  local e = redis.call('GETRANGE', key, at, at + 7)
  if #e < 8 then return nil end
  local hi, lo, len = struct.unpack('>I1I4I3', e)
  if len == 0 then return nil end
  return span(@R@, hi * 4294967296 + lo, len)
end
"""

READ = _COMMON + r"""
local uh, fp, host, hid = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local known, learned, done = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
-- the store keys whose postings this worker has written since: no longer pending
if #done > 0 then
  local ks = {}
  for i = 1, #done, 4 do ks[#ks + 1] = struct.unpack('>I4', done, i) end
  redis.call('HDEL', @PEND@, unpack(ks))
end
-- on a single server ARGV[10] says how many arguments after it are the postings this worker
-- queued (each original's MAXP, element, number of pairs, then its (bucket key, field)
-- pairs): written here as neardup_anchors' PUT writes them, the original taken off :pend
@WRITE@
local argi, writes_end = 11, 10 + tonumber(ARGV[10] or 0)
while argi <= writes_end do
  local pairs_end = argi + 2 + 2 * tonumber(ARGV[argi + 2])
  local mine = put_postings(tonumber(ARGV[argi]), ARGV[argi + 1], argi + 3, pairs_end)
  redis.call('HDEL', @PEND@, mine)
  argi = pairs_end + 1
end
if hid == 0 then hid = tonumber(redis.call('HGET', @HIDS@, host) or 0) end
local pages, tlen = meta(hid)
if tlen ~= known then  -- the worker's copy of the host's template is behind: send the rest
  local from = known
  if known > tlen then from = 0 end
  local rest = ''
  if hid > 0 and tlen > from then rest = redis.call('GETRANGE', @T@ .. hid, from * 4, -1) end
  return {'stale', hid, from, rest}
end
local seq, forget = versions()
-- the host's model: what the worker's copy (`learned` pages) lacks: the log entries after its
-- version, or the snapshot and the whole log (`base`: the version they follow)
local base, snap, log = 0, '', {}
if hid > 0 and pages ~= learned then
  local sk, lk = @TS@ .. hid, @TL@ .. hid
  local head, sv = redis.call('GETRANGE', sk, 0, 3), 0
  if #head == 4 then sv = struct.unpack('>I4', head) end
  if learned >= sv and learned < pages then
    base = learned
    log = redis.call('LRANGE', lk, learned - sv, -1)
  else
    base = sv
    if sv > 0 then snap = redis.call('GET', sk) end
    log = redis.call('LRANGE', lk, 0, -1)
  end
end
local own = tonumber(redis.call('HGET', @U@ .. bucket(uh, UB), field(uh, UB)) or 0)
local owner, orec = 0, ''
if fp ~= '' then
  owner = tonumber(redis.call('HGET', @F@ .. bucket(fp, FB), field(fp, FB)) or 0)
  if owner > 0 then orec = record(owner) or '' end
end
local next_id = tonumber(redis.call('GET', @NEXT@) or 0)
local pending, postings = {}, {}
if owner == 0 then
  pending = redis.call('HVALS', @PEND@)
  -- on a single server, after the writes: the page's anchors' places (bucket key, field), read
  -- here as neardup_anchors' GET reads them (a call less a page; on a cluster GET does, per tag)
  for i = argi, #ARGV, 2 do
    local v = redis.call('HGET', ARGV[i], ARGV[i + 1]) or ''
    if v == 'L' then v = redis.call('GET', long_key(ARGV[i], ARGV[i + 1])) or '' end
    postings[#postings + 1] = v
  end
end
return {'ok', hid, own, seq, forget, next_id, pending, owner, orec,
        {pages, base, snap, log}, postings}
"""

PICK = _COMMON + r"""
-- ARGV[3]: the candidates, best first, each its id (4 bytes), the record table entry (8) of the
-- record the worker decoded (zeros: none) and that record's host id (4); ARGV[4]: how many.
-- The first live ones: each its id, its entry, its record if the worker's is not it; and the
-- template lengths of their hosts.
local cands, LIMIT = ARGV[3], tonumber(ARGV[4])
local out, hids = {}, {}
for i = 1, #cands, 16 do
  if #out >= LIMIT then break end
  local id = struct.unpack('>I4', cands, i)
  local key, at = slot(id)
  local e = redis.call('GETRANGE', key, at, at + 7)
  if #e == 8 then
    local hi, lo, len = struct.unpack('>I1I4I3', e)
    if len > 0 then
      local rec, h = '', 0
      if e == string.sub(cands, i + 4, i + 11) then
        h = struct.unpack('>I4', cands, i + 12)
      else
        rec = span(@R@, hi * 4294967296 + lo, len)
        h = struct.unpack('>I4', rec, 9)
      end
      out[#out + 1] = {id, e, rec}
      hids[#hids + 1] = h
    end
  end
end
local tls = {}
for i, n in ipairs(tlens_of(hids)) do tls[i] = struct.pack('>I4I4', hids[i], n) end
return {out, table.concat(tls)}
"""

COMMIT = _COMMON + r"""
local action, uh, url, host, fp = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local own_seen, owner_seen = tonumber(ARGV[8]), tonumber(ARGV[9])
local forget_seen, next_seen = tonumber(ARGV[10]), tonumber(ARGV[11])
local anchors, lens, checks = ARGV[12], ARGV[13], ARGV[14]
local tlen_seen, payload, MAXP = tonumber(ARGV[15]), ARGV[16], tonumber(ARGV[17])
local learned, entry, made, snapshot = tonumber(ARGV[18]), ARGV[19], ARGV[20], ARGV[21]
local hid, seq_seen = tonumber(ARGV[22]), tonumber(ARGV[23])
local UKEY, UF = @U@ .. bucket(uh, UB), field(uh, UB)
local RECENT = @RECENT_MAX@

-- Everything the decision (and the worker's learning) read must be as it was: certainly so if
-- nothing was committed since (the usual case), else each of it is compared.
local seq, forget = versions()
if seq ~= seq_seen then
  if hid == 0 then hid = tonumber(redis.call('HGET', @HIDS@, host) or 0) end
  local pages, tlen = meta(hid)
  if tlen ~= tlen_seen then return {'retry'} end
  if learned >= 0 and pages ~= learned then return {'retry'} end  -- the worker's model
  if action ~= 'observe' then
    if tonumber(redis.call('HGET', UKEY, UF) or 0) ~= own_seen then return {'retry'} end
    if forget ~= forget_seen then return {'retry'} end  -- a candidate may have gone
    if fp ~= '' then
      local owner = tonumber(redis.call('HGET', @F@ .. bucket(fp, FB), field(fp, FB)) or 0)
      if owner ~= owner_seen then return {'retry'} end
    end
    local hids, seen = {}, {}
    for i = 1, #checks, 8 do
      hids[#hids + 1], seen[#seen + 1] = struct.unpack('>I4I4', checks, i)
    end
    for i, n in ipairs(tlens_of(hids)) do
      if n ~= seen[i] then return {'retry'} end
    end
    if #lens > 0 then
      -- originals stored since the worker read: did one take a posting of an anchor of this
      -- page (one with fewer than MAXP postings, whose list it would change)?
      if tonumber(redis.call('HGET', @V@, 'floor') or 0) > next_seen then return {'retry'} end
      local mine, any = {}, false
      for i = 1, #lens do
        if string.byte(lens, i) < MAXP then
          mine[string.sub(anchors, 4 * i - 3, 4 * i)] = true
          any = true
        end
      end
      local from, more = 0, any
      while more do
        local got = redis.call('LRANGE', @RECENT@, from, from + 31)
        more = #got == 32
        for _, e in ipairs(got) do
          if struct.unpack('>I4', e) <= next_seen then more = false break end
          for j = 5, #e, 4 do
            if mine[string.sub(e, j, j + 3)] then return {'retry'} end
          end
        end
        from = from + 32
      end
    end
  end
end

local function host_id()
  if hid == 0 then
    hid = redis.call('INCR', @HNEXT@)
    redis.call('HSET', @HIDS@, host, hid)
    redis.call('HSET', @HNAMES@, hid, host)
  end
  return hid
end

local function append(prefix, field, data)  -- at the end of a string kept in CHUNK-byte pieces,
  local off = redis.call('HINCRBY', @V@, field, #data) - #data  -- each allocated whole
  local o, pos = off, 1
  while pos <= #data do
    local key, at = prefix .. math.floor(o / CHUNK), o % CHUNK
    local n = math.min(#data - pos + 1, CHUNK - at)
    if at == 0 then redis.call('SETRANGE', key, CHUNK - 1, '\0') end
    redis.call('SETRANGE', key, at, string.sub(data, pos, pos + n - 1))
    o, pos = o + n, pos + n
  end
  return off
end

local function new_slot(id)  -- the record table's next string: allocated whole
  if id % SLOTS == 0 or id == 1 then
    redis.call('SETRANGE', @O@ .. math.floor(id / SLOTS), 8 * SLOTS - 1, '\0')
  end
end

local function teach(h)  -- what the worker learned into its copy of the host's model
  if snapshot ~= '' then  -- a pruning: the snapshot replaces the log so far
    redis.call('SET', @TS@ .. h, snapshot)
    redis.call('DEL', @TL@ .. h)
  else
    redis.call('RPUSH', @TL@ .. h, entry)
  end
  redis.call('HINCRBY', @TP@, h, SHIFT + #made / 4)
  if made ~= '' then redis.call('APPEND', @T@ .. h, made) end
end

local function counts(dup, k, elem)
  local v = redis.call('HINCRBY', @HC@, host, HOSTS + (dup and 1 or 0))
  return {'ok', math.floor(v / HOSTS), v % HOSTS, redis.call('HINCRBY', @V@, 'seq', 1), hid,
          k or 0, elem or ''}
end

if action == 'observe' then
  teach(host_id())
  return {'ok', 0, 0, redis.call('HINCRBY', @V@, 'seq', 1), hid, 0, ''}
end
if action == 'unchanged' then return counts(false) end
local id = own_seen
if id == 0 then
  id = redis.call('INCR', @NEXT@)
  redis.call('HSET', UKEY, UF, id)
  new_slot(id)
else
  local rec = record(id)
  if rec then  -- a refetched original: what it said before goes
    local old = string.sub(rec, 1, 8)
    local okey, ofield = @F@ .. bucket(old, FB), field(old, FB)
    if tonumber(redis.call('HGET', okey, ofield) or 0) == id then
      redis.call('HDEL', okey, ofield)
    end
    local key, at = slot(id)
    redis.call('SETRANGE', key, at, string.rep('\0', 8))
    redis.call('HINCRBY', @V@, 'forget', 1)
  end
end
if action == 'new' then
  local h = host_id()
  local data = fp .. struct.pack('>I4', h) .. url .. payload
  local off = append(@R@, 'heap', data)
  local hi, lo = math.floor(off / 4294967296), off % 4294967296
  local key, at = slot(id)
  redis.call('SETRANGE', key, at, struct.pack('>I1I4I3', hi, lo, #data))
  redis.call('HSET', @F@ .. bucket(fp, FB), field(fp, FB), id)
  -- its postings: under its id, or (stored again under an id it had) a fresh store key
  local k, elem = id, struct.pack('>I4', id)
  if own_seen ~= 0 then
    k = redis.call('INCR', @NEXT@)
    new_slot(k)
    elem = struct.pack('>I4I4', k + 2147483648, id)
  end
  if #anchors > 0 then
    redis.call('HSET', @PEND@, k, elem .. anchors)
    if redis.call('LPUSH', @RECENT@, struct.pack('>I4', k) .. anchors) > RECENT then
      redis.call('HSET', @V@, 'floor', (struct.unpack('>I4', redis.call('RPOP', @RECENT@))))
    end
  end
  teach(h)
  return counts(false, k, elem)
elseif action == 'near' and learned >= 0 then
  teach(host_id())
end
return counts(action == 'exact' or action == 'near')
"""


def _script(source: str) -> str:
    source = source.replace("@CHUNK@", str(CHUNK)).replace("@SLOTS@", str(SLOTS))
    source = source.replace("@RECENT_MAX@", str(RECENT))
    source = source.replace("@WRITE@\n", WRITE)
    return SCRIPT_KEYS.render(source.replace("@HEAD@\n", SCRIPT_KEYS.head()))


SCRIPTS = {"read": _script(READ), "pick": _script(PICK), "commit": _script(COMMIT)}
