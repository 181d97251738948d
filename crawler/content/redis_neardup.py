"""Near-duplicates shared by every worker of a crawl: the in-process detector's decisions, its
state in Redis, check-and-insert atomic across workers.

:class:`RedisNearDuplicateDetector` decides with the very functions of
:mod:`crawler.content.neardup` (:func:`~crawler.content.neardup.compute_features`,
:func:`~crawler.content.neardup.rank_candidates`' rule, :func:`~crawler.content.neardup.pick_best`,
:func:`~crawler.content.neardup.decide`); only the state it reads and writes lives in Redis,
under the crawl's hash tag: the URL and fingerprint tables, the stored originals (sketch, the
block of each entry, cover, title, host), the anchor index, every host's template model (block
counts, template blocks, pages) and the per-host duplicate counts the frontier's penalty uses.

Each page is two round trips, optimistic like a compare-and-set:

1. ``READ`` (one Lua call, read only): the page's host template length (a worker keeps a copy
   of each host's template, which only grows, so a length is its version; if the copy is behind,
   the script returns what is missing and the worker computes the features again), the URL's
   id, the fingerprint's owner, the first :data:`~crawler.content.neardup.MAX_POSTING` postings
   of each anchor ranked as :func:`~crawler.content.neardup.rank_candidates` ranks them, and
   the :data:`~crawler.content.neardup.VERIFY` best candidates' records with their hosts'
   template lengths.
2. The worker decides in Python, then ``COMMIT`` (one Lua call) re-reads everything the decision
   depended on (URL id, fingerprint owner, each anchor's posting count up to the cap, the
   template lengths used, a counter bumped whenever a stored original is replaced) and records
   the page (id, original with its anchors, template learning, host counts) only if none of it
   changed; otherwise it answers ``retry`` and the worker starts again from 1.

So the decisions are those of the in-process detector run over the pages in the order their
commits happened, and two workers racing on one page index it once: the second commit finds the
fingerprint taken and retries into "exact duplicate". Template learning runs inside ``COMMIT``
(the rule of :class:`crawler.content.template.HostTemplates`, its constants passed in), so it
is atomic with the insert.

Layout (``{key}:nd:...``; the small hashes are bucketed so they stay in Redis's compact listpack
encoding):

========================  ==================================================================
``:u:<n>``                HASH: 8 bytes of blake2b(URL) -> id (originals and duplicates)
``:f:<n>``                HASH: 8 bytes of the content fingerprint -> id of its original
``:a:<n>``, ``:ax:<n>``    HASH: anchor (4 bytes) -> ids (4 bytes each) of its first originals
                          (16 in ``:a``, the rest up to 48 in ``:ax``: long values would turn a
                          whole bucket into a hashtable)
``:d:<id/128>``           HASH: id -> record of a live original (a candidate): 1, fingerprint
                          (8), host id (4), URL (length, bytes), then title, cover and the
                          sketch (gaps in the fewest bytes that hold them, a table of its blocks
                          and a 1-byte index per entry); duplicates and replaced originals have
                          none
``:h``/``:hnext``         HASH host -> host id, and the last id given
``:t:<hid>``              STRING: the host's template blocks (4 bytes each), in the order learned
``:c:<hid>:<n>``          HASH: block -> count (``-1``: seen once, stale at the last pruning; ``T``:
                          template), spread over 2^bits hashes that grow with the host so each
                          stays a listpack; ``:tp`` HASH: host id -> pages learned x 32 + bits;
                          ``:tn`` HASH: host id -> entries in its counts
``:hc``                   HASH: host -> pages checked x 2^26 + duplicates among them (the
                          frontier's penalty, shared)
``:v``                    HASH: ``forget`` (originals replaced so far), ``anchors`` (originals
                          indexed so far): what a commit compares to know nothing changed
``:next``/``:seq``        last id given, commits so far (the order decisions are equivalent to)
``:params``               the settings every worker must share
========================  ==================================================================

``bench/shared.py`` measures the decisions against the in-process detector, calls per second and
bytes per document.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import redis

from crawler import defaults
from crawler.content.neardup import (
    ANCHORS,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    MAX_POSTING,
    VERIFY,
    Candidate,
    Decision,
    Features,
    compute_features,
    decide,
    pick_best,
    title_hash,
)
from crawler.content.normalize import normalize_lines
from crawler.content.template import MAX_TEMPLATE, MIN_PAGES, MIN_SHARE, PRUNE_EVERY

__all__ = ["RedisNearDuplicateDetector", "decode_sketch", "encode_sketch"]

LAYOUT = 2
DEFAULT_CAPACITY = defaults.NEARDUP_SHARED_CAPACITY
HOST_TTL = 10.0  # seconds a worker trusts its copy of a host's duplicate counts
MAX_ATTEMPTS = 64  # commits refused in a row before giving up (each means another worker won)
_FILL = 256  # entries aimed at per listpack bucket (Redis converts one past 512)
_RECORDS_PER_KEY = 128

_COMMON = r"""
local P = ARGV[1]
local UB, FB, AB = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local INLINE = 16  -- anchor postings kept in the bucket (64 bytes: still listpack); more: :ax
local HOSTS = 2 ^ 26  -- :hc packs a host's pages and duplicates as pages * HOSTS + duplicates
local function bucket(s, bits)  -- the top `bits` bits of a binary string's first 4 bytes
  local v = struct.unpack('>I4', s)
  return math.floor(v / 2 ^ (32 - bits))
