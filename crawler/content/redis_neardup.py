"""Near-duplicates shared by every worker of a crawl: the in-process detector's decisions, its
state in Redis, check-and-insert atomic across workers.

:class:`RedisNearDuplicateDetector` decides with the very functions of
:mod:`crawler.content.neardup` (:func:`~crawler.content.neardup.compute_features`,
:func:`~crawler.content.neardup.rank_candidates`' rule, :func:`~crawler.content.neardup.pick_best`,
:func:`~crawler.content.neardup.decide`) and learns each host's template with
:class:`crawler.content.template.HostTemplates` itself; only the state lives in Redis, under the
crawl's hash tag: the URL and fingerprint tables, the stored originals (sketch, the block of each
entry, cover, title, host, URL), the anchor index, every host's template model and the per-host
duplicate counts the frontier's penalty uses.

Each page is two round trips, optimistic like a compare-and-set:

1. ``READ`` (one Lua call, read only): the page's host template length (a worker keeps a copy
   of each host's template, which only grows, so a length is its version; if the copy is behind,
   the script returns what is missing and the worker computes the features again), what this
   worker's copy of the host's model lacks (below), the URL's id, the fingerprint's owner, the
   first :data:`~crawler.content.neardup.MAX_POSTING` postings of each anchor ranked as
   :func:`~crawler.content.neardup.rank_candidates` ranks them, and the
   :data:`~crawler.content.neardup.VERIFY` best candidates' records with their hosts' template
   lengths.
2. The worker decides in Python; a page that teaches its host's model is learned into the
   worker's copy of it (:meth:`HostTemplates.learn`, undone if the commit is refused). Then
   ``COMMIT`` (one Lua call) re-reads everything the decision depended on (URL id, fingerprint
   owner, each anchor's posting count up to the cap, the template lengths used, the host's
   pages learned, a counter bumped whenever a stored original is replaced) and records the page
   (id, original with its anchors, what it taught, host counts) only if none of it changed;
   otherwise it answers ``retry`` and the worker starts again from 1.

So the decisions are those of the in-process detector run over the pages in the order their
commits happened, and two workers racing on one page index it once: the second commit finds the
fingerprint taken and retries into "exact duplicate".

**Template models.** Counting every block of every original in Redis (one hash field per block,
~12 bytes and ~1 us of server time each, ~90 blocks per real page) was most of the store's bytes
and time. A host's model now lives in Redis as a *log*: each page that taught it, as its distinct
blocks not yet template (sorted, gap-packed), and at every pruning of the model (each
:data:`~crawler.content.template.PRUNE_EVERY` pages, where the model is smallest) a *snapshot*
of the model (the blocks counted and their counts) that replaces the log so far. A worker keeps
its own copy of the models of the hosts it checks and brings it up to date from the ``READ``
reply (the log entries since its copy's version, or the snapshot and the log); it learns a page
there and sends ``COMMIT`` the page's log entry, the blocks it made template and, at a pruning,
the new snapshot. Redis does a few appends per page whatever the page's size; a worker replays
the pages other workers taught of the hosts it checks (~40 us each).

**Records.** An original's record is packed (gaps of its sketch in the bits the largest needs,
each entry's block as an index into the page's table of blocks in as few bits, the URL without
``scheme://host``) and appended to a heap of fixed-size strings, allocated whole so nothing is
lost to a string's doubling or to a hash table's per-entry overhead; a table of 8 bytes per id
(offset and length) finds it.

Layout (``{key}:nd:...``; the small hashes are bucketed so they stay in Redis's compact listpack
encoding):

========================  ==================================================================
``:u:<n>``                HASH: 8 bytes of blake2b(URL) -> id (originals and duplicates)
``:f:<n>``                HASH: 8 bytes of the content fingerprint -> id of its original
``:a:<n>``, ``:ax:<n>``    HASH: anchor (4 bytes) -> ids (4 bytes each) of its first originals
                          (16 in ``:a``, the rest up to 48 in ``:ax``: long values would turn a
                          whole bucket into a hashtable)
``:o:<id/508>``           STRING: per id, the offset (5 bytes) and length (3 bytes) of its
                          record in the heap; zeros: none (duplicates, replaced originals)
``:r:<n>``                STRING: the heap, :data:`_CHUNK` bytes each; a record is fingerprint
                          (8), host id (4), URL (length, then a byte saying which of
                          ``http://host``, ``https://host`` or nothing it lacks, then the rest),
                          title, cover and the packed sketch (:func:`encode_sketch`)
``:h``/``:hn``/``:hnext`` HASH host -> host id, its reverse, and the last id given
``:t:<hid>``              STRING: the host's template blocks (4 bytes each), in the order learned
``:tp``                   HASH: host id -> pages its model learned (the model's version)
``:ts:<hid>``             STRING: the model's snapshot at its last pruning (pages, template
                          length, blocks counted once and more than once, gap-packed, counts)
``:tl:<hid>``             LIST: the pages learned since the snapshot, each its packed blocks
``:hc``                   HASH: host -> pages checked x 2^26 + duplicates among them (the
                          frontier's penalty, shared)
``:v``                    HASH: ``forget`` (originals replaced so far), ``anchors`` (originals
                          indexed so far), ``heap`` (bytes of the heap used)
``:next``/``:seq``        last id given, commits so far (the order decisions are equivalent to)
``:params``               the settings every worker must share
========================  ==================================================================

``bench/shared.py`` measures the decisions against the in-process detector, Redis server time
per page and bytes per document.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from collections import OrderedDict
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
    block_hash,
    compute_features,
    decide,
    pick_best,
    title_hash,
)
from crawler.content.normalize import normalize_lines
from crawler.content.template import (
    MAX_TEMPLATE,
    MIN_PAGES,
    MIN_SHARE,
    PRUNE_EVERY,
    HostTemplates,
)

__all__ = ["RedisNearDuplicateDetector", "decode_sketch", "encode_sketch"]

LAYOUT = 3
DEFAULT_CAPACITY = defaults.NEARDUP_SHARED_CAPACITY
HOST_TTL = 10.0  # seconds a worker trusts its copy of a host's duplicate counts
MAX_ATTEMPTS = 64  # commits refused in a row before giving up (each means another worker won)
_FILL = 256  # entries aimed at per listpack bucket (Redis converts one past 512)
# A heap string of 16,378 bytes is one 16 KiB allocation (with its 5-byte header and the
# terminating zero); a record table string of 508 entries of 8 bytes, one 4 KiB allocation.
_CHUNK = 16_378
_SLOTS = 508
_DECODED = 4096  # decoded candidate records a worker keeps (siblings come back as candidates)
_NO_COVER = 0xFFFFFFFF

_COMMON = r"""
local P = ARGV[1]
local UB, FB, AB = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local INLINE = 16  -- anchor postings kept in the bucket (64 bytes: still listpack); more: :ax
local HOSTS = 2 ^ 26  -- :hc packs a host's pages and duplicates as pages * HOSTS + duplicates
local CHUNK, SLOTS = @CHUNK@, @SLOTS@
local function bucket(s, bits)  -- the top `bits` bits of a binary string's first 4 bytes
  local v = struct.unpack('>I4', s)
  return math.floor(v / 2 ^ (32 - bits))
