"""The shared near-duplicate detector's anchor index in Redis: each anchor's postings in small
bucketed hashes on hash tags of their own (so over the nodes of a Redis Cluster), read with plain
``HMGET`` and written by ``lua/neardup_put.lua`` (one call per tag; on one server, by the
original's commit, with the same function), or by a plain ``HSETNX`` where the writer read none.

**Layout.** An anchor (a 32-bit hash, one of an original's :data:`ANCHORS` smallest) is first
*spread*, ``x = anchor * SPREAD mod 2**32`` (a bijection): an original's anchors lie in the
lowest ~15 % of the hash range, and bucketed by their own top bits would crowd a few buckets
past ``hash-max-listpack-entries``. It lives in bucket ``x >> (32 - bits)`` (~64 fields a
bucket at the crawl's capacity), field ``x & (2**(32 - bits) - 1)`` in decimal, of the hash
``{<crawl>:nd:<g>.<n>}:a:<bucket>``, ``g = bucket % groups`` (``FRONTIER_SHARDS`` tags, each
picked by :func:`~crawler.backends.redis.keys.shard_tag` to fall on its own master).

**Postings.** A field's value is the anchor's first
:data:`~crawler.content.neardup_index.MAX_POSTING` originals as 4-byte big-endian *store keys*,
given by the commits from the crawl's id counter, so in commit order; kept sorted whatever
order the writes arrive in, and a write that finds its key does nothing (a repair may write an
original twice). The store key is the original's id, except for an original stored again under
an id it had (a refetched page that changed): then its top bit is set and the id follows (8
bytes), as the in-process index lists such a page twice. Postings longer than :data:`LONG`
bytes move to a string of their own (``<bucket key>:<field>``, the field holding ``L``), so a
bucket stays in Redis's compact encoding (``hash-max-listpack-value``, 64).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

import numpy as np
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from crawler.backends.redis.keys import glob_escape, shard_tag

ALIAS = 0x80000000  # top bit of a posting's store key: the original's id follows
REPAIR_LAG = 10_000  # ids after which a pending original's postings are written by any worker
LONG = 64  # bytes of postings kept in the bucket (Redis's hash-max-listpack-value default)
SPREAD = 0x9E3779B1  # odd (a bijection of 32-bit values): 2**32 / golden ratio, Knuth's multiplier
PUT = resources.files("crawler.backends.redis").joinpath("lua/neardup_put.lua").read_text()


def run_scripts(
    client: Any, script: Any, calls: Sequence[tuple[list[str], list[Any]]],
    first: Sequence[tuple[Any, ...]] = (),
) -> list[Any]:
    """Each (keys, args) call of ``script`` in one pipeline (redis-py routes each by its keys
    on a cluster, one round trip per node), loading the script where a server lacks it;
    ``first``: plain commands sent before them in the same pipeline, whose replies it
    returns (sent again if the script had to be loaded)."""
    for _ in range(2):
        pipe = client.pipeline(transaction=False)
        for command in first:
            pipe.execute_command(*command)
        for keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        replies = pipe.execute(raise_on_error=False)
        if not any(isinstance(r, NoScriptError) for r in replies):
            break
        script.sha = client.script_load(script.script)  # a restart, a new master
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies[: len(first)]


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
        self._shift = 32 - bits
        self._mask = (1 << self._shift) - 1

    def place(self, anchor: int) -> tuple[int, str, str]:
        """(group, bucket key, field) of an anchor (spread: see the module)."""
        x = anchor * SPREAD & 0xFFFFFFFF
        bucket = x >> self._shift
        g = bucket % self.groups
        return g, f"{self.tags[g]}:a:{bucket}", str(x & self._mask)

    def patterns(self) -> list[str]:
        """SCAN patterns of every anchor bucket."""
        return [glob_escape(tag) + ":a:*" for tag in self.tags]


def _long_key(key: str, field: str) -> str:
    """The string an anchor's postings move to once longer than :data:`LONG`."""
    return f"{key}:{field}"