end
local function low(s, bits)  -- the low `bits` bits: anchors are a page's *smallest* hashes,
  return struct.unpack('>I4', s) % 2 ^ bits  -- so their top bits are mostly zero
end
local function dkey(id) return P .. ':d:' .. math.floor(id / 128) end
local tlens = {}
local function tlen_of(hid)  -- a host's template length, as it was when the script started
  if hid == 0 then return 0 end
  local n = tlens[hid]
  if not n then
    n = redis.call('STRLEN', P .. ':t:' .. hid) / 4
    tlens[hid] = n
  end
  return n
end
local function postings(a)  -- an anchor's postings (4 bytes each), and its bucket
  local b = low(a, AB)
  local ids = redis.call('HGET', P .. ':a:' .. b, a) or ''
  if #ids == 4 * INLINE then ids = ids .. (redis.call('HGET', P .. ':ax:' .. b, a) or '') end
  return ids, b
end
local function versions()  -- originals replaced so far, originals indexed so far
  local v = redis.call('HMGET', P .. ':v', 'forget', 'anchors')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
end
"""

READ = _COMMON + r"""
local uh, fp, host, known = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8])
local anchors, MAXP, VERIFY = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])
local hid = tonumber(redis.call('HGET', P .. ':h', host) or 0)
local tlen = tlen_of(hid)
if tlen ~= known then  -- the worker's copy of the host's template is behind: send the rest
  local from = known
  if known > tlen then from = 0 end
  local rest = ''
  if hid > 0 and tlen > from then rest = redis.call('GETRANGE', P .. ':t:' .. hid, from * 4, -1) end
  return {'stale', hid, from, rest}
end
local own = tonumber(redis.call('HGET', P .. ':u:' .. bucket(uh, UB), uh) or 0)
local forget, indexed = versions()
if fp == '' then return {'ok', hid, own, forget, indexed, 0, '', '', '', {}, {}} end
local owner = tonumber(redis.call('HGET', P .. ':f:' .. bucket(fp, FB), fp) or 0)
if owner > 0 then
  local rec = redis.call('HGET', dkey(owner), owner)
  local n = struct.unpack('>I2', rec, 14)
  return {'ok', hid, own, forget, indexed, owner, string.sub(rec, 16, 15 + n), '', '', {}, {}}
