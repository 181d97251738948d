"""The shared near-duplicate detector's anchor index in Redis: each anchor's postings in small
bucket strings on hash tags of their own (so over the nodes of a Redis Cluster), read with one
``MGET`` per tag and written with one ``APPEND`` per anchor, after the commit.

**Layout.** An anchor (a 32-bit hash, one of an original's :data:`ANCHORS` smallest) is first
*spread*, ``x = anchor * SPREAD mod 2**32`` (a bijection): an original's anchors lie in the
lowest ~15 % of the hash range, and bucketed by their own top bits would crowd a few buckets.
It lives in bucket ``x >> (32 - bits)`` (~64 postings a bucket at the crawl's capacity), under
the *field* ``x & (2**(32 - bits) - 1)``, in the string ``{<crawl>:nd:<g>.<n>}:a:<bucket>``,
``g = bucket % groups`` (``FRONTIER_SHARDS`` tags, each picked by
:func:`~crawler.backends.redis.keys.shard_tag` to fall on its own master).

**Postings.** A bucket is a log of entries, big-endian: the field (4 bytes) and the posting
element: the original's *store key* (4 bytes: the place of the commit that stored it, so in
commit order), or, for an original stored again under an id it had (a
refetched page that changed; the in-process index lists such a page twice), a fresh store key
with its top bit set and the id (8 bytes, the field's top bit set too: the field has at most
31 bits). A reader keeps an anchor's entries by store key, once each, the first
:data:`~crawler.content.neardup_index.MAX_POSTING`: so writes need no order and no check (an
``APPEND`` each, where a hash field kept sorted needed a script to read and rewrite it), and an
entry written twice (a repair) changes nothing. A writer appends nothing to an anchor it read
full, so a bucket stays near its postings' 8 bytes each. (Why strings, not hash fields: see
docs/benchmarks/history.md, "Issue 37's costs, 2026-12-06".)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from redis.cluster import RedisCluster

from crawler.backends.redis import wire
from crawler.backends.redis.fence import _raise_error
from crawler.backends.redis.keys import glob_escape, shard_tag
from crawler.content.neardup_index import MAX_POSTING

ALIAS = 0x80000000  # top bit of a posting's store key: the original's id follows
REPAIR_LAG = 10_000  # commits after which a pending original's postings are written by any one
SPREAD = 0x9E3779B1  # odd (a bijection of 32-bit values): 2**32 / golden ratio, Knuth's multiplier


def parse(value: bytes) -> list[tuple[int, int]]:
    """(store key, original id) of each posting element of ``value`` (elements one after the
    other, as :func:`postings` gives them)."""
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


def entry(field: int, elem: bytes) -> bytes:
    """A bucket's entry of the posting element ``elem`` under ``field`` (see the module)."""
    return (field | (ALIAS if len(elem) == 8 else 0)).to_bytes(4, "big") + elem


def postings(bucket: bytes, field: int) -> bytes:
    """The posting elements of ``field`` in a bucket's entries, by store key, each once."""
    if not bucket:
        return b""
    words = np.frombuffer(bucket, ">u4")
    if len(bucket) % 8 == 0 and not (words[0::2] & ALIAS).any():  # no alias: 8-byte entries
        pairs = words.reshape(-1, 2)
        keys = pairs[pairs[:, 0] == field, 1]
        return np.unique(keys).astype(">u4").tobytes() if len(keys) else b""
    found: dict[int, bytes] = {}
    pos, end = 0, len(bucket)
    while pos < end:
        (f,) = struct.unpack_from(">I", bucket, pos)
        size = 12 if f & ALIAS else 8
        if f & ~ALIAS == field:
            found[int.from_bytes(bucket[pos + 4 : pos + 8], "big") & ~ALIAS] = bucket[
                pos + 4 : pos + size]
        pos += size
    return b"".join(found[k] for k in sorted(found))


def merge(
    stored: Sequence[bytes], anchors: Sequence[int], pending: Iterable[tuple[int, int, set[int]]]
) -> list[list[tuple[int, int]]]:
    """Each anchor's postings as the crawl's commit order has them: those Redis holds (its
    ``stored`` elements) and those of the originals committed whose postings may not be
    written yet (``pending``: store key, id, anchors), by store key, at most :data:`MAX_POSTING`."""
    lists = [parse(v) for v in stored]
    extra = [p for p in pending if p[2]]
    if extra:
        for i, anchor in enumerate(anchors):
            more = [(k, doc) for k, doc, owned in extra if anchor in owned]
            if more:
                have = {k for k, _ in lists[i]}
                lists[i] = sorted(lists[i] + [m for m in more if m[0] not in have])
    return [p[:MAX_POSTING] for p in lists]


def batch(client: Any, commands: list[Any]) -> list[Any]:
    """``commands``' replies, in one round trip (:func:`wire.execute` on one server; a cluster
    client's pipeline sends each node its part, ``MGET`` as a plain command, which its own
    method refuses); an error raised."""

    def through_redis_py() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]

    replies = wire.execute(client, commands, through_redis_py)
    _raise_error(client, replies)
    return replies


