"""Near-duplicates shared by every worker of a crawl: one atomic Lua call per page on Redis.

:class:`RedisNearDuplicateDetector` answers exactly what :class:`NearDuplicateDetector` answers
(same normalization, fingerprint, MinHash, LSH bands tuned below the threshold and a verified
similarity), but its index lives in Redis under the crawl's hash tag, so a mirror is caught
whichever worker fetched the original. The MinHash is computed in the worker; the rest of the
decision (exact table, LSH candidates, verification, and recording the page as an original or
a duplicate) is **one** ``EVALSHA``: two workers given the same page at the same moment are
serialized by Redis, and the second is told it is a duplicate of the first.

Layout (``{key}:nd:...``), sized for ``capacity`` pages so that the small hashes stay in Redis's
compact listpack encoding (at most 512 fields of at most 64 bytes, Redis's defaults):

==================  ======================================================================
``:nd:b:<n>``       HASH, LSH bands: 4-byte band hash -> the 4-byte ids of the originals in
                    that bucket (a band hash mixes the band's index and its rows)
``:nd:f:<n>``       HASH: 8 bytes of the content fingerprint -> id of the original
``:nd:u:<n>``       HASH: 8 bytes of blake2b(URL) -> id (a refetched URL replaces its entry)
``:nd:d:<n>``       HASH: id -> flag, fingerprint (8 B), signature, URL
``:nd:hp``/``:hd``  HASH: host -> pages checked / duplicates among them (the frontier's
                    per-host penalty, shared)
``:nd:next``        the last id given out; ``:nd:params`` what every worker must agree on
==================  ======================================================================

The signature kept for verification is a *b-bit* MinHash (Li and König): the low 8 bits of each
of the ``num_perm`` values, 1 byte instead of 4 per permutation. Two different values agree on
8 bits by chance 1 time in 256, which the estimate removes:
``J = (agree - 1/256) / (1 - 1/256)``. ``bench/neardup.py --only shared`` measures precision
and recall against the in-process detector on the labelled set, the calls per second and the
bytes per document.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import redis

from crawler import defaults
from crawler.content.neardup import (
    DEFAULT_CANDIDATE_RECALL,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    MIN_WORDS,
    Decision,
    NearDuplicateDetector,
)
from crawler.content.normalize import content_fingerprint, normalize_text

__all__ = ["RedisNearDuplicateDetector"]

LAYOUT = 1
DEFAULT_CAPACITY = defaults.NEARDUP_SHARED_CAPACITY
HOST_TTL = 10.0  # seconds a worker trusts its copy of a host's duplicate counts
_FILL = 256  # entries aimed at per listpack bucket (Redis converts one past 512)
# Odd 64-bit constants that mix a band's row values into one hash (multiply-add, then fold).
_MIX = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
     0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
    dtype=np.uint64,
)

CHECK = r"""
local P = ARGV[1]
local BB, FB, UB = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local url, uh, host, fp = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local sig, bands = ARGV[9], ARGV[10]
local add, threshold = ARGV[11] == '1', tonumber(ARGV[12])

local function bucket(s, bits)  -- the top `bits` bits of a binary string's first 4 bytes
  local v = struct.unpack('>I4', s)
  return math.floor(v / 2 ^ (32 - bits))
end
local UKEY = P .. ':u:' .. bucket(uh, UB)
local FKEY = P .. ':f:' .. bucket(fp, FB)
local function dkey(id) return P .. ':d:' .. math.floor(id / 128) end

local function count(dup)
  if not add then return end
  redis.call('HINCRBY', P .. ':hp', host, 1)
  if dup then redis.call('HINCRBY', P .. ':hd', host, 1) end
end
local function host_counts()
  local r = redis.call('HMGET', P .. ':hp', host)[1]
  local d = redis.call('HMGET', P .. ':hd', host)[1]
  return {tonumber(r or 0), tonumber(d or 0)}
end
local function url_of(id)
  local rec = redis.call('HGET', dkey(id), id)
  return string.sub(rec, 10 + string.byte(rec, 10) + 1)
