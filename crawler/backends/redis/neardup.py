"""Near-duplicates shared by every worker of a crawl: the in-process detector's decisions, its
state in Redis, check-and-insert atomic across workers.

:class:`RedisNearDuplicateDetector` decides with the very functions of
:mod:`crawler.content.neardup` (:func:`~crawler.content.neardup.compute_features`,
:func:`~crawler.content.neardup.rank_candidates`, :func:`~crawler.content.neardup.pick_best`,
:func:`~crawler.content.neardup.decide`) and learns each host's template with
:class:`crawler.content.template.HostTemplates` itself; only the state lives in Redis, under the
crawl's hash tag: the URL and fingerprint tables, the stored originals (sketch, the block of each
entry, cover, title, host, URL), the index of their anchors, every host's template model and the
per-host duplicate counts the frontier's penalty uses.

Each page is two round trips, optimistic like a compare-and-set:

1. ``READ`` (one Lua call, read only): the page's host template length (a worker keeps a copy
   of each host's template, which only grows, so a length is its version; if the copy is behind,
   the script returns what is missing and the worker computes the features again), what this
   worker's copies of the host's model and of the anchor index lack (below), the URL's id, the
   fingerprint's owner and, for the candidates the worker ranked, the records it has not decoded
   yet and their hosts' template lengths.
2. The worker ranks the candidates (:func:`~crawler.content.neardup.rank_candidates` over its
   copy of the index, now current; if that changed the ranking, it reads again) and decides; a
   page that teaches its host's model is learned into the worker's copy of it
   (:meth:`HostTemplates.learn`, undone if the commit is refused). Then ``COMMIT`` (one Lua call)
   checks that nothing the decision depended on changed (nothing at all if no commit happened
   since ``READ``, the usual case; else the URL id, the fingerprint owner, the template lengths
   used, the host's pages learned, a counter bumped whenever a stored original is replaced, and
   whether an original indexed since took a posting of one of the page's anchors) and records
   the page (id, record, index entry, what it taught, host counts); otherwise it answers
   ``retry`` and the worker starts again from 1.

So the decisions are those of the in-process detector run over the pages in the order their
commits happened, and two workers racing on one page index it once: the second commit finds the
fingerprint taken and retries into "exact duplicate".

Each piece is kept in Redis in the form that costs Redis least per page: appends of packed bytes,
few commands, no per-block or per-anchor fields.

**Anchor index.** Each original appends one entry to the crawl's *index log*: its id, where its
record is, and its anchors (those whose posting lists are not full yet). A worker keeps a copy of
the index (:class:`_Index`: the first :data:`~crawler.content.neardup.MAX_POSTING` postings of
each anchor, in commit order, and which originals are live), brought up to date from the log's
tail in every ``READ`` (or, far behind, in plain reads of its pieces), so ranking the candidates
costs Redis nothing and indexing an original one append instead of 16 hash writes.

**Template models.** Counting every block of every original in Redis (one hash field per block,
~12 bytes and ~1 us of server time each, ~90 blocks per real page) was most of the store's bytes
and time. A host's model lives in Redis as a log: each page that taught it, as its distinct
blocks not yet template (sorted, gap-packed), and at every pruning of the model (each
:data:`~crawler.content.template.PRUNE_EVERY` pages, where the model is smallest) a *snapshot*
of the model (the blocks counted and their counts) that replaces the log so far. A worker keeps
its own copy of the models of the hosts it checks and brings it up to date from the ``READ``
reply (the log entries since its copy's version, or the snapshot and the log); it learns a page
there and sends ``COMMIT`` the page's log entry, the blocks it made template and, at a pruning,
the new snapshot. Redis does a few appends per page whatever the page's size; a worker replays
the pages other workers taught of the hosts it checks.

**Records.** An original's record is packed (gaps of its sketch in the bits the largest needs,
each entry's block as an index into the page's table of blocks in as few bits, the URL without
``scheme://host``) and appended to a heap of fixed-size strings, allocated whole so nothing is
lost to a string's doubling or to a hash table's per-entry overhead; a table of 8 bytes per id
(offset and length) finds it. A worker keeps the records it decoded (the heap never changes what
it holds) and asks ``READ`` only for the others.

Layout (``{key}:nd:...``; the small hashes are bucketed so they stay in Redis's compact listpack
encoding):

========================  ==================================================================
``:u:<n>``                HASH: 8 bytes of blake2b(URL) -> id (originals and duplicates)
``:f:<n>``                HASH: 8 bytes of the content fingerprint -> id of its original
``:l:<n>``                STRING: the index log, :data:`_CHUNK` bytes each: per original stored
                          its id (4), record offset (5) and length (3), anchors (count, 4 bytes
                          each); per original replaced, its id and zeros
``:o:<id/508>``           STRING: per id, the offset (5 bytes) and length (3 bytes) of its
                          record in the heap; zeros: none (duplicates, replaced originals)
``:r:<n>``                STRING: the heap, :data:`_CHUNK` bytes each; a record is fingerprint
                          (8), host id (4), URL (length, then a byte saying which of
                          ``http://host``, ``https://host`` or nothing it lacks, then the rest),
                          title, cover and the packed sketch (:func:`encode_sketch`)
``:h``/``:hn``/``:hnext`` HASH host -> host id, its reverse, and the last id given
``:t:<hid>``              STRING: the host's template blocks (4 bytes each), in the order learned
``:tp``                   HASH: host id -> pages its model learned x 2^24 + template length
``:ts:<hid>``             STRING: the model's snapshot at its last pruning (pages, template
                          length, blocks counted once and more than once, gap-packed, counts)
``:tl:<hid>``             LIST: the pages learned since the snapshot, each its packed blocks
``:hc``                   HASH: host -> pages checked x 2^26 + duplicates among them (the
                          frontier's penalty, shared)
``:v``                    HASH: ``seq`` (commits so far: the order decisions are equivalent
                          to), ``forget`` (originals replaced so far), ``log`` and ``heap``
                          (bytes of each used)
``:next``                 the last id given
``:params``               the settings every worker must share
========================  ==================================================================

``bench/shared.py`` measures the decisions against the in-process detector, Redis server time
per page and bytes per document.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import redis

from crawler.config import defaults
from crawler.content.neardup import (
    ANCHORS,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    MAX_POSTING,
    Candidate,
    Decision,
    Features,
    block_hash,
    compute_features,
    decide,
    merge_postings,
    pick_best,
    rank_candidates,
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
_FILL = 64  # entries aimed at per listpack bucket (a lookup reads it all; Redis converts one
# past 512, so a bucket stays compact up to 8 times the capacity)
# A heap string of 16,378 bytes is one 16 KiB allocation (with its 5-byte header and the
# terminating zero); a record table string of 508 entries of 8 bytes, one 4 KiB allocation.
_CHUNK = 16_378
_SLOTS = 508
_DECODED = 8192  # decoded candidate records a worker keeps (siblings come back as candidates)
_TAIL = 1 << 18  # index log bytes READ sends at most; a worker further behind reads pieces
_MERGE = 4096  # postings a worker keeps in a dict before merging them into sorted arrays
_NO_COVER = 0xFFFFFFFF

_COMMON = r"""
local P = ARGV[1]
local UB, FB = tonumber(ARGV[2]), tonumber(ARGV[3])
local HOSTS = 2 ^ 26  -- :hc packs a host's pages and duplicates as pages * HOSTS + duplicates
local SHIFT = 2 ^ 24  -- :tp packs a host's pages learned * SHIFT + its template length
local CHUNK, SLOTS = @CHUNK@, @SLOTS@
local function bucket(s, bits)  -- the top `bits` bits of a binary string's first 4 bytes
  local v = struct.unpack('>I4', s)
  return math.floor(v / 2 ^ (32 - bits))
