"""The shared near-duplicate detector's anchor index in Redis: each anchor's postings in small
bucketed hashes spread over hash tags of their own (so over the nodes of a Redis Cluster), read
and written by one script call per tag, so no worker keeps a copy of the index.

**Layout** (6). An anchor (a 32-bit hash, one of an original's :data:`ANCHORS` smallest) is
first *spread*: ``x = anchor * SPREAD mod 2**32`` (an odd multiplier: a bijection, so nothing is
lost). It lives in bucket ``x >> (32 - bits)`` (``bits`` from the crawl's
``NEARDUP_SHARED_CAPACITY``: ~64 fields a bucket, Redis's compact listpack), field
``x & (2**(32 - bits) - 1)`` written as a decimal integer (a listpack keeps it in 2-4 bytes),
of the hash ``{<crawl>:nd:<g>.<n>}:a:<bucket>`` where ``g = bucket % groups``: ``groups`` hash
tags (``FRONTIER_SHARDS``), each picked by :func:`~crawler.backends.redis.keys.shard_tag` to
fall in the g-th equal range of the cluster's slots, so G tags on G masters land one on each.

Why spread: an original's anchors are the smallest of its ~100-200 shingle hashes, so they lie
in the lowest ~15 % of the hash range; bucketed by their own top bits (layout 5) they filled
~3 buckets in 16, each ~5 times the fields aimed at, and past ``hash-max-listpack-entries``
a bucket becomes a hash table: measured with 30,000 originals of unique text, 376 B of postings
an original, 298 of them in such buckets (``bench/neardup_scale.py --bulk``).

**Postings.** A field's value is the anchor's first
:data:`~crawler.content.neardup_index.MAX_POSTING` postings, in the order the originals were
stored: each a 4-byte *store key* ``k`` (big-endian), allocated by the ``COMMIT`` that stored the
original from the crawl's id counter, so the keys grow in commit order; postings are kept sorted
by it whatever order the writes arrive in (two workers' writes race), and a write that finds its
key there does nothing, so writing one original's postings twice (a repair) is harmless. ``k``
is the original's id, except for an original stored again under an id it already had (a
refetched page that changed): then the element has its top bit set and carries the id after it
(8 bytes), as the in-process index lists such a page twice. Postings longer than
:data:`LONG` bytes (an anchor more than 16 originals share) move to a string of their own, so
a bucket stays in Redis's compact encoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from crawler.backends.redis.calls import ClusterScriptRunner, ScriptCall, ScriptRunner
from crawler.backends.redis.keys import glob_escape, shard_tag

ALIAS = 0x80000000  # top bit of a posting's store key: the original's id follows
REPAIR_LAG = 10_000  # ids after which a pending original's postings are written by any worker
LONG = 64  # bytes of postings kept in the bucket (Redis's hash-max-listpack-value default)
SPREAD = 0x9E3779B1  # odd (a bijection of 32-bit values): 2**32 / golden ratio, Knuth's multiplier

# ARGV: pairs of (bucket key, field); returns each field's postings ('' for none).
# ARGV: pairs of (bucket key, field); returns each field's postings ('' for none). A posting
# longer than LONG bytes lives in a string of its own (``<bucket key>:<field>``), the field
# holding 'L': one long value would turn the whole bucket from Redis's compact listpack into a
# hash table (``hash-max-listpack-value``, 64), ~3 times the bytes for every field in it.
GET = r"""
redis.call('EXISTS', KEYS[1])  -- a slot being moved refuses the script here
local out = {}
for i = 1, #ARGV, 2 do
  local v = redis.call('HGET', ARGV[i], ARGV[i + 1]) or ''
  if v == 'L' then v = redis.call('GET', ARGV[i] .. ':' .. ARGV[i + 1]) or '' end
  out[#out + 1] = v
end
return out
"""

# ARGV: MAXP, the element (4 or 8 bytes), the crawl's :pend key (on a single server, '' on a
# cluster), then pairs of (bucket key, field): the element goes into each field's postings at
# its place by store key, unless already there or past MAXP; on a single server the original
# is taken off :pend in the same script (no window where it is in neither). A field written
# '+<field>' had no postings when the worker read it: HSETNX makes it the element's alone in
# one command (most anchors of a page of its own text), else it is merged as any other.
WRITE = r"""
-- put_postings(MAXP, elem, first, last): the element into the postings of each (bucket key,
-- field) pair of ARGV[first..last]; its store key (the id of the original).
-- long_key(bucket key, field): the string a long posting lives in (its bucket key is given whole
-- by the worker, on an anchor tag: never one of the crawl tag's keys)
local function long_key(key, field) return table.concat({key, field}, ':') end
local function put_postings(MAXP, elem, first, last)
  local mine = struct.unpack('>I4', elem) % 2147483648
  local function put(key, field)  -- into one field's postings
    local v = redis.call('HGET', key, field) or ''
    local long = v == 'L'
    if long then v = redis.call('GET', long_key(key, field)) or '' end
    local pos, count, at, last_at = 1, 0, nil, nil
    while pos <= #v do
      local x = struct.unpack('>I4', v, pos)
      local k = x % 2147483648
      if k == mine then return end
      if at == nil and k > mine then at = pos end
      count, last_at = count + 1, pos
      if x >= 2147483648 then pos = pos + 8 else pos = pos + 4 end
    end
    if at == nil and count >= MAXP then return end
    if at == nil then
      v = v .. elem
    else
      v = string.sub(v, 1, at - 1) .. elem .. string.sub(v, at)
      if count + 1 > MAXP then v = string.sub(v, 1, last_at - 1 + #elem) end
    end
    if #v > @LONG@ then
      redis.call('SET', long_key(key, field), v)
      if not long then redis.call('HSET', key, field, 'L') end
    else
      redis.call('HSET', key, field, v)
    end
  end
  for i = first, last, 2 do
    local key, field = ARGV[i], ARGV[i + 1]
    if string.byte(field, 1) ~= 43 then
      put(key, field)
    else  -- '+': no postings when the worker read it: the element's alone, unless written since
      field = string.sub(field, 2)
      if redis.call('HSETNX', key, field, elem) == 0 then put(key, field) end
    end
  end
  return mine
end
""".replace("@LONG@", str(LONG))

PUT = r"""
redis.call('EXISTS', KEYS[1])  -- a slot being moved refuses the script before any write
""" + WRITE + r"""
local mine = put_postings(tonumber(ARGV[1]), ARGV[2], 4, #ARGV)
if ARGV[3] ~= '' then redis.call('HDEL', ARGV[3], mine) end
return 1
"""



def element(k: int, doc: int) -> bytes:
    """A posting: store key ``k`` of original ``doc`` (one and the same but for a page stored
    again)."""
    if k == doc:
        return k.to_bytes(4, "big")
    return (k | ALIAS).to_bytes(4, "big") + doc.to_bytes(4, "big")


def parse(value: bytes) -> list[tuple[int, int]]:
    """(store key, original id) of each posting of a field's value."""
    out, pos, end = [], 0, len(value)
    while pos < end:
        (x,) = struct.unpack_from(">I", value, pos)
        if x & ALIAS:
            out.append((x & ~ALIAS, int.from_bytes(value[pos + 4 : pos + 8], "big")))
            pos += 8
        else:
            out.append((x, x))
            pos += 4
    return out


def merge(
    stored: Sequence[bytes], anchors: Sequence[int], pending: Iterable[tuple[int, int, set[int]]],
    limit: int,
) -> list[list[tuple[int, int]]]:
    """Each anchor's postings as the crawl's commit order has them: those Redis holds (its
    ``stored`` values) and those of the originals committed whose postings may not be written
    yet (``pending``: store key, id, anchors), by store key, at most ``limit``."""
    lists = [parse(v) for v in stored]
    extra = [p for p in pending if p[2]]
    if extra:
        for i, anchor in enumerate(anchors):
            more = [(k, doc) for k, doc, owned in extra if anchor in owned]
            if more:
                have = {k for k, _ in lists[i]}
                lists[i] = sorted(lists[i] + [m for m in more if m[0] not in have])
    return [p[:limit] for p in lists]


class AnchorKeys:
    """Where each anchor of the crawl ``crawl`` lives (see the module): ``groups`` hash tags,
    buckets of ``bits`` bits."""

    def __init__(self, crawl: str, groups: int, bits: int) -> None:
        if groups < 1:
            raise ValueError("the anchor index has at least one group")
        self.groups, self.bits = groups, bits
        self.tags = ["{" + shard_tag(crawl + ":nd", g, groups) + "}" for g in range(groups)]
        self.probes = [tag + ":a:probe" for tag in self.tags]  # never written: routes a call
        self._shift = 32 - bits
        self._mask = (1 << self._shift) - 1

    def place(self, anchor: int) -> tuple[int, str, str]:
        """(group, bucket key, field) of an anchor (spread: see the module)."""
        x = anchor * SPREAD & 0xFFFFFFFF
        bucket = x >> self._shift
        g = bucket % self.groups
        return g, f"{self.tags[g]}:a:{bucket}", str(x & self._mask)

    def by_group(self, anchors: Iterable[int]) -> dict[int, list[tuple[int, str, str]]]:
        """The anchors' (index, bucket key, field) by group, in the anchors' order."""
        out: dict[int, list[tuple[int, str, str]]] = {}
        for i, anchor in enumerate(anchors):
            g, key, field = self.place(anchor)
            out.setdefault(g, []).append((i, key, field))
        return out

    def patterns(self) -> list[str]:
        """SCAN patterns of every anchor bucket."""
        return [glob_escape(tag) + ":a:*" for tag in self.tags]


def get_args(places: list[tuple[int, str, str]]) -> list[Any]:
    return [x for _, key, field in places for x in (key, field)]


class AnchorPostings:
    """A worker's calls on the anchor postings: read them after ``READ`` (see
    ``crawler.backends.redis.neardup``), write an original's, and say which it wrote."""

    def __init__(
        self, client: Any, keys: AnchorKeys, runner: ScriptRunner, limit: int, pending: str
    ) -> None:
        self.keys, self.limit, self.pending_key = keys, limit, pending
        self._runner = runner
        self._cluster = isinstance(runner, ClusterScriptRunner)
        self._get = client.register_script(GET)
        self._put = client.register_script(PUT)
        self._done: list[int] = []  # store keys whose postings this worker wrote since READ
        self._queued: list[ScriptCall] = []  # PUTs to send before the next READ
        self._queued_keys: list[int] = []  # (which take their originals off :pend themselves)
        self.repaired = 0  # pending originals whose postings this worker wrote for another

    def take_done(self) -> bytes:
        """The store keys whose postings this worker wrote, for ``READ`` to take off ``:pend``."""
        done, self._done = self._done, []
        return b"".join(k.to_bytes(4, "big") for k in done)

    def _calls(self, script: Any, head: list[Any], anchors: list[int], write: bool,
               fresh: Sequence[bool] = ()) -> tuple[list[ScriptCall],
                                                    list[list[tuple[int, str, str]]]]:
        """The calls on ``anchors``' postings: one per tag on a cluster, else one (a single
        server runs a script over keys of any tag), and the places each call covers."""
        groups = self.keys.by_group(anchors)
        if fresh:  # PUT's hint: these had no postings when read
            groups = {g: [(i, key, "+" + field if fresh[i] else field) for i, key, field in ps]
                      for g, ps in groups.items()}
        if not self._cluster:
            places = [[p for ps in groups.values() for p in ps]]
            probes = [self.keys.probes[0]]
        else:
            places = list(groups.values())
            probes = [self.keys.probes[g] for g in groups]
        calls = [ScriptCall(script, [probe], [*head, *get_args(ps)], write)
                 for probe, ps in zip(probes, places, strict=True)]
        return calls, places

    def read(self, read: ScriptCall, anchors: list[int]) -> tuple[list[Any], list[bytes]]:
        """``READ``'s reply, and the page's anchors' postings read after it: on a single Redis
        by ``READ`` itself (given their places; not for an exact copy, which needs none), which
        first writes the postings this worker queued (``PUT``'s work: one call a page); on a
        cluster ``READ`` first, then one ``GET`` per tag."""
        puts = self._queued
        read.write = bool(read.args[-1])
        stored: list[bytes] = [b""] * len(anchors)
        if not self._cluster:
            places = [p for ps in self.keys.by_group(anchors).values() for p in ps]
            writes: list[Any] = []  # the queued PUTs, written by READ itself
            for put in puts:
                limit, elem, _, *pairs = put.args
                writes += [limit, elem, len(pairs) // 2, *pairs]
            read.args = [*read.args, len(writes), *writes, *get_args(places)]
            read.write = read.write or bool(puts)
            reply = self._runner.run_many([read])[0]
            self._queued, self._queued_keys = [], []
            if reply[0] == b"ok":
                for (i, _, _), v in zip(places, reply[10], strict=False):
                    stored[i] = v
            return reply, stored
        calls, places = self._calls(self._get, [], anchors, False) if anchors else ([], [])
        reply = self._runner.run(read)
        if not calls or reply[0] != b"ok" or int(reply[7]):  # out of date, or exact
            return reply, stored
        outs = self._runner.run_many(calls)
        for ps, values in zip(places, outs, strict=True):
            for (i, _, _), v in zip(ps, values, strict=True):
                stored[i] = v
        return reply, stored

    def write(self, k: int, elem: bytes, anchors: list[int], fresh: Sequence[bool] = ()) -> None:
        """``PUT`` an original's postings on every tag its anchors live on: on a single Redis
        by this worker's next ``READ`` (one round trip and one call less a page; meanwhile
        every worker merges it from ``:pend``), on a cluster at once. ``fresh``: which anchors
        had no postings when the worker read them (a hint: ``PUT`` tries those with one
        ``HSETNX``)."""
        if not self._cluster:
            calls, _ = self._calls(self._put, [self.limit, elem, self.pending_key], anchors, True,
                                   fresh)
            self._queued += calls
            self._queued_keys.append(k)
            return
        calls, _ = self._calls(self._put, [self.limit, elem, ""], anchors, True, fresh)
        self._runner.run_many(calls)
        self._done.append(k)  # the next READ takes it off :pend, once the PUT was answered

    def flush(self) -> bytes:
        """Write the postings still queued; the store keys still to take off ``:pend``."""
        if self._queued:
            self._runner.run_many(self._queued)
            self._queued, self._queued_keys = [], []
        return self.take_done()

    def pending(self, values: list[bytes], next_id: int) -> list[tuple[int, int, set[int]]]:
        """The pending originals ``READ`` sent: (store key, id, anchors). One left pending
        :data:`REPAIR_LAG` ids ago (its worker died before ``PUT``) gets its postings written."""
        out = []
        for v in values:
            (x,) = struct.unpack_from(">I", v)
            k = x & ~ALIAS
            size = 8 if x & ALIAS else 4
            doc = int.from_bytes(v[4:8], "big") if size == 8 else k
            owned = np.frombuffer(v, ">u4", offset=size).tolist()
            out.append((k, doc, set(owned)))
            if k + REPAIR_LAG < next_id and k not in self._done and k not in self._queued_keys:
                self.write(k, v[:size], owned)
                self.repaired += 1
        return out


def ranked(postings: list[list[tuple[int, int]]], own: int) -> list[int]:
    """Every original the postings vote for but the page's own, most votes first, then the
    earliest stored: :func:`~crawler.content.neardup_decide.rank_candidates`'s order before it
    keeps the live ones (``PICK`` does, on Redis's record table)."""
    votes: dict[int, int] = {}
    for posting in postings:
        for _, doc in posting:
            votes[doc] = votes.get(doc, 0) + 1
    votes.pop(own, None)
    return sorted(votes, key=lambda d: (-votes[d], d))