end
local function low(s, bits)  -- the low `bits` bits: anchors are a page's *smallest* hashes,
  return struct.unpack('>I4', s) % 2 ^ bits  -- so their top bits are mostly zero
end
local SHIFT = 2 ^ 24  -- :tp packs a host's pages learned * SHIFT + its template length
local metas = {}
local function meta(hid)  -- a host's (pages learned, template length), as at the script's start
  if hid == 0 then return 0, 0 end
  local m = metas[hid]
  if not m then
    m = tonumber(redis.call('HGET', P .. ':tp', hid) or 0)
    metas[hid] = m
  end
  return math.floor(m / SHIFT), m % SHIFT
end
local function tlen_of(hid)
  local _, n = meta(hid)
  return n
end
local function postings(a)  -- an anchor's postings (4 bytes each), and its bucket
  local b = low(a, AB)
  local ids = redis.call('HGET', P .. ':a:' .. b, a) or ''
  if #ids == 4 * INLINE then ids = ids .. (redis.call('HGET', P .. ':ax:' .. b, a) or '') end
  return ids, b
end
local function versions()  -- commits, originals replaced and originals indexed so far
  local v = redis.call('HMGET', P .. ':v', 'seq', 'forget', 'anchors')
  return tonumber(v[1] or 0), tonumber(v[2] or 0), tonumber(v[3] or 0)