class AnchorPostings:
    """A worker's reads and writes of the anchor postings: read a page's (queued on the
    caller's pipeline, or on their own), write an original's, and say which it wrote."""

    def __init__(self, client: Any, keys: AnchorKeys, limit: int) -> None:
        self.client, self.keys, self.limit = client, keys, limit
        self._put = client.register_script(PUT)
        self.one_server = not isinstance(client, RedisCluster)
        self._done: list[int] = []  # store keys whose postings this worker wrote since its read
        self.repaired = 0  # pending originals whose postings this worker wrote for another

    def take_done(self) -> list[int]:
        """The store keys whose postings this worker wrote, for the next read to take off
        ``:pend``."""
        done, self._done = self._done, []
        return done

    def queue_read(self, pipe: Any, anchors: list[int]) -> list[tuple[str, list[int], list[str]]]:
        """Queue one ``HMGET`` per bucket of ``anchors`` on ``pipe``; what :meth:`parse_read`
        needs to place the replies."""
        buckets: dict[str, tuple[list[int], list[str]]] = {}
        for i, anchor in enumerate(anchors):
            _, key, field = self.keys.place(anchor)
            at, fields = buckets.setdefault(key, ([], []))
            at.append(i)
            fields.append(field)
        reads = [(key, at, fields) for key, (at, fields) in buckets.items()]
        for key, _, fields in reads:
            pipe.hmget(key, fields)
        return reads

    def parse_read(
        self, reads: list[tuple[str, list[int], list[str]]], replies: list[Any], n: int
    ) -> list[bytes]:
        """Each anchor's postings from :meth:`queue_read`'s replies (long ones read after)."""
        stored = [b""] * n
        long: list[tuple[int, str]] = []
        for (key, at, fields), values in zip(reads, replies, strict=True):
            for i, field, value in zip(at, fields, values, strict=True):
                if value == b"L":
                    long.append((i, _long_key(key, field)))
                else:
                    stored[i] = value or b""
        if long:
            pipe = self.client.pipeline(transaction=False)
            for _, key in long:
                pipe.get(key)
            for (i, _), value in zip(long, pipe.execute(), strict=True):
                stored[i] = value or b""
        return stored

    def read(self, anchors: list[int]) -> list[bytes]:
        """Each anchor's postings, on their own round trip (one pipeline, per node)."""
        pipe = self.client.pipeline(transaction=False)
        reads = self.queue_read(pipe, anchors)
        return self.parse_read(reads, pipe.execute(), len(anchors))

    def write(
        self, k: int, elem: bytes, anchors: list[int], seen: Sequence[bytes | None] | None = None
    ) -> None:
        """Write an original's postings (store key ``k``, element ``elem``) into its anchors'.
        ``seen``: per anchor, the postings its worker read before the commit gave ``k``, or
        None where those merged with the pending ones held :attr:`limit`: each of those is
        stored before ``k`` (store keys are given in commit order), so ``k`` never joins them
        and nothing is written. An anchor read without postings (most are: an original's
        anchors are mostly its own) gets them with a plain ``HSETNX``, the field still missing;
        the others (without ``seen``, a repair: all; those its commit wrote have None) and
        those another original's posting reached first are placed by ``neardup_put.lua``: one
        call per tag on a cluster, one on one server."""
        fresh: list[int] = []
        rest: list[int] = []
        for i, anchor in enumerate(anchors):
            read = b"?" if seen is None else seen[i]
            if read is not None:
                (rest if read else fresh).append(anchor)
        first = [("HSETNX", key, field, elem)
                 for _, key, field in (self.keys.place(anchor) for anchor in fresh)]
        replies = run_scripts(self.client, self._put, self.put_calls(elem, rest), first)
        taken = [anchor for anchor, new in zip(fresh, replies, strict=True) if not int(new)]
        if taken:  # another original's posting came first: placed by store key
            run_scripts(self.client, self._put, self.put_calls(elem, taken))
        self._done.append(k)  # the next read takes it off :pend, now the writes are answered

    def in_commit(
        self, anchors: list[int], stored: Sequence[bytes], lens: bytes
    ) -> tuple[list[str], bytes, list[bool]]:
        """On one server, a new original's commit writes the postings of its anchors read with
        some (and fewer than :attr:`limit`): their keys (bucket, long postings) and fields, for
        the commit, and which they are (:meth:`write` leaves them). On a cluster, none."""
        if not self.one_server:
            return [], b"", [False] * len(anchors)
        mask = [bool(v) and n < self.limit for v, n in zip(stored, lens, strict=True)]
        calls = self.put_calls(b"", [a for a, mine in zip(anchors, mask, strict=True) if mine])
        keys, args = calls[0] if calls else ([], [])
        return keys, " ".join(args[3:]).encode(), mask

    def put_calls(self, elem: bytes, anchors: list[int]) -> list[tuple[list[str], list[Any]]]:
        """The ``neardup_put.lua`` calls (keys, args) that write ``elem`` into ``anchors``'
        postings: one per tag on a cluster, one on one server (a script may touch any key
        there)."""
        by_call: dict[int, tuple[list[str], list[Any]]] = {}
        for anchor in anchors:
            g, key, field = self.keys.place(anchor)
            keys, fields = by_call.setdefault(0 if self.one_server else g, ([], []))
            keys += (key, _long_key(key, field))
            fields.append(field)
        return [(keys, [self.limit, elem, LONG, *fields]) for keys, fields in by_call.values()]

    def pending(self, values: list[bytes], next_id: int) -> list[tuple[int, int, set[int]]]:
        """The pending originals read from ``:pend``: (store key, id, anchors). One left
        pending :data:`REPAIR_LAG` ids ago (its worker died before writing its postings) gets
        them written."""
        out = []
        for v in values:
            (x,) = struct.unpack_from(">I", v)
            k = x & ~ALIAS
            size = 8 if x & ALIAS else 4
            doc = int.from_bytes(v[4:8], "big") if size == 8 else k
            owned = np.frombuffer(v, ">u4", offset=size).tolist()
            out.append((k, doc, set(owned)))
            if k + REPAIR_LAG < next_id and k not in self._done:
                self.write(k, v[:size], owned)
                self.repaired += 1
        return out


def ranked(postings: list[list[tuple[int, int]]], own: int) -> list[int]:
    """Every original the postings vote for but the page's own, most votes first, then the
    earliest stored: :func:`~crawler.content.neardup_decide.rank_candidates`'s order before it
    keeps the live ones (the detector does, from Redis's record table)."""
    votes: dict[int, int] = {}
    for posting in postings:
        for _, doc in posting:
            votes[doc] = votes.get(doc, 0) + 1
    votes.pop(own, None)
    return sorted(votes, key=lambda d: (-votes[d], d))