end
-- rank_candidates: one vote per posting, live originals (those with a record) but the page's
-- own id, most votes first, then the earliest; a record is read only when its turn comes
local lens, seen, votes = {}, {}, {}
for i = 1, #anchors, 4 do
  local ids = postings(string.sub(anchors, i, i + 3))
  local n = math.min(#ids / 4, MAXP)
  lens[#lens + 1] = string.char(n)
  if n > 0 then
    ids = string.sub(ids, 1, 4 * n)
    seen[#seen + 1] = ids
    local list = {struct.unpack('>' .. string.rep('I4', n), ids)}
    for j = 1, n do
      local d = list[j]
      votes[d] = (votes[d] or 0) + 1
    end
  end
end
votes[own] = nil
local groups, top = {}, 0
for d, v in pairs(votes) do
  local g = groups[v]
  if g then g[#g + 1] = d else groups[v] = {d} end
  if v > top then top = v end
end
local recs, tls = {}, {}
for v = top, 1, -1 do
  local g = groups[v]
  if g then
    table.sort(g)
    for _, d in ipairs(g) do
      local rec = redis.call('HGET', dkey(d), d)
      if rec then
        recs[#recs + 1] = struct.pack('>I4', d) .. rec
        tls[#tls + 1] = tlen_of(struct.unpack('>I4', rec, 10))
        if #recs == VERIFY then break end
      end
    end
    if #recs == VERIFY then break end
  end
end
return {'ok', hid, own, forget, indexed, 0, '', table.concat(lens), table.concat(seen), recs, tls}
"""

COMMIT = _COMMON + r"""
local action, uh, url, host, fp = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local own_seen, owner_seen = tonumber(ARGV[10]), tonumber(ARGV[11])
local forget_seen, indexed_seen = tonumber(ARGV[12]), tonumber(ARGV[13])
local anchors, lens, seen, checks = ARGV[14], ARGV[15], ARGV[16], ARGV[17]
local tlen_seen, payload, teach, blocks = tonumber(ARGV[18]), ARGV[19], ARGV[20] == '1', ARGV[21]
local MAXP, MINP, SHARE = tonumber(ARGV[22]), tonumber(ARGV[23]), tonumber(ARGV[24])
local EVERY, MAXT = tonumber(ARGV[25]), tonumber(ARGV[26])
local given_bits, groups = tonumber(ARGV[27]), ARGV[28]
local UKEY = P .. ':u:' .. bucket(uh, UB)
local hid = tonumber(redis.call('HGET', P .. ':h', host) or 0)

local current = {}  -- each anchor's postings as the decision saw them (checked below)
if action ~= 'observe' then  -- everything the decision read must be as it was
  if tlen_of(hid) ~= tlen_seen then return {'retry'} end
  if tonumber(redis.call('HGET', UKEY, uh) or 0) ~= own_seen then return {'retry'} end
  local forget, indexed = versions()
  if forget ~= forget_seen then return {'retry'} end
  if fp ~= '' then
    local owner = tonumber(redis.call('HGET', P .. ':f:' .. bucket(fp, FB), fp) or 0)
    if owner ~= owner_seen then return {'retry'} end
  end
  local pos = 1
  for i = 1, #anchors / 4 do
    local n = string.byte(lens, i)
    if indexed == indexed_seen then  -- no original indexed since: the postings are as read
      current[i] = string.sub(seen, pos, pos + 4 * n - 1)
      pos = pos + 4 * n
    else  -- another worker indexed originals meanwhile: did they touch these anchors?
      local ids = postings(string.sub(anchors, 4 * i - 3, 4 * i))
      if math.min(#ids / 4, MAXP) ~= n then return {'retry'} end
      current[i] = string.sub(ids, 1, 4 * n)
    end
  end
  for i = 1, #checks, 8 do
    local h, n = struct.unpack('>I4I4', checks, i)
    if tlen_of(h) ~= n then return {'retry'} end
  end
end

local function host_id()
  if hid == 0 then
    hid = redis.call('INCR', P .. ':hnext')
    redis.call('HSET', P .. ':h', host, hid)
  end
  return hid
end

local function hset_many(key, list)  -- field, value, ... in slices (unpack's limit); new fields
  local added = 0
  for i = 1, #list, 2000 do
    added = added + redis.call('HSET', key, unpack(list, i, math.min(i + 1999, #list)))
  end
  return added
end

-- A host's block counts are spread over 2^bits small hashes (by the block's low bits), so
-- each stays a listpack; :tp packs, per host, pages learned * 2^5 + bits; :tn counts the
-- host's entries. Values: n >= 2 a count, 'T' template, a negative number -(k + 1) a block
-- counted once before the k-th pruning. HostTemplates prunes every EVERY pages (a block seen
-- once at two prunings in a row goes); here that is read lazily: such a block counts as
-- absent once pruning k + 1 has passed, and a cleanup drops the expired entries (and spreads
-- the counts over more hashes if the host outgrew them) when the host's entries reach twice
-- FILL per hash, so each entry is rewritten O(1) times.
local FILL = 32  -- entries per count hash after a cleanup (a listpack lookup is linear)
local function count_key(h, bits, block)
  return P .. ':c:' .. h .. ':' .. low(block, bits)
end
local function expired(v, done)  -- a stored value read when `done` prunings have passed
  return v < 0 and -v - 1 < done
end

local function cleanup(h, bits, done)
  local entries = {}
  for b = 0, 2 ^ bits - 1 do
    local key = P .. ':c:' .. h .. ':' .. b
    local all = redis.call('HGETALL', key)
    for k = 1, #all, 2 do
      local v = all[k + 1]
      if v == 'T' or not expired(tonumber(v), done) then
        entries[#entries + 1] = all[k]; entries[#entries + 1] = v
      end
    end
    redis.call('DEL', key)
  end
  local kept = #entries / 2
  local wide = bits
  while kept > FILL * 2 ^ wide and wide < 16 do wide = wide + 1 end
  local spread = {}
  for k = 1, #entries, 2 do
    local key = count_key(h, wide, entries[k])
    local list = spread[key]
    if not list then list = {}; spread[key] = list end
    list[#list + 1] = entries[k]; list[#list + 1] = entries[k + 1]
  end
  for key, list in pairs(spread) do hset_many(key, list) end
  redis.call('HSET', P .. ':tn', h, kept)
  if wide ~= bits then redis.call('HINCRBY', P .. ':tp', h, wide - bits) end
  return wide
end

local function learn(h, given_bits, groups)
  -- HostTemplates.learn: one more original page of host h; `blocks` are its distinct blocks
  -- (those the worker knows to be template left out), grouped by hash for `given_bits`
  local packed = redis.call('HINCRBY', P .. ':tp', h, 32)
  local pages, bits = math.floor(packed / 32), packed % 32
  local need = math.max(MINP, math.floor(SHARE * pages))
  local done = math.floor((pages - 1) / EVERY)  -- prunings before this page's
  local once = -(math.ceil(pages / EVERY) + 1)  -- a block counted for the first time now
  local tk = P .. ':t:' .. h
  local tlen = redis.call('STRLEN', tk) / 4
  local plan = {}  -- {key, first block's offset, blocks}
  if bits == given_bits then
    local pos = 1
    for i = 1, #groups, 6 do
      local b, n = struct.unpack('>I4I2', groups, i)
      plan[#plan + 1] = {P .. ':c:' .. h .. ':' .. b, pos, n}
      pos = pos + 4 * n
    end
  else  -- the worker's idea of the host's hashes is out of date: group here
    local by_key, keys = {}, {}
    for j = 0, #blocks / 4 - 1 do
      local key = count_key(h, bits, string.sub(blocks, 4 * j + 1, 4 * j + 4))
      local list = by_key[key]
      if not list then list = {}; by_key[key] = list; keys[#keys + 1] = key end
      list[#list + 1] = j
    end
    table.sort(keys)
    local regrouped = {}
    for _, key in ipairs(keys) do
      plan[#plan + 1] = {key, 4 * #regrouped + 1, #by_key[key]}
      for _, j in ipairs(by_key[key]) do
        regrouped[#regrouped + 1] = string.sub(blocks, 4 * j + 1, 4 * j + 4)
      end
    end
    blocks = table.concat(regrouped)
  end
  local adds, added = {}, 0
  for _, step in ipairs(plan) do
    local key, pos, n = step[1], step[2], step[3]
    local sets = {}
    for start = 0, n - 1, 1000 do
      local m = math.min(1000, n - start)
      local fields = {struct.unpack(string.rep('c4', m), blocks, pos + 4 * start)}
      fields[m + 1] = nil  -- unpack's last value is the next position
      local vals = redis.call('HMGET', key, unpack(fields))
      for k = 1, m do
        local v = vals[k]
        if v ~= 'T' then
          local c = 1
          if v then
            local x = tonumber(v)
            if x > 0 then c = x + 1 elseif not expired(x, done) then c = 2 end
          end
          local b = fields[k]
          if c >= need and tlen < MAXT then
            tlen = tlen + 1
            adds[#adds + 1] = b
            sets[#sets + 1] = b; sets[#sets + 1] = 'T'
          else
            sets[#sets + 1] = b; sets[#sets + 1] = (c == 1) and once or c
          end
        end
      end
    end
    if #sets > 0 then added = added + hset_many(key, sets) end
  end
  if #adds > 0 then redis.call('APPEND', tk, table.concat(adds)) end
  local total = redis.call('HINCRBY', P .. ':tn', h, added)
  if total > 2 * FILL * 2 ^ bits then bits = cleanup(h, bits, math.floor(pages / EVERY)) end
  return bits
end

local bits = -1  -- the host's count hashes after learning (-1: not learned)
local function counts(dup)
  local v = redis.call('HINCRBY', P .. ':hc', host, HOSTS + (dup and 1 or 0))
  return {'ok', math.floor(v / HOSTS), v % HOSTS, redis.call('INCR', P .. ':seq'), hid, bits}
end

if action == 'observe' then
  bits = learn(host_id(), given_bits, groups)
  return {'ok', 0, 0, redis.call('INCR', P .. ':seq'), hid, bits}
end
if action == 'unchanged' then return counts(false) end
local id = own_seen
if id == 0 then
  id = redis.call('INCR', P .. ':next')
  redis.call('HSET', UKEY, uh, id)
else
  local rec = redis.call('HGET', dkey(id), id)
  if rec then  -- a refetched original: what it said before goes
    local old = string.sub(rec, 2, 9)
    local okey = P .. ':f:' .. bucket(old, FB)
    if tonumber(redis.call('HGET', okey, old) or 0) == id then redis.call('HDEL', okey, old) end
    redis.call('HDEL', dkey(id), id)
    redis.call('HINCRBY', P .. ':v', 'forget', 1)
  end
end
if action == 'new' then
  local h = host_id()
  redis.call('HSET', dkey(id), id,
    '\1' .. fp .. struct.pack('>I4I2', h, #url) .. url .. payload)
  redis.call('HSET', P .. ':f:' .. bucket(fp, FB), fp, id)
  local packed = struct.pack('>I4', id)
  local grew = false
  for i = 1, #anchors / 4 do
    local a = string.sub(anchors, 4 * i - 3, 4 * i)
    local ids = current[i]
    local n = #ids / 4
    if n < INLINE then
      redis.call('HSET', P .. ':a:' .. low(a, AB), a, ids .. packed)
      grew = true
    elseif n < MAXP then
      redis.call('HSET', P .. ':ax:' .. low(a, AB), a, string.sub(ids, 4 * INLINE + 1) .. packed)
      grew = true
    end
  end
  if grew then redis.call('HINCRBY', P .. ':v', 'anchors', 1) end
  bits = learn(h, given_bits, groups)
elseif action == 'near' and teach then
  bits = learn(host_id(), given_bits, groups)
end
return counts(action == 'exact' or action == 'near')
"""


def _bits(entries: float) -> int:
    """Bits of bucket number for ``entries`` fields at about ``_FILL`` per bucket."""
    return max(1, min(24, math.ceil(math.log2(max(2.0, entries / _FILL)))))


def encode_sketch(title: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> bytes:
    """An original's title, cover and sketch in few bytes: the first hash, then the gaps in the
    fewest whole bytes that hold the largest, then the distinct blocks and one index per entry
    (1 byte while there are at most 255 distinct blocks)."""
    n = len(sketch)
    head = np.array([title, cover], dtype=">u4").tobytes() + n.to_bytes(2, "big")
    if not n:
        return head + b"\0"
    gaps = np.diff(sketch.astype(np.uint32))
    top = int(gaps.max()) if len(gaps) else 0
    width = max(1, (top.bit_length() + 7) // 8)
    gap_bytes = gaps.astype(">u4").view(np.uint8).reshape(-1, 4)[:, 4 - width :].tobytes()
    table, index = np.unique(blocks, return_inverse=True)
    wide = len(table) > 255
    return b"".join((
        head, bytes((width | (0x80 if wide else 0),)), int(sketch[0]).to_bytes(4, "big"),
        gap_bytes, len(table).to_bytes(2, "big"), table.astype(">u4").tobytes(),
        index.astype(">u2" if wide else np.uint8).tobytes(),
    ))


def decode_sketch(data: bytes, offset: int = 0) -> tuple[int, np.ndarray, np.ndarray, int]:
    """(title, sketch, blocks, cover) of :func:`encode_sketch`'s bytes from ``offset``."""
    title, cover = np.frombuffer(data, ">u4", 2, offset).tolist()
    n = int.from_bytes(data[offset + 8 : offset + 10], "big")
    if not n:
        empty = np.empty(0, dtype=np.uint32)
        return title, empty, empty, cover
    flags = data[offset + 10]
    width, wide = flags & 0x7F, bool(flags & 0x80)
    pos = offset + 11
    first = int.from_bytes(data[pos : pos + 4], "big")
    pos += 4
    padded = np.zeros((n - 1, 4), dtype=np.uint8)
    padded[:, 4 - width :] = np.frombuffer(data, np.uint8, (n - 1) * width, pos).reshape(-1, width)
    pos += (n - 1) * width
    sketch = np.empty(n, dtype=np.uint64)
    sketch[0] = first
    sketch[1:] = padded.view(">u4").ravel()
    sketch = np.cumsum(sketch, dtype=np.uint64).astype(np.uint32)
    d = int.from_bytes(data[pos : pos + 2], "big")
    pos += 2
    table = np.frombuffer(data, ">u4", d, pos).astype(np.uint32)
    pos += 4 * d
    index = np.frombuffer(data, ">u2" if wide else np.uint8, n, pos)
    return title, sketch, table[index], cover


@dataclass
class _Template:
    """A worker's copy of one host's template (the blocks in the order Redis learned them)."""

    raw: bytearray = field(default_factory=bytearray)
    blocks: set[int] = field(default_factory=set)
    _array: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.raw) // 4

    def extend(self, more: bytes) -> None:
        self.raw += more
        self.blocks.update(np.frombuffer(more, ">u4").tolist())
        self._array = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = np.sort(np.frombuffer(bytes(self.raw), ">u4").astype(np.uint32))
        return self._array


class RedisNearDuplicateDetector:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend (built by
    ``crawler.redis_backends.RedisNearDuplicateStore``): the detector's interface, its state in
    Redis, shared by every worker. Two round trips per page (three when a host's template grew
    since this worker last looked). Not thread-safe: one thread at a time; ``runs_in_thread``
    lets the pipeline (and the spider's link-demotion question) use the crawl's content thread,
    so the round trips do not hold up the reactor."""

    runs_in_thread: ClassVar[bool] = True

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        shingle_size: int = DEFAULT_SHINGLE_SIZE,
        num_perm: int = DEFAULT_NUM_PERM,
        threshold: float = DEFAULT_THRESHOLD,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        if num_perm < ANCHORS or num_perm > 0xFFFF:
            raise ValueError(f"num_perm must be between {ANCHORS} and 65535")
        self.client = client
        self.prefix = "{" + key + "}:nd"
        self.shingle_size, self.num_perm, self.threshold = shingle_size, num_perm, threshold
        self.capacity = capacity
        self.anchor_bits = _bits(capacity * ANCHORS)
        self.table_bits = _bits(capacity)
        self._read = client.register_script(READ)
        self._commit = client.register_script(COMMIT)
        self._hids: dict[str, int] = {}  # host -> host id in Redis (never changes)
        self._templates: dict[int, _Template] = {}  # host id -> this worker's copy
        self._bits: dict[int, int] = {}  # host id -> its count hashes, as last seen
        self._hosts: dict[str, tuple[int, int, float]] = {}  # host -> (pages, dups, when)
        self.retries = 0  # commits refused because another worker changed what was read
        self.last_commit = 0  # place of this worker's last commit in the crawl's commit order
        params = (
            f"layout={LAYOUT} shingles={shingle_size} perm={num_perm} threshold={threshold} "
            f"capacity={capacity} template={MIN_PAGES},{MIN_SHARE},{PRUNE_EVERY},{MAX_TEMPLATE}"
        )
        stored = client.set(self.prefix + ":params", params, nx=True, get=True)
        if stored is not None and stored.decode() != params:
            raise ValueError(
                f"the crawl's shared near-duplicate index was built with {stored.decode()}; "
                f"this worker has {params} (NEARDUP_* settings must match)"
            )

    @property
    def params(self) -> tuple[Any, ...]:
        return ("shared", LAYOUT, self.shingle_size, self.num_perm, self.threshold)

    # --- the decision ---------------------------------------------------------------------

    def check(
        self, url: str, text: str, *, add: bool = True, title: str | None = None
    ) -> Decision:
        """As :meth:`NearDuplicateDetector.check`, against every worker's pages, atomically."""
        host = _host(url)
        title_id = title_hash(title)
        uh = hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()
        f: Features | None = None
        f_version = -1
        for _ in range(MAX_ATTEMPTS):
            hid = self._hids.get(host, 0)
            template = self._templates.get(hid) if hid else None
            version = len(template) if template is not None else 0
            if f is None or f_version != version:
                f = compute_features(text, template.blocks if template else set(),
                                     self.shingle_size, self.num_perm)
                f_version = version
            fp = bytes.fromhex(f.fingerprint)[:8] if f.words else b""
            anchors = f.sketch[:ANCHORS].astype(">u4").tobytes()
            reply = self._read(args=[
                self.prefix, self.table_bits, self.table_bits, self.anchor_bits, uh, fp, host,
                version, anchors, MAX_POSTING, VERIFY,
            ])
            if reply[0] == b"stale":
                self._learned(host, int(reply[1]), int(reply[2]), reply[3])
                continue
            _, hid_now, own, forget, indexed, owner, owner_url, lens, seen, records, lengths = reply
            hid = int(hid_now)
            if hid:
                self._hids[host] = hid
            candidates, urls, checks = self._candidates(hid, records, lengths)
            if owner:
                urls[int(owner)] = owner_url.decode("utf-8")
            own_template = self._templates[hid].array() if hid in self._templates else _EMPTY
            outcome = decide(
                f, int(own) or None, int(owner) or None, urls.__getitem__,
                functools.partial(_best, f, title_id, candidates, own_template, self.threshold),
                self.threshold,
            )
            if not add:
                return outcome.decision
            action = outcome.action
            learns = action == "new" or outcome.teaches
            bits, blocks, groups = self._grouped(
                hid, f.blocks if learns else [], template.blocks if template else None
            )
            result = self._commit(args=[
                self.prefix, self.table_bits, self.table_bits, self.anchor_bits, action, uh,
                url, host, fp, int(own), int(owner), int(forget), int(indexed),
                anchors if lens else b"", lens, seen, checks, version,
                encode_sketch(title_id, f.sketch, f.sketch_blocks, f.cover)
                if action == "new" else b"",
                "1" if outcome.teaches else "0", blocks,
                MAX_POSTING, MIN_PAGES, repr(MIN_SHARE), PRUNE_EVERY, MAX_TEMPLATE, bits, groups,
            ])
            if result[0] == b"retry":
                self.retries += 1
                continue
            self._committed(host, result)
            return outcome.decision
        raise RuntimeError(
            f"shared near-duplicate check of {url} refused {MAX_ATTEMPTS} times in a row"
        )

    def observe(self, url: str, text: str) -> None:
        """Learn ``url``'s blocks into its host's shared template model without recording the
        page (for warming a model up, as :meth:`NearDuplicateDetector.observe`)."""
        from crawler.content.neardup import block_hash

        host = _host(url)
        hid = self._hids.get(host, 0)
        bits, blocks, groups = self._grouped(hid, [block_hash(x) for x in normalize_lines(text)])
        result = self._commit(args=[
            self.prefix, self.table_bits, self.table_bits, self.anchor_bits, "observe",
            b"\0" * 8, url, host, b"", 0, 0, 0, 0, b"", b"", b"", b"", 0, b"", "0",
            blocks, MAX_POSTING, MIN_PAGES, repr(MIN_SHARE), PRUNE_EVERY, MAX_TEMPLATE, bits,
            groups,
        ])
        self._committed(host, result)

    def _committed(self, host: str, result: list[Any]) -> None:
        """Keep what a commit answered: the host's counts, its id and count hashes."""
        if int(result[1]):
            self._hosts[host] = (int(result[1]), int(result[2]), time.monotonic())
        self.last_commit = int(result[3])
        hid, bits = int(result[4]), int(result[5])
        if hid:
            self._hids[host] = hid
            if bits >= 0:
                self._bits[hid] = bits

    def _grouped(
        self, hid: int, blocks: list[int], template: set[int] | None = None
    ) -> tuple[int, bytes, bytes]:
        """A page's distinct blocks to learn, without those known to be template, grouped
        by the count hash they fall in (as far as this worker knows the host's hashes): (bits,
        blocks, groups of (hash number, blocks in it))."""
        if not blocks:
            return 0, b"", b""
        bits = self._bits.get(hid, 0) if hid else 0
        unique = np.unique(np.array(blocks, dtype=np.uint32))
        if template:
            unique = unique[~np.isin(unique, self._templates[hid].array())]
        if not len(unique):
            return bits, b"", b""
        hashes = unique & np.uint32((1 << bits) - 1)
        order = np.lexsort((unique, hashes))
        unique, hashes = unique[order], hashes[order]
        starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
        sizes = np.diff(np.r_[starts, len(unique)])
        groups = np.empty(len(starts), dtype=[("hash", ">u4"), ("n", ">u2")])
        groups["hash"], groups["n"] = hashes[starts], sizes
        return bits, unique.astype(">u4").tobytes(), groups.tobytes()

    def _learned(self, host: str, hid: int, start: int, rest: bytes) -> None:
        """Bring this worker's copy of a host's template up to Redis's."""
        if not hid:
            return
        self._hids[host] = hid
        template = self._templates.get(hid)
        if template is None or start == 0 or len(template) != start:
            template = self._templates[hid] = _Template()
            start = 0
        template.extend(rest)

    def _candidates(
        self, hid: int, records: list[bytes], lengths: list[int]
    ) -> tuple[list[Candidate], dict[int, str], bytes]:
        """Decode the candidates' records; bring their hosts' templates up to date (one
        pipelined round trip when some grew) and say which lengths the decision used."""
        parsed = []
        stale: dict[int, int] = {}
        for rec, length in zip(records, lengths, strict=True):
            doc = int.from_bytes(rec[:4], "big")
            other = int.from_bytes(rec[13:17], "big")
            n = int.from_bytes(rec[17:19], "big")
            url = rec[19 : 19 + n].decode("utf-8")
            title, sketch, blocks, cover = decode_sketch(rec, 19 + n)
            parsed.append((doc, other, url, title, sketch, blocks, cover))
            have = len(self._templates[other]) if other in self._templates else 0
            if other != hid and have < int(length):
                stale[other] = have
        if stale:
            pipe = self.client.pipeline(transaction=False)
            for other, have in stale.items():
                pipe.getrange(f"{self.prefix}:t:{other}", have * 4, -1)
            for (other, have), rest in zip(stale.items(), pipe.execute(), strict=True):
                self._templates.setdefault(other, _Template())
                if len(self._templates[other]) == have:
                    self._templates[other].extend(rest)
        candidates, urls, used = [], {}, {}
        for doc, other, url, title, sketch, blocks, cover in parsed:
            urls[doc] = url
            template = None
            if other != hid:
                copy = self._templates.get(other)
                template = copy.array() if copy is not None else _EMPTY
                used[other] = len(copy) if copy is not None else 0
            candidates.append(Candidate(doc, sketch, blocks, cover, title, template))
        checks = b"".join(h.to_bytes(4, "big") + n.to_bytes(4, "big") for h, n in used.items())
        return candidates, urls, checks

    # --- queries --------------------------------------------------------------------------

    def host_duplicate_ratio(
        self, host: str, min_pages: int = defaults.NEARDUP_HOST_MIN_PAGES
    ) -> float:
        """Share of ``host``'s checked pages that were duplicates, counted by every worker; a
        worker's copy is refreshed by its own checks and at most every ``HOST_TTL`` seconds."""
        cached = self._hosts.get(host)
        if cached is None or time.monotonic() - cached[2] > HOST_TTL:
            packed = int(self.client.hget(self.prefix + ":hc", host) or 0)
            cached = (packed >> 26, packed & ((1 << 26) - 1), time.monotonic())
            self._hosts[host] = cached
        pages, dups, _ = cached
        if pages < min_pages:
            return 0.0
        return dups / pages

    def template(self, host: str) -> set[int]:
        """``host``'s template blocks as Redis has them now (for tests and benchmarks)."""
        hid = int(self.client.hget(self.prefix + ":h", host) or 0)
        if not hid:
            return set()
        raw = self.client.get(f"{self.prefix}:t:{hid}") or b""
        return set(np.frombuffer(raw, ">u4").tolist())

    def __len__(self) -> int:
        """Number of URLs recorded by every worker (originals and duplicates)."""
        return int(self.client.get(self.prefix + ":next") or 0)

    @property
    def originals(self) -> int:
        return sum(
            self.client.hlen(key)
            for key in self.client.scan_iter(match=_glob(self.prefix) + ":f:*", count=1000)
        )

    def state(self) -> dict[str, Any]:
        """Nothing to save: the state is in Redis (a JOBDIR resume finds it there)."""
        return {"shared": self.prefix}

    def restore(self, state: dict[str, Any]) -> bool:
        return True

    def memory(self) -> dict[str, int]:
        """Bytes Redis uses for this index by kind of key (``MEMORY USAGE``; for benchmarks)."""
        total: dict[str, int] = {}
        for key in self.client.scan_iter(match=_glob(self.prefix) + ":*", count=1000):
            kind = key.decode().rsplit("}:nd:", 1)[-1].split(":")[0]
            total[kind] = total.get(kind, 0) + int(self.client.memory_usage(key, samples=0) or 0)
        return total


_EMPTY = np.empty(0, dtype=np.uint32)


def _best(
    f: Features, title_id: int, candidates: list[Candidate], own_template: np.ndarray,
    threshold: float,
) -> tuple[int | None, float]:
    best, similarity = pick_best(f, title_id, candidates, own_template, threshold)
    return (best.doc if best is not None else None), similarity


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