end
local function slot(id)  -- the record table's string and the byte of id's entry in it
  return P .. ':o:' .. math.floor(id / SLOTS), (id % SLOTS) * 8
end
local function record(id)  -- the record of original `id`, or nil
  local key, at = slot(id)
  local e = redis.call('GETRANGE', key, at, at + 7)
  if #e < 8 then return nil end
  local hi, lo, len = struct.unpack('>I1I4I3', e)
  if len == 0 then return nil end
  local off, parts = hi * 4294967296 + lo, {}
  while len > 0 do  -- a record may run over into the next heap string
    local at2 = off % CHUNK
    local n = math.min(len, CHUNK - at2)
    parts[#parts + 1] = redis.call('GETRANGE', P .. ':r:' .. math.floor(off / CHUNK), at2,
                                   at2 + n - 1)
    off, len = off + n, len - n
  end
  return table.concat(parts)
end
"""

READ = _COMMON + r"""
local uh, fp, host, hid = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8])
local known, learned = tonumber(ARGV[9]), tonumber(ARGV[10])
local anchors, MAXP, VERIFY = ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13])
if hid == 0 then hid = tonumber(redis.call('HGET', P .. ':h', host) or 0) end
local pages, tlen = meta(hid)
if tlen ~= known then  -- the worker's copy of the host's template is behind: send the rest
  local from = known
  if known > tlen then from = 0 end
  local rest = ''
  if hid > 0 and tlen > from then rest = redis.call('GETRANGE', P .. ':t:' .. hid, from * 4, -1) end
  return {'stale', hid, from, rest}