class AnchorKeys:
    """Where each anchor of the crawl ``crawl`` lives (see the module): ``groups`` hash tags,
    buckets of ``bits`` bits."""

    def __init__(self, crawl: str, groups: int, bits: int) -> None:
        if groups < 1:
            raise ValueError("the anchor index has at least one group")
        self.groups, self.bits = groups, bits
        self.tags = ["{" + shard_tag(crawl + ":nd", g, groups) + "}" for g in range(groups)]
        self._shift = 32 - bits
        self._mask = (1 << self._shift) - 1

    def place(self, anchor: int) -> tuple[int, str, int]:
        """(group, bucket key, field) of an anchor (spread: see the module)."""
        x = anchor * SPREAD & 0xFFFFFFFF
        bucket = x >> self._shift
        g = bucket % self.groups
        return g, f"{self.tags[g]}:a:{bucket}", x & self._mask

    def patterns(self) -> list[str]:
        """SCAN patterns of every anchor bucket."""
        return [glob_escape(tag) + ":a:*" for tag in self.tags]


class AnchorPostings:
    """A worker's reads and writes of the anchor postings: read a page's (in the
    caller's round trip, or on their own), write an original's, and say which it wrote."""

    def __init__(self, client: Any, keys: AnchorKeys) -> None:
        self.client, self.keys = client, keys
        self.one_server = not isinstance(client, RedisCluster)
        self._done: list[int] = []  # store keys whose postings this worker wrote since its read
        self.repaired = 0  # pending originals whose postings this worker wrote for another

    def take_done(self) -> list[int]:
        """The store keys whose postings this worker wrote, for the next read to take off
        ``:pend``."""
        done, self._done = self._done, []
        return done

    def queue_read(
        self, commands: list[Any], anchors: list[int]
    ) -> list[tuple[list[str], list[tuple[int, str, int]]]]:
        """Add the ``MGET`` of ``anchors``' buckets to ``commands``: one on one server, one per
        tag on a cluster (a tag is one slot); what :meth:`parse_read` needs to place the
        replies."""
        reads: dict[int, tuple[list[str], list[tuple[int, str, int]]]] = {}
        for i, anchor in enumerate(anchors):
            g, key, field = self.keys.place(anchor)
            keys, at = reads.setdefault(0 if self.one_server else g, ([], []))
            if key not in keys:
                keys.append(key)
            at.append((i, key, field))
        commands += [("MGET", *keys) for keys, _ in reads.values()]
        return list(reads.values())

    def parse_read(
        self, reads: list[tuple[list[str], list[tuple[int, str, int]]]], replies: list[Any],
        n: int,
    ) -> list[bytes]:
        """Each of the ``n`` anchors' posting elements (:func:`postings`) from
        :meth:`queue_read`'s replies."""
        stored = [b""] * n
        for (keys, at), values in zip(reads, replies, strict=True):
            buckets = dict(zip(keys, values, strict=True))
            for i, key, field in at:
                stored[i] = postings(buckets[key] or b"", field)
        return stored

    def read(self, anchors: list[int]) -> list[bytes]:
        """Each anchor's posting elements, on their own round trip (one pipeline, per node)."""
        commands: list[Any] = []
        reads = self.queue_read(commands, anchors)
        return self.parse_read(reads, batch(self.client, commands), len(anchors))

    def write(
        self, k: int, elem: bytes, anchors: list[int], seen: Sequence[bytes | None] | None = None
    ) -> None:
        """Write an original's postings (store key ``k``, element ``elem``) into its anchors'.
        ``seen``: per anchor, None where the postings its worker read before the commit gave
        ``k``, merged with the pending ones, held :data:`MAX_POSTING`: each of those is stored
        before ``k`` (store keys are given in commit order), so ``k`` never counts there and
        nothing is written; without ``seen`` (a repair), every anchor's."""
        places = [self.keys.place(a) for i, a in enumerate(anchors)
                  if seen is None or seen[i] is not None]
        if places:
            batch(self.client, [("APPEND", key, entry(field, elem)) for _, key, field in places])
        self._done.append(k)  # the next read takes it off :pend, now the writes are answered

    def pending(self, values: list[bytes], seq: int) -> list[tuple[int, int, set[int]]]:
        """The pending originals read from ``:pend`` at commit ``seq``: (store key, id,
        anchors). One left pending :data:`REPAIR_LAG` commits ago (its worker died before
        writing its postings) gets them written."""
        out = []
        for v in values:
            (x,) = struct.unpack_from(">I", v)
            k = x & ~ALIAS
            size = 8 if x & ALIAS else 4
            doc = int.from_bytes(v[4:8], "big") if size == 8 else k
            owned = np.frombuffer(v, ">u4", offset=size).tolist()
            out.append((k, doc, set(owned)))
            if k + REPAIR_LAG < seq and k not in self._done:
                self.write(k, v[:size], owned)
                self.repaired += 1
        return out