end
-- record: flag (1: original with content, 0: none) .. fp (8) .. siglen (1) .. sig .. url
local function forget(own)  -- a refetched URL drops what it said before
  local rec = redis.call('HGET', dkey(own), own)
  if rec and string.byte(rec, 1) == 1 then
    local old = string.sub(rec, 2, 9)
    local okey = P .. ':f:' .. bucket(old, FB)
    if tonumber(redis.call('HGET', okey, old)) == own then redis.call('HDEL', okey, old) end
  end
end
local known = {}  -- band hash -> ids read by the candidate search, reused to insert
local function record(own, content)
  local id = own
  if not id then
    id = redis.call('INCR', P .. ':next')
    redis.call('HSET', UKEY, uh, id)
  else
    forget(own)
  end
  if content then
    redis.call('HSET', dkey(id), id, '\1' .. fp .. string.char(#sig) .. sig .. url)
    redis.call('HSET', FKEY, fp, id)
    local packed = struct.pack('>I4', id)
    for i = 1, #bands, 4 do
      local h = string.sub(bands, i, i + 3)
      local key = P .. ':b:' .. bucket(h, BB)
      local ids = known[h] or redis.call('HGET', key, h) or ''
      redis.call('HSET', key, h, ids .. packed)
    end
  else
    redis.call('HSET', dkey(id), id, '\0' .. string.rep('\0', 8) .. '\0' .. url)
  end
  return id
end

local own = tonumber(redis.call('HGET', UKEY, uh))
if fp == '' then  -- no text
  if add then record(own, false); count(false) end
  return {'empty', '', '', host_counts()}
end
local owner = tonumber(redis.call('HGET', FKEY, fp))
if owner and owner ~= own then
  local original = url_of(owner)
  if add then record(own, false); count(true) end
  return {'exact', original, '1.0', host_counts()}
end
if owner then  -- refetched, unchanged original
  count(false)
  return {'new', '', '', host_counts()}
end
if #sig > 0 then
  local n = #sig
  local best, best_id = -1, nil
  local tried = {}
  for i = 1, #bands, 4 do
    local h = string.sub(bands, i, i + 3)
    local ids = redis.call('HGET', P .. ':b:' .. bucket(h, BB), h)
    known[h] = ids or ''
    if ids then
      for j = 1, #ids, 4 do
        local c = struct.unpack('>I4', ids, j)
        if c ~= own and not tried[c] then
          tried[c] = true
          local rec = redis.call('HGET', dkey(c), c)
          if rec and string.byte(rec, 1) == 1 and string.byte(rec, 10) == n then
            local other = string.sub(rec, 11, 10 + n)
            local agree = 0
            for k = 1, n do
              if string.byte(sig, k) == string.byte(other, k) then agree = agree + 1 end
            end
            if agree > best or (agree == best and c < best_id) then best, best_id = agree, c end
          end
        end
      end
    end
  end
  if best_id then
    local sim = (best / n - 1 / 256) / (1 - 1 / 256)
    if sim >= threshold then
      local original = url_of(best_id)
      if add then record(own, false); count(true) end
      return {'near', original, tostring(sim), host_counts()}
    end
  end
end
if add then record(own, true); count(false) end
return {'new', '', '', host_counts()}
"""


def _bits(entries: float) -> int:
    """Bits of bucket number for ``entries`` fields at about ``_FILL`` per bucket."""
    return max(1, min(24, math.ceil(math.log2(max(2.0, entries / _FILL)))))


class RedisNearDuplicateDetector:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend (built by
    ``crawler.redis_backends.RedisNearDuplicateStore``): the detector's interface, its state in
    Redis. One round trip per page; thread-safe as far as redis-py's client is."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        shingle_size: int = DEFAULT_SHINGLE_SIZE,
        num_perm: int = DEFAULT_NUM_PERM,
        threshold: float = DEFAULT_THRESHOLD,
        candidate_recall: float = DEFAULT_CANDIDATE_RECALL,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self.client = client
        self.prefix = "{" + key + "}:nd"
        # the local detector computes the MinHash and the band design exactly as in-process
        self.local = NearDuplicateDetector(shingle_size, num_perm, threshold, candidate_recall)
        self.shingle_size, self.num_perm, self.threshold = shingle_size, num_perm, threshold
        self.bands, self.rows = self.local.bands, self.local.rows
        self.capacity = capacity
        self.band_bits = _bits(capacity * self.bands)
        self.table_bits = _bits(capacity)
        self._script = client.register_script(CHECK)
        self._hosts: dict[str, tuple[int, int, float]] = {}  # host -> (pages, dups, when)
        params = (
            f"layout={LAYOUT} shingles={shingle_size} perm={num_perm} threshold={threshold} "
            f"bands={self.bands}x{self.rows} capacity={capacity}"
        )
        stored = client.set(self.prefix + ":params", params, nx=True, get=True)
        if stored is not None and stored.decode() != params:
            raise ValueError(
                f"the crawl's shared near-duplicate index was built with {stored.decode()}; "
                f"this worker has {params} (NEARDUP_* settings must match)"
            )

    # --- the decision ---------------------------------------------------------------------

    def band_hashes(self, hashvalues: np.ndarray) -> bytes:
        """One 4-byte hash per LSH band (band index mixed in), concatenated."""
        rows = hashvalues[: self.bands * self.rows].astype(np.uint64).reshape(self.bands, self.rows)
        mixed = (rows * _MIX[: self.rows]).sum(axis=1, dtype=np.uint64)
        mixed += np.arange(self.bands, dtype=np.uint64) * np.uint64(0x2545F4914F6CDD1D)
        mixed ^= mixed >> np.uint64(29)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
        return (mixed >> np.uint64(32)).astype(">u4").tobytes()

    def check(self, url: str, text: str, *, add: bool = True) -> Decision:
        """As :meth:`NearDuplicateDetector.check`, against every worker's pages, atomically."""
        normalized = normalize_text(text)
        words = normalized.count(" ") + 1 if normalized else 0
        fingerprint = content_fingerprint(normalized) if normalized else content_fingerprint("")
        fp = bytes.fromhex(fingerprint)[:8] if normalized else b""
        sig = bands = b""
        if normalized and words >= MIN_WORDS:
            values = self.local.minhash(normalized).hashvalues
            sig = (values & 0xFF).astype(np.uint8).tobytes()
            bands = self.band_hashes(values)
        host = _host(url)
        kind, original, similarity, (pages, dups) = self._script(
            args=[
                self.prefix, self.band_bits, self.table_bits, self.table_bits, url,
                hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest(), host, fp, sig,
                bands, "1" if add else "0", repr(self.threshold),
            ]
        )
        self._hosts[host] = (int(pages), int(dups), time.monotonic())
        kind = kind.decode()
        if kind in ("new", "empty"):
            return Decision(fingerprint, kind=kind, words=words)
        sim = min(1.0, round(float(similarity), 4))
        return Decision(fingerprint, original.decode("utf-8"), sim, kind, words)

    # --- queries --------------------------------------------------------------------------

    def host_duplicate_ratio(
        self, host: str, min_pages: int = defaults.NEARDUP_HOST_MIN_PAGES
    ) -> float:
        """Share of ``host``'s checked pages that were duplicates, counted by every worker; a
        worker's copy is refreshed by its own checks and at most every ``HOST_TTL`` seconds."""
        cached = self._hosts.get(host)
        if cached is None or time.monotonic() - cached[2] > HOST_TTL:
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(self.prefix + ":hp", host)
            pipe.hget(self.prefix + ":hd", host)
            pages_raw, dups_raw = pipe.execute()
            cached = (int(pages_raw or 0), int(dups_raw or 0), time.monotonic())
            self._hosts[host] = cached
        pages, dups, _ = cached
        if pages < min_pages:
            return 0.0
        return dups / pages

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

    def memory(self) -> int:
        """Bytes Redis uses for this index (``MEMORY USAGE`` of each key; for benchmarks)."""
        total = 0
        for key in self.client.scan_iter(match=_glob(self.prefix) + ":*", count=1000):
            total += int(self.client.memory_usage(key, samples=0) or 0)
        return total


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