end
-- the host's model: pages learned, and what the worker's copy (`learned` pages) lacks: the log
-- entries after its version, or the snapshot and the whole log (`base`: the version they follow)
local base, snap, log = 0, '', {}
if hid > 0 then
  if pages ~= learned then
    local sk, lk = P .. ':ts:' .. hid, P .. ':tl:' .. hid
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
end
local model = {pages, base, snap, log}
local own = tonumber(redis.call('HGET', P .. ':u:' .. bucket(uh, UB), uh) or 0)
local seq, forget, indexed = versions()
if fp == '' then return {'ok', hid, own, seq, forget, indexed, 0, '', '', '', {}, {}, model} end
local owner = tonumber(redis.call('HGET', P .. ':f:' .. bucket(fp, FB), fp) or 0)
if owner > 0 then
  return {'ok', hid, own, seq, forget, indexed, owner, record(owner) or '', '', '', {}, {}, model}
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
      local rec = record(d)
      if rec then
        recs[#recs + 1] = struct.pack('>I4', d) .. rec
        tls[#tls + 1] = tlen_of(struct.unpack('>I4', rec, 9))
        if #recs == VERIFY then break end
      end
    end
    if #recs == VERIFY then break end
  end
end
return {'ok', hid, own, seq, forget, indexed, 0, '', table.concat(lens), table.concat(seen), recs,
        tls, model}
"""

COMMIT = _COMMON + r"""
local action, uh, url, host, fp = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local own_seen, owner_seen = tonumber(ARGV[10]), tonumber(ARGV[11])
local forget_seen, indexed_seen = tonumber(ARGV[12]), tonumber(ARGV[13])
local anchors, lens, seen, checks = ARGV[14], ARGV[15], ARGV[16], ARGV[17]
local tlen_seen, payload, MAXP = tonumber(ARGV[18]), ARGV[19], tonumber(ARGV[20])
local learned, entry, made, snapshot = tonumber(ARGV[21]), ARGV[22], ARGV[23], ARGV[24]
local hid, seq_seen = tonumber(ARGV[25]), tonumber(ARGV[26])
local UKEY = P .. ':u:' .. bucket(uh, UB)

-- everything the decision (and the worker's learning) read must be as it was: certainly so
-- if nothing was committed since (the usual case), else each of it is compared
local seq, forget, indexed = versions()
local moved = seq ~= seq_seen
if moved and hid == 0 then hid = tonumber(redis.call('HGET', P .. ':h', host) or 0) end
if moved then
  local pages, tlen = meta(hid)
  if tlen ~= tlen_seen then return {'retry'} end
  if learned >= 0 and pages ~= learned then return {'retry'} end  -- the worker's model
end
local current = {}  -- each anchor's postings as the decision saw them (checked below)
if action ~= 'observe' then
  if moved then
    if tonumber(redis.call('HGET', UKEY, uh) or 0) ~= own_seen then return {'retry'} end
    if forget ~= forget_seen then return {'retry'} end
    if fp ~= '' then
      local owner = tonumber(redis.call('HGET', P .. ':f:' .. bucket(fp, FB), fp) or 0)
      if owner ~= owner_seen then return {'retry'} end
    end
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
  for i = 1, moved and #checks or 0, 8 do
    local h, n = struct.unpack('>I4I4', checks, i)
    if tlen_of(h) ~= n then return {'retry'} end
  end
end

local function host_id()
  if hid == 0 then
    hid = redis.call('INCR', P .. ':hnext')
    redis.call('HSET', P .. ':h', host, hid)
    redis.call('HSET', P .. ':hn', hid, host)
  end
  return hid
end

local function teach(h)  -- what the worker learned into its copy of the host's model
  if snapshot ~= '' then  -- a pruning: the snapshot replaces the log so far
    redis.call('SET', P .. ':ts:' .. h, snapshot)
    redis.call('DEL', P .. ':tl:' .. h)
  else
    redis.call('RPUSH', P .. ':tl:' .. h, entry)
  end
  redis.call('HINCRBY', P .. ':tp', h, SHIFT + #made / 4)
  if made ~= '' then redis.call('APPEND', P .. ':t:' .. h, made) end
end

local function store(id, data)  -- append a record to the heap, point id's entry at it
  local off = redis.call('HINCRBY', P .. ':v', 'heap', #data) - #data
  local o, pos = off, 1
  while pos <= #data do
    local key, at = P .. ':r:' .. math.floor(o / CHUNK), o % CHUNK
    local n = math.min(#data - pos + 1, CHUNK - at)
    if at == 0 then redis.call('SETRANGE', key, CHUNK - 1, '\0') end  -- allocated whole
    redis.call('SETRANGE', key, at, string.sub(data, pos, pos + n - 1))
    o, pos = o + n, pos + n
  end
  local key, at = slot(id)
  redis.call('SETRANGE', key, at,
             struct.pack('>I1I4I3', math.floor(off / 4294967296), off % 4294967296, #data))
end

local function counts(dup)
  local v = redis.call('HINCRBY', P .. ':hc', host, HOSTS + (dup and 1 or 0))
  return {'ok', math.floor(v / HOSTS), v % HOSTS, redis.call('HINCRBY', P .. ':v', 'seq', 1), hid}
end

if action == 'observe' then
  teach(host_id())
  return {'ok', 0, 0, redis.call('HINCRBY', P .. ':v', 'seq', 1), hid}
end
if action == 'unchanged' then return counts(false) end
local id = own_seen
if id == 0 then
  id = redis.call('INCR', P .. ':next')
  redis.call('HSET', UKEY, uh, id)
  if id % SLOTS == 0 or id == 1 then  -- the record table's next string: allocated whole
    redis.call('SETRANGE', P .. ':o:' .. math.floor(id / SLOTS), 8 * SLOTS - 1, '\0')
  end
else
  local rec = record(id)
  if rec then  -- a refetched original: what it said before goes
    local old = string.sub(rec, 1, 8)
    local okey = P .. ':f:' .. bucket(old, FB)
    if tonumber(redis.call('HGET', okey, old) or 0) == id then redis.call('HDEL', okey, old) end
    local key, at = slot(id)
    redis.call('SETRANGE', key, at, string.rep('\0', 8))
    redis.call('HINCRBY', P .. ':v', 'forget', 1)
  end
end
if action == 'new' then
  local h = host_id()
  store(id, fp .. struct.pack('>I4', h) .. url .. payload)
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
  teach(h)
elseif action == 'near' and learned >= 0 then
  teach(host_id())
end
return counts(action == 'exact' or action == 'near')
"""


def _script(source: str) -> str:
    return source.replace("@CHUNK@", str(_CHUNK)).replace("@SLOTS@", str(_SLOTS))


def _bits(entries: float) -> int:
    """Bits of bucket number for ``entries`` fields at about ``_FILL`` per bucket."""
    return max(1, min(24, math.ceil(math.log2(max(2.0, entries / _FILL)))))


# --- packing -----------------------------------------------------------------------------


def _pack(values: np.ndarray, width: int) -> bytes:
    """``values`` (each below 2**width) in ``width`` bits each, big-endian, the last byte
    padded with zeros."""
    if width == 0 or not len(values):
        return b""
    bits = np.unpackbits(values.astype(">u4").view(np.uint8).reshape(-1, 4), axis=1)
    return np.packbits(bits[:, 32 - width :]).tobytes()


def _unpack(data: bytes, pos: int, n: int, width: int) -> tuple[np.ndarray, int]:
    """``n`` values of ``width`` bits from ``data[pos:]`` (see :func:`_pack`); and the position
    after them."""
    size = (n * width + 7) // 8
    if width == 0 or not n:
        return np.zeros(n, np.uint32), pos + size
    bits = np.unpackbits(np.frombuffer(data, np.uint8, size, pos))[: n * width]
    full = np.zeros((n, 32), np.uint8)
    full[:, 32 - width :] = bits.reshape(n, width)
    return np.packbits(full, axis=1).view(">u4").ravel().astype(np.uint32), pos + size


def _pack_sorted(values: np.ndarray) -> bytes:
    """Sorted distinct uint32 ``values``: their number, the first, then the gaps in the bits
    the largest needs."""
    n = len(values)
    if not n:
        return b"\0\0\0\0"
    gaps = np.diff(values.astype(np.uint32))
    width = int(gaps.max()).bit_length() if len(gaps) else 0
    return b"".join((n.to_bytes(4, "big"), int(values[0]).to_bytes(4, "big"), bytes((width,)),
                     _pack(gaps, width)))


def _unpack_sorted(data: bytes, pos: int = 0) -> tuple[np.ndarray, int]:
    """:func:`_pack_sorted`'s values from ``data[pos:]``, and the position after them."""
    n = int.from_bytes(data[pos : pos + 4], "big")
    if not n:
        return np.empty(0, np.uint32), pos + 4
    first = int.from_bytes(data[pos + 4 : pos + 8], "big")
    gaps, end = _unpack(data, pos + 9, n - 1, data[pos + 8])
    values = np.empty(n, np.uint64)
    values[0] = first
    values[1:] = gaps
    return np.cumsum(values, dtype=np.uint64).astype(np.uint32), end


def encode_sketch(title: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> bytes:
    """An original's title, cover and sketch in few bytes: the first hash, the gaps in the bits
    the largest gap needs, the page's distinct blocks, and each entry's block as an index into
    them in the bits their number needs."""
    n = len(sketch)
    head = np.array([title, cover], dtype=">u4").tobytes() + n.to_bytes(2, "big")
    if not n:
        return head
    gaps = np.diff(sketch.astype(np.uint32))
    width = int(gaps.max()).bit_length() if len(gaps) else 0
    table, index = np.unique(blocks, return_inverse=True)
    index_width = (len(table) - 1).bit_length()
    return b"".join((
        head, int(sketch[0]).to_bytes(4, "big"), bytes((width,)), _pack(gaps, width),
        len(table).to_bytes(2, "big"), table.astype(">u4").tobytes(), bytes((index_width,)),
        _pack(index.astype(np.uint32), index_width),
    ))


def decode_sketch(data: bytes, offset: int = 0) -> tuple[int, np.ndarray, np.ndarray, int]:
    """(title, sketch, blocks, cover) of :func:`encode_sketch`'s bytes from ``offset``."""
    title, cover = np.frombuffer(data, ">u4", 2, offset).tolist()
    n = int.from_bytes(data[offset + 8 : offset + 10], "big")
    if not n:
        empty = np.empty(0, dtype=np.uint32)
        return title, empty, empty, cover
    pos = offset + 10
    first = int.from_bytes(data[pos : pos + 4], "big")
    gaps, pos = _unpack(data, pos + 5, n - 1, data[pos + 4])
    sketch = np.empty(n, dtype=np.uint64)
    sketch[0] = first
    sketch[1:] = gaps
    sketch = np.cumsum(sketch, dtype=np.uint64).astype(np.uint32)
    d = int.from_bytes(data[pos : pos + 2], "big")
    table = np.frombuffer(data, ">u4", d, pos + 2).astype(np.uint32)
    pos += 2 + 4 * d
    index, _ = _unpack(data, pos + 1, n, data[pos])
    return title, sketch, table[index], cover


def _encode_snapshot(pages: int, tlen: int, keys: np.ndarray, counts: np.ndarray) -> bytes:
    """A host's model right after a pruning: pages, template length, the blocks counted once,
    those counted more often and their counts."""
    once = counts == 1
    more = counts[~once].astype(">u2").tobytes()
    return b"".join((pages.to_bytes(4, "big"), tlen.to_bytes(4, "big"),
                     _pack_sorted(keys[once]), _pack_sorted(keys[~once]), more))


def _decode_snapshot(data: bytes) -> tuple[int, int, np.ndarray, np.ndarray]:
    pages = int.from_bytes(data[:4], "big")
    tlen = int.from_bytes(data[4:8], "big")
    once, pos = _unpack_sorted(data, 8)
    more, pos = _unpack_sorted(data, pos)
    counts = np.concatenate((np.ones(len(once), np.uint16),
                             np.frombuffer(data, ">u2", len(more), pos).astype(np.uint16)))
    keys = np.concatenate((once, more))
    order = np.argsort(keys, kind="stable")
    return pages, tlen, keys[order], counts[order]


def _url_part(url: str, host: str) -> bytes:
    """``url`` as a record keeps it: its length, then 1 (``http://host`` left out), 2
    (``https://host``) or 0 (whole), then the rest."""
    code, rest = 0, url
    if host:
        for n, scheme in ((1, "http://"), (2, "https://")):
            if url.startswith(scheme + host):
                code, rest = n, url[len(scheme) + len(host) :]
                break
    raw = rest.encode("utf-8")
    return (len(raw) + 1).to_bytes(2, "big") + bytes((code,)) + raw


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


@dataclass
class _Lesson:
    """What a page teaches its host's model, learned into the worker's copy until the commit
    says whether it stands."""

    host: str
    learned: int  # the model's pages before this one (its version)
    entry: bytes  # the page's log entry
    made: list[int]  # blocks it made template
    snapshot: bytes  # the model after it, when it pruned (else empty)
    saved: Any  # HostTemplates.checkpoint, to undo it


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
        self._read = client.register_script(_script(READ))
        self._commit = client.register_script(_script(COMMIT))
        self._hids: dict[str, int] = {}  # host -> host id in Redis (never changes)
        self._names: dict[int, str] = {}  # host id -> host
        self._templates: dict[int, _Template] = {}  # host id -> this worker's copy
        self._models = HostTemplates()  # this worker's copies of the hosts' models
        self._decoded: OrderedDict[bytes, tuple[int, np.ndarray, np.ndarray, int]] = OrderedDict()
        self._hosts: dict[str, tuple[int, int, float]] = {}  # host -> (pages, dups, when)
        self.retries = 0  # commits refused because another worker changed what was read
        self.last_commit = 0  # place of this worker's last commit in the crawl's commit order
        self.replayed = 0  # pages other workers taught that this worker learned from the log
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
                hid, version, self._models.pages(host), anchors, MAX_POSTING, VERIFY,
            ])
            if reply[0] == b"stale":
                self._learned(host, int(reply[1]), int(reply[2]), reply[3])
                continue
            (_, hid_now, own, seq, forget, indexed, owner, owner_rec, lens, seen, records,
             lengths, model) = reply
            hid = int(hid_now)
            if hid:
                self._hids[host] = hid
            self._follow(host, hid, model)
            candidates, heads, checks = self._candidates(hid, records, lengths)
            if owner:
                heads[int(owner)] = owner_rec
            own_template = self._templates[hid].array() if hid in self._templates else _EMPTY
            outcome = decide(
                f, int(own) or None, int(owner) or None,
                lambda doc, heads=heads: self._url(heads[doc]),  # type: ignore[misc]
                functools.partial(_best, f, title_id, candidates, own_template, self.threshold),
                self.threshold,
            )
            if not add:
                return outcome.decision
            action = outcome.action
            lesson = (self._learn(host, hid, f.blocks)
                      if action == "new" or outcome.teaches else None)
            result = self._commit(args=[
                self.prefix, self.table_bits, self.table_bits, self.anchor_bits, action, uh,
                _url_part(url, host), host, fp, int(own), int(owner), int(forget),
                int(indexed), anchors if lens else b"", lens, seen, checks, version,
                encode_sketch(title_id, f.sketch, f.sketch_blocks, f.cover)
                if action == "new" else b"", MAX_POSTING, *_lesson_args(lesson), hid, int(seq),
            ])
            if result[0] == b"retry":
                self._undo(lesson)
                self.retries += 1
                continue
            self._committed(host, result, lesson)
            return outcome.decision
        raise RuntimeError(
            f"shared near-duplicate check of {url} refused {MAX_ATTEMPTS} times in a row"
        )

    def observe(self, url: str, text: str) -> None:
        """Learn ``url``'s blocks into its host's shared template model without recording the
        page (for warming a model up, as :meth:`NearDuplicateDetector.observe`)."""
        host = _host(url)
        blocks = [block_hash(x) for x in normalize_lines(text)]
        for _ in range(MAX_ATTEMPTS):
            hid = self._hids.get(host, 0)
            template = self._templates.get(hid) if hid else None
            version = len(template) if template is not None else 0
            reply = self._read(args=[
                self.prefix, self.table_bits, self.table_bits, self.anchor_bits, b"\0" * 8, b"",
                host, hid, version, self._models.pages(host), b"", MAX_POSTING, VERIFY,
            ])
            if reply[0] == b"stale":
                self._learned(host, int(reply[1]), int(reply[2]), reply[3])
                continue
            hid = int(reply[1])
            if hid:
                self._hids[host] = hid
            self._follow(host, hid, reply[12])
            lesson = self._learn(host, hid, blocks)
            result = self._commit(args=[
                self.prefix, self.table_bits, self.table_bits, self.anchor_bits, "observe",
                b"\0" * 8, b"", host, b"", 0, 0, 0, 0, b"", b"", b"", b"", version, b"",
                MAX_POSTING, *_lesson_args(lesson), hid, int(reply[3]),
            ])
            if result[0] == b"retry":
                self._undo(lesson)
                self.retries += 1
                continue
            self._committed(host, result, lesson)
            return
        raise RuntimeError(f"shared template learning of {url} refused {MAX_ATTEMPTS} times")

    # --- the hosts' models ----------------------------------------------------------------

    def _follow(self, host: str, hid: int, model: list[Any]) -> None:
        """Bring this worker's copy of ``host``'s model to Redis's version (``READ``'s reply:
        pages, the version the log follows, the snapshot if the copy needs it, the log)."""
        pages, base, snapshot, log = int(model[0]), int(model[1]), model[2], model[3]
        models = self._models
        if pages == models.pages(host):
            return
        if snapshot:
            learned, tlen, keys, counts = _decode_snapshot(snapshot)
            copy = self._templates.get(hid)
            raw = bytes(copy.raw[: 4 * tlen]) if copy is not None else b""
            models.load(host, learned, keys, counts, np.frombuffer(raw, ">u4").tolist())
        elif base == 0:
            models.forget(host)
        if models.pages(host) != base:
            raise RuntimeError(f"{host}: template model at {models.pages(host)}, log from {base}")
        for entry in log:
            models.learn(host, _unpack_sorted(entry)[0].tolist())
            self.replayed += 1
        models.journal.clear()
        if models.pages(host) != pages:
            raise RuntimeError(f"{host}: template model at {models.pages(host)}, not {pages}")

    def _learn(self, host: str, hid: int, blocks: list[int]) -> _Lesson:
        """Learn one more page of ``host`` into this worker's copy of its model."""
        models = self._models
        template = models.template(host)
        fresh = np.unique(np.fromiter(
            (b for b in blocks if b not in template) if template else blocks, np.uint32
        ))
        learned = models.pages(host)
        saved = models.checkpoint(host)
        made = models.learn(host, fresh.tolist())
        models.journal.clear()
        snapshot = b""
        if models.pages(host) % PRUNE_EVERY == 0:
            pages, keys, counts = models.counts(host)
            snapshot = _encode_snapshot(pages, len(models.template(host)), keys, counts)
        return _Lesson(host, learned, _pack_sorted(fresh), made, snapshot, saved)

    def _undo(self, lesson: _Lesson | None) -> None:
        if lesson is not None:
            self._models.rollback(lesson.host, lesson.saved, lesson.made)

    def _committed(self, host: str, result: list[Any], lesson: _Lesson | None) -> None:
        """Keep what a commit answered: the host's counts and id; the template blocks the page
        made go to this worker's copy of the template (which the commit found current)."""
        if int(result[1]):
            self._hosts[host] = (int(result[1]), int(result[2]), time.monotonic())
        self.last_commit = int(result[3])
        hid = int(result[4])
        if hid:
            self._hids[host] = hid
            self._names[hid] = host
            if lesson is not None and lesson.made:
                self._templates.setdefault(hid, _Template()).extend(
                    np.array(lesson.made, ">u4").tobytes()
                )

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

    # --- candidates -------------------------------------------------------------------------

    def _candidates(
        self, hid: int, records: list[bytes], lengths: list[int]
    ) -> tuple[list[Candidate], dict[int, bytes], bytes]:
        """Decode the candidates' records; bring their hosts' templates up to date (one
        pipelined round trip when some grew) and say which lengths the decision used."""
        parsed = []
        stale: dict[int, int] = {}
        heads: dict[int, bytes] = {}
        for rec, length in zip(records, lengths, strict=True):
            doc = int.from_bytes(rec[:4], "big")
            other = int.from_bytes(rec[12:16], "big")
            n = int.from_bytes(rec[16:18], "big")
            heads[doc] = rec[4 : 18 + n]
            parsed.append((doc, other, self._decode(rec, 18 + n)))
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
        candidates, used = [], {}
        for doc, other, (title, sketch, blocks, cover) in parsed:
            template = None
            if other != hid:
                copy = self._templates.get(other)
                template = copy.array() if copy is not None else _EMPTY
                used[other] = len(copy) if copy is not None else 0
            candidates.append(Candidate(doc, sketch, blocks, cover, title, template))
        checks = b"".join(h.to_bytes(4, "big") + n.to_bytes(4, "big") for h, n in used.items())
        return candidates, heads, checks

    def _decode(self, rec: bytes, pos: int) -> tuple[int, np.ndarray, np.ndarray, int]:
        """A candidate's sketch, decoded once per worker while it keeps coming back."""
        key = rec[4:]
        hit = self._decoded.get(key)
        if hit is not None:
            self._decoded.move_to_end(key)
            return hit
        decoded = decode_sketch(rec, pos)
        self._decoded[key] = decoded
        if len(self._decoded) > _DECODED:
            self._decoded.popitem(last=False)
        return decoded

    def _url(self, head: bytes) -> str:
        """The URL of a record (from its head: fingerprint, host id, URL)."""
        hid = int.from_bytes(head[8:12], "big")
        n = int.from_bytes(head[12:14], "big")
        code, rest = head[14], head[15 : 14 + n].decode("utf-8")
        if code == 0:
            return rest
        host = self._names.get(hid)
        if host is None:
            host = (self.client.hget(self.prefix + ":hn", hid) or b"").decode("utf-8")
            self._names[hid] = host
        return ("http://" if code == 1 else "https://") + host + rest

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


def _lesson_args(lesson: _Lesson | None) -> list[Any]:
    """``COMMIT``'s last arguments: the model's version the lesson follows (-1: none), the log
    entry, the blocks made template, the snapshot."""
    if lesson is None:
        return [-1, b"", b"", b""]
    return [lesson.learned, lesson.entry, np.array(lesson.made, ">u4").tobytes(),
            lesson.snapshot]


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