end
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
local function tlens_of(hids)  -- the template lengths of several hosts: one HMGET
  local ask = {}
  for _, h in ipairs(hids) do
    if not metas[h] and h > 0 then ask[#ask + 1] = h end
  end
  if #ask > 0 then
    local got = redis.call('HMGET', P .. ':tp', unpack(ask))
    for i, h in ipairs(ask) do metas[h] = tonumber(got[i] or 0) end
  end
  local out = {}
  for i, h in ipairs(hids) do
    local _, n = meta(h)
    out[i] = n
  end
  return out
end
local function versions()  -- commits, originals replaced, bytes of the index log, so far
  local v = redis.call('HMGET', P .. ':v', 'seq', 'forget', 'log')
  return tonumber(v[1] or 0), tonumber(v[2] or 0), tonumber(v[3] or 0)
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
  return P .. ':o:' .. math.floor(id / SLOTS), (id % SLOTS) * 8
end
local function record(id)  -- the record of original `id`, or nil
  local key, at = slot(id)
  local e = redis.call('GETRANGE', key, at, at + 7)
  if #e < 8 then return nil end
  local hi, lo, len = struct.unpack('>I1I4I3', e)
  if len == 0 then return nil end
  return span(P .. ':r:', hi * 4294967296 + lo, len)
end
"""

READ = _COMMON + r"""
local uh, fp, host, hid = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local known, learned, logpos = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local wants, hosts, LIMIT = ARGV[11], ARGV[12], tonumber(ARGV[13])
if hid == 0 then hid = tonumber(redis.call('HGET', P .. ':h', host) or 0) end
local pages, tlen = meta(hid)
if tlen ~= known then  -- the worker's copy of the host's template is behind: send the rest
  local from = known
  if known > tlen then from = 0 end
  local rest = ''
  if hid > 0 and tlen > from then rest = redis.call('GETRANGE', P .. ':t:' .. hid, from * 4, -1) end
  return {'stale', hid, from, rest}
end
local seq, forget, loglen = versions()
if loglen - logpos > LIMIT then return {'behind', loglen} end  -- the worker reads it in pieces
-- the host's model: what the worker's copy (`learned` pages) lacks: the log entries after its
-- version, or the snapshot and the whole log (`base`: the version they follow)
local base, snap, log = 0, '', {}
if hid > 0 and pages ~= learned then
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
local own = tonumber(redis.call('HGET', P .. ':u:' .. bucket(uh, UB), uh) or 0)
local tail = ''  -- the index log since the worker's copy of it
if loglen > logpos then tail = span(P .. ':l:', logpos, loglen - logpos) end
local owner, orec = 0, ''
if fp ~= '' then
  owner = tonumber(redis.call('HGET', P .. ':f:' .. bucket(fp, FB), fp) or 0)
  if owner > 0 then orec = record(owner) or '' end
end
-- the candidates' records the worker has not decoded yet, and their hosts' template lengths
local recs, tls = {}, {}
if owner == 0 then
  local hids = {}
  for i = 1, #wants, 8 do
    local hi, lo, len = struct.unpack('>I1I4I3', wants, i)
    local rec = span(P .. ':r:', hi * 4294967296 + lo, len)
    recs[#recs + 1] = rec
    hids[#hids + 1] = struct.unpack('>I4', rec, 9)
  end
  for i = 1, #hosts, 4 do hids[#hids + 1] = struct.unpack('>I4', hosts, i) end
  for i, n in ipairs(tlens_of(hids)) do tls[i] = struct.pack('>I4I4', hids[i], n) end
end
return {'ok', hid, own, seq, forget, loglen, tail, owner, orec, recs, table.concat(tls),
        {pages, base, snap, log}}
"""

COMMIT = _COMMON + r"""
local action, uh, url, host, fp = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local own_seen, owner_seen = tonumber(ARGV[9]), tonumber(ARGV[10])
local forget_seen, logpos = tonumber(ARGV[11]), tonumber(ARGV[12])
local anchors, lens, checks = ARGV[13], ARGV[14], ARGV[15]
local tlen_seen, payload, MAXP = tonumber(ARGV[16]), ARGV[17], tonumber(ARGV[18])
local learned, entry, made, snapshot = tonumber(ARGV[19]), ARGV[20], ARGV[21], ARGV[22]
local hid, seq_seen = tonumber(ARGV[23]), tonumber(ARGV[24])
local UKEY = P .. ':u:' .. bucket(uh, UB)

-- Everything the decision (and the worker's learning) read must be as it was: certainly so if
-- nothing was committed since (the usual case), else each of it is compared.
local seq, forget, loglen = versions()
if seq ~= seq_seen then
  if hid == 0 then hid = tonumber(redis.call('HGET', P .. ':h', host) or 0) end
  local pages, tlen = meta(hid)
  if tlen ~= tlen_seen then return {'retry'} end
  if learned >= 0 and pages ~= learned then return {'retry'} end  -- the worker's model
  if action ~= 'observe' then
    if tonumber(redis.call('HGET', UKEY, uh) or 0) ~= own_seen then return {'retry'} end
    if forget ~= forget_seen then return {'retry'} end  -- a candidate may have gone
    if fp ~= '' then
      local owner = tonumber(redis.call('HGET', P .. ':f:' .. bucket(fp, FB), fp) or 0)
      if owner ~= owner_seen then return {'retry'} end
    end
    local hids, seen = {}, {}
    for i = 1, #checks, 8 do
      hids[#hids + 1], seen[#seen + 1] = struct.unpack('>I4I4', checks, i)
    end
    for i, n in ipairs(tlens_of(hids)) do
      if n ~= seen[i] then return {'retry'} end
    end
    if loglen ~= logpos and #anchors > 0 then
      -- originals indexed since: did one take a posting of an anchor of this page (one with
      -- fewer than MAXP postings, whose list it would change)?
      local mine = {}
      for i = 1, #anchors / 4 do
        if string.byte(lens, i) < MAXP then mine[string.sub(anchors, 4 * i - 3, 4 * i)] = true end
      end
      local tail, pos = span(P .. ':l:', logpos, loglen - logpos), 1
      while pos <= #tail do
        local n = string.byte(tail, pos + 12)
        for j = pos + 13, pos + 9 + 4 * n, 4 do
          if mine[string.sub(tail, j, j + 3)] then return {'retry'} end
        end
        pos = pos + 13 + 4 * n
      end
    end
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

local function append(prefix, field, data)  -- at the end of a string kept in CHUNK-byte pieces,
  local off = redis.call('HINCRBY', P .. ':v', field, #data) - #data  -- each allocated whole
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
    append(P .. ':l:', 'log', struct.pack('>I4I1I4I3I1', id, 0, 0, 0, 0))
  end
end
if action == 'new' then
  local h = host_id()
  local data = fp .. struct.pack('>I4', h) .. url .. payload
  local off = append(P .. ':r:', 'heap', data)
  local hi, lo = math.floor(off / 4294967296), off % 4294967296
  local key, at = slot(id)
  redis.call('SETRANGE', key, at, struct.pack('>I1I4I3', hi, lo, #data))
  redis.call('HSET', P .. ':f:' .. bucket(fp, FB), fp, id)
  local kept = {}  -- the anchors whose lists are not full yet get this original
  for i = 1, #anchors / 4 do
    if string.byte(lens, i) < MAXP then kept[#kept + 1] = string.sub(anchors, 4 * i - 3, 4 * i) end
  end
  append(P .. ':l:', 'log',
         struct.pack('>I4I1I4I3I1', id, hi, lo, #data, #kept) .. table.concat(kept))
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


class _Index:
    """This worker's copy of the crawl's index log: where each original's record is in the heap
    (length 0: none, as for a replaced original) and each anchor's postings, the ids of the
    originals that listed it, in commit order (those past :data:`MAX_POSTING` never count, so
    the log does not carry them)."""

    def __init__(self) -> None:
        self.position = 0  # bytes of the log applied
        self.offset = np.zeros(256, np.int64)
        self.length = np.zeros(256, np.uint32)
        self._keys = np.empty(0, np.uint32)  # postings merged so far, sorted by anchor
        self._docs = np.empty(0, np.uint32)
        self._buffer: dict[int, list[int]] = {}  # the latest, merged every _MERGE
        self._buffered = 0

    def apply(self, data: bytes) -> None:
        """Apply log entries: id (4 bytes), record offset (5) and length (3), anchors (count,
        4 bytes each)."""
        pos, end = 0, len(data)
        buffer = self._buffer
        while pos < end:
            doc = int.from_bytes(data[pos : pos + 4], "big")
            n = data[pos + 12]
            if doc >= len(self.length):
                size = max(doc + 1, len(self.length) * 2)
                self.offset = np.concatenate((self.offset, np.zeros(size - len(self.offset),
                                                                    np.int64)))
                self.length = np.concatenate((self.length, np.zeros(size - len(self.length),
                                                                    np.uint32)))
            self.offset[doc] = int.from_bytes(data[pos + 4 : pos + 9], "big")
            self.length[doc] = int.from_bytes(data[pos + 9 : pos + 12], "big")
            for anchor in np.frombuffer(data, ">u4", n, pos + 13).tolist():
                posting = buffer.get(anchor)
                if posting is None:
                    buffer[anchor] = [doc]
                else:
                    posting.append(doc)
            self._buffered += n
            pos += 13 + 4 * n
        self.position += end
        if self._buffered >= _MERGE:
            self._merge()

    def _merge(self) -> None:
        self._keys, self._docs = merge_postings(
            self._keys, self._docs, self._buffer, self._buffered, np.uint32
        )
        self._buffer.clear()
        self._buffered = 0

    def postings(self, anchors: np.ndarray) -> list[list[int]]:
        """The first :data:`MAX_POSTING` postings of each anchor, in commit order."""
        out: list[list[int]] = []
        keys, docs = self._keys, self._docs
        lo = np.searchsorted(keys, anchors, "left").tolist()
        hi = np.searchsorted(keys, anchors, "right").tolist()
        for a, b, anchor in zip(lo, hi, anchors.tolist(), strict=True):
            posting = docs[a : min(b, a + MAX_POSTING)].tolist()
            if len(posting) < MAX_POSTING:
                posting.extend(self._buffer.get(anchor, ())[: MAX_POSTING - len(posting)])
            out.append(posting)
        return out

    def alive(self, doc: int) -> bool:
        return doc < len(self.length) and bool(self.length[doc])

    def where(self, doc: int) -> tuple[int, int]:
        return int(self.offset[doc]), int(self.length[doc])


@dataclass(slots=True)
class _Record:
    """A decoded original: its host id, the head of its record (for its URL), its sketch."""

    hid: int
    head: bytes
    title: int
    sketch: np.ndarray
    blocks: np.ndarray
    cover: int


class RedisNearDuplicateDetector:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend (built by
    ``crawler.backends.redis.stores.RedisNearDuplicateStore``): the detector's interface, its state
    in
    Redis, shared by every worker. Two round trips per page (more when a host's template grew
    since this worker last looked, or other workers' commits changed the candidates). Not
    thread-safe: one thread at a time; ``runs_in_thread`` lets the pipeline (and the spider's
    link-demotion question) use the crawl's content thread, so the round trips do not hold up
    the reactor."""

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
        self.table_bits = _bits(capacity)
        self._read = client.register_script(_script(READ))
        self._commit = client.register_script(_script(COMMIT))
        self._hids: dict[str, int] = {}  # host -> host id in Redis (never changes)
        self._names: dict[int, str] = {}  # host id -> host
        self._templates: dict[int, _Template] = {}  # host id -> this worker's copy
        self._models = HostTemplates()  # this worker's copies of the hosts' models
        self._index = _Index()  # this worker's copy of the index log
        self._records: OrderedDict[int, _Record] = OrderedDict()  # heap offset -> record
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
            anchors = f.sketch[:ANCHORS]
            compares = bool(f.words and len(f.sketch))
            # the candidates as this worker's copy of the index ranks them (the page's own id
            # unknown yet: one more); READ sends the records this worker lacks
            ranked = (rank_candidates(self._index.postings(anchors), None, self._index.alive)
                      if compares else [])
            wants, hosts, offsets = self._wants(ranked)
            reply = self._read(args=[
                self.prefix, self.table_bits, self.table_bits, uh, fp, host, hid, version,
                self._models.pages(host), self._index.position, wants, hosts, _TAIL,
            ])
            if self._out_of_date(reply, host):
                continue
            (_, hid_now, own, seq, forget, loglen, tail, owner, owner_rec, records, lengths,
             model) = reply
            hid = int(hid_now)
            if hid:
                self._hids[host] = hid
            self._follow(host, hid, model)
            self._index.apply(tail)
            if self._index.position != int(loglen):
                raise RuntimeError("index log copy out of step")
            for off, rec in zip(offsets if not int(owner) else [], records, strict=True):
                self._keep(off, rec)  # (none when the fingerprint has an owner)
            own, owner = int(own), int(owner)
            candidates: list[Candidate] = []
            checks = b""
            heads: dict[int, bytes] = {owner: owner_rec}
            postings: list[list[int]] = []
            if compares and not owner:
                postings = self._index.postings(anchors)
                ranked = rank_candidates(postings, own or None, self._index.alive)
                found = self._candidates(hid, ranked, lengths)
                if found is None:  # other workers' commits changed the ranking: read again
                    continue
                candidates, checks = found
                heads.update((c.doc, self._records[self._index.where(c.doc)[0]].head)
                             for c in candidates)
            own_template = self._templates[hid].array() if hid in self._templates else _EMPTY
            outcome = decide(
                f, own or None, owner or None,
                lambda doc, heads=heads: self._url(heads[doc]),  # type: ignore[misc]
                functools.partial(_best, f, title_id, candidates, own_template, self.threshold),
                self.threshold,
            )
            if not add:
                return outcome.decision
            action = outcome.action
            lesson = (self._learn(host, f.blocks)
                      if action == "new" or outcome.teaches else None)
            lens = bytes(min(len(p), MAX_POSTING) for p in postings)
            result = self._commit(args=[
                self.prefix, self.table_bits, self.table_bits, action, uh, _url_part(url, host),
                host, fp, own, owner, int(forget), int(loglen),
                anchors.astype(">u4").tobytes() if lens else b"", lens, checks, version,
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
                self.prefix, self.table_bits, self.table_bits, b"\0" * 8, b"", host, hid,
                version, self._models.pages(host), self._index.position, b"", b"", _TAIL,
            ])
            if self._out_of_date(reply, host):
                continue
            hid = int(reply[1])
            if hid:
                self._hids[host] = hid
            self._follow(host, hid, reply[11])
            self._index.apply(reply[6])
            lesson = self._learn(host, blocks)
            result = self._commit(args=[
                self.prefix, self.table_bits, self.table_bits, "observe", b"\0" * 8, b"", host,
                b"", 0, 0, 0, 0, b"", b"", b"", version, b"", MAX_POSTING,
                *_lesson_args(lesson), hid, int(reply[3]),
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

    def _learn(self, host: str, blocks: list[int]) -> _Lesson:
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

    def _out_of_date(self, reply: list[Any], host: str) -> bool:
        """True when the script refused to read because this worker's copy is behind (the
        host's template model is stale, or the anchor log has moved on); the copy is brought up
        to date here and the read must be asked again."""
        if reply[0] == b"stale":
            self._learned(host, int(reply[1]), int(reply[2]), reply[3])
            return True
        if reply[0] == b"behind":
            self._catch_up(int(reply[1]))
            return True
        return False

    def _catch_up(self, length: int) -> None:
        """Read the index log up to ``length`` bytes in pieces (plain reads, not one long
        script): a worker that starts late, or was idle long."""
        start = self._index.position
        pipe = self.client.pipeline(transaction=False)
        pieces = range(start // _CHUNK, (length + _CHUNK - 1) // _CHUNK)
        for k in pieces:
            lo = max(start, k * _CHUNK) - k * _CHUNK
            hi = min(length, (k + 1) * _CHUNK) - k * _CHUNK
            pipe.getrange(f"{self.prefix}:l:{k}", lo, hi - 1)
        self._index.apply(b"".join(pipe.execute()))

    def _wants(self, ranked: list[int]) -> tuple[bytes, bytes, list[int]]:
        """For ``READ``: where the ranked candidates' records this worker has not decoded are,
        the hosts of those it has (for their template lengths), and the records' offsets."""
        wants, hosts, offsets = [], set(), []
        for doc in ranked:
            off, length = self._index.where(doc)
            rec = self._records.get(off)
            if rec is not None:
                self._records.move_to_end(off)
            if rec is None:
                wants.append(struct.pack(">BIBH", off >> 32, off & 0xFFFFFFFF,
                                         length >> 16, length & 0xFFFF))
                offsets.append(off)
            else:
                hosts.add(rec.hid)
        return b"".join(wants), b"".join(h.to_bytes(4, "big") for h in hosts), offsets

    def _keep(self, off: int, rec: bytes) -> None:
        """Decode a record ``READ`` sent and keep it under its heap offset (the heap never
        changes what it holds)."""
        n = int.from_bytes(rec[12:14], "big")
        title, sketch, blocks, cover = decode_sketch(rec, 14 + n)
        self._records[off] = _Record(int.from_bytes(rec[8:12], "big"), rec[: 14 + n], title,
                                     sketch, blocks, cover)
        if len(self._records) > _DECODED:
            self._records.popitem(last=False)

    def _candidates(
        self, hid: int, ranked: list[int], lengths: bytes
    ) -> tuple[list[Candidate], bytes] | None:
        """The ranked candidates from the decoded records, their hosts' templates brought up
        to date (one pipelined round trip when some grew), and which lengths the decision used;
        None if a record or a host's template length is missing."""
        tlens = dict(struct.iter_unpack(">II", lengths))
        picked = []
        for doc in ranked:
            rec = self._records.get(self._index.where(doc)[0])
            if rec is None or (rec.hid != hid and rec.hid not in tlens):
                return None
            self._records.move_to_end(self._index.where(doc)[0])
            picked.append((doc, rec))
        stale = {}
        for _, rec in picked:
            other = rec.hid
            have = len(self._templates[other]) if other in self._templates else 0
            if other != hid and have < tlens[other]:
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
        for doc, rec in picked:
            template = None
            if rec.hid != hid:
                copy = self._templates.get(rec.hid)
                template = copy.array() if copy is not None else _EMPTY
                used[rec.hid] = len(copy) if copy is not None else 0
            candidates.append(Candidate(doc, rec.sketch, rec.blocks, rec.cover, rec.title,
                                        template))
        checks = b"".join(struct.pack(">II", h, n) for h, n in used.items())
        return candidates, checks

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
