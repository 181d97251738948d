"""The shared near-duplicate detector's state in Redis, as the detector
(:mod:`crawler.backends.redis.neardup`) reads and writes it: plain commands, in ``MULTI`` where
a read must see one moment (in order where that is enough); a decision is recorded in one
``MULTI``/``EXEC`` under a ``WATCH`` of ``:v``, the check of what it read made in between (as
:mod:`crawler.backends.redis.fence` does: no script; every command names its keys, all on the
crawl's near-duplicate tag). Nothing here decides.

**Records.** An original's record (``neardup_codec``'s packing) is kept under its id in a chunk
of :data:`SLOTS` ids (``:r``); an id without one is no original (now). A new URL's id is its
commit's place in the crawl's order (``:v`` ``seq``): one counter a commit takes from, which
the worker reads anyway.

**Anchor postings.** An anchor (a 32-bit hash, one of an original's :data:`ANCHORS` smallest)
is first *spread*, ``x = anchor * SPREAD mod 2**32`` (a bijection): an original's anchors lie
in the lowest ~15 % of the hash range, and bucketed by their own top bits would crowd a few
buckets. It lives in the string ``:a:<x's top bits>`` (~64 postings a bucket at the crawl's
capacity) under the *field* ``x``'s other bits: the bucket is a log of 8-byte entries, the
field and the original's id, appended by the commit that stored the original, so in commit
order, as the in-process index keeps its postings; a reader keeps an anchor's first
:data:`~crawler.content.neardup_index.MAX_POSTING`. A commit appends nothing to an anchor its
page read full, so a bucket stays near its postings' 8 bytes each. Strings, not hash fields:
one ``MGET`` reads a page's buckets and one ``APPEND`` writes an entry (see
docs/benchmarks/history.md, "Issue 37's costs, 2026-12-06"). On the crawl's tag with the rest,
the postings are written in the commit's transaction: a read that sees a commit's ``seq`` sees
its postings.

**The check.** Every commit writes ``:v``, so one whose ``seq`` is still the one the decision
read changes nothing it read. Else the commit compares what it depends on (see
:meth:`NeardupState._unchanged`), the postings it read not full among them: a posting only
grows, so one that has not grown lists no original stored since.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from crawler.backends.redis import wire
from crawler.backends.redis.fence import AGAIN, raise_reply_error, watched
from crawler.backends.redis.keys import NeardupKeys
from crawler.backends.redis.wire import Command
from crawler.content.neardup_index import MAX_POSTING

if TYPE_CHECKING:
    from crawler.backends.redis.neardup_copies import Lesson

SLOTS = 1024  # ids per chunk of the records (:r)
TLEN = (1 << 24) - 1  # :v packs a host's pages learned << 24 | its template length
# a value past hash-max-listpack-value (64 B) the first commit sets in :v and :hc makes them
# hashtables: a field (a host) found without scanning the others, ~4,000 instructions less a
# look-up at 40 hosts
WIDE = "." * 65
SPREAD = 0x9E3779B1  # odd (a bijection of 32-bit values): 2**32 / golden ratio, Knuth's multiplier


def bucket(prefix: str, digest: bytes, bits: int) -> tuple[str, bytes]:
    """The bucket key and field of an 8-byte digest: its top ``bits`` bits name the bucket, the
    bytes after those they give whole are the field (lossless)."""
    return prefix + str(int.from_bytes(digest[:4], "big") >> (32 - bits)), digest[bits // 8 :]


def postings(bucket: bytes, field: int) -> list[int]:
    """The first :data:`MAX_POSTING` ids an anchor bucket's entries list under ``field``, in
    the order they were appended (see the module)."""
    pairs = np.frombuffer(bucket, ">u4").reshape(-1, 2)
    return pairs[pairs[:, 0] == field, 1][:MAX_POSTING].tolist()  # type: ignore[no-any-return]


def batch(client: Any, commands: list[Command]) -> list[Any]:
    """``commands``' replies, in one round trip (:func:`wire.execute` on one server; a cluster
    client's pipeline sends them to the node of their slot, ``MGET`` as a plain command, which
    its own method refuses); an error raised."""

    def through_redis_py() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]

    replies = wire.execute(client, commands, through_redis_py)
    raise_reply_error(client, replies)
    return replies


@dataclass(slots=True)
class Read:
    """What a worker read before deciding: the state its decision depends on, at commit
    ``seq``; ``meta``: the host's pages learned and template length (its ``:v`` field)."""

    meta: int
    epoch: bytes | None  # which state it is: a state lost and begun again has another
    seq: int
    forget: int
    own: int
    owner: int
    postings: list[list[int]]  # each anchor's (the first MAX_POSTING ids)


@dataclass(slots=True)
class Decided:
    """A worker's decision on a page, as its commit records it (and checks it still holds)."""

    action: str  # Outcome.action
    host: str
    hid: int
    uh: bytes  # 8 bytes of the URL's hash
    fp: bytes  # 8 bytes of its fingerprint (b"": no words)
    version: int  # the host's template length its features were computed with
    checks: dict[int, int]  # the candidates' other hosts: template length the decision used
    lesson: Lesson | None  # what it taught its host's model
    record: bytes  # a new original's
    anchors: list[int]  # when its postings were read: its anchors (a new original's postings)


class NeardupState:
    """One worker's calls on the crawl's near-duplicate state (``keys``); ``bits``: of the URL
    and fingerprint bucket numbers, ``anchor_bits``: of the anchor buckets'."""

    def __init__(self, client: Any, keys: NeardupKeys, bits: int, anchor_bits: int) -> None:
        self.client, self.keys, self.bits = client, keys, bits
        self._shift = 32 - anchor_bits
        self.epoch = os.urandom(8).hex()  # the state's epoch if this worker's commit is its first

    def place(self, anchor: int) -> tuple[str, int]:
        """(bucket key, field) of an anchor (spread: see the module)."""
        x = anchor * SPREAD & 0xFFFFFFFF
        return self.keys.anchors(x >> self._shift), x & ((1 << self._shift) - 1)

    def host_id(self, host: str) -> int:
        """``host``'s id, given it the first time any worker meets it."""
        keys = self.keys
        hid = int(self.client.hget(keys.host_ids, host) or 0)
        if not hid:
            new = self.client.incr(keys.last_host_id)
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(keys.host_ids, host, new)  # a loser's id stays unused
            pipe.hget(keys.host_ids, host)
            hid = int(pipe.execute()[1])
        return hid

    def read(self, hid: int, uh: bytes, fp: bytes, anchors: list[int]) -> Read:
        """The state a decision on a page depends on, in one round trip (no ``MULTI``: each
        command of it costs Redis twice over; the order is enough): the commit count first, so
        that any commit after a value read counts past it and has the commit check that value;
        then the URL's and fingerprint's ids and the postings of ``anchors`` (used unless the
        fingerprint has an owner)."""
        keys = self.keys
        commands: list[Command] = [
            ("HMGET", keys.versions, "seq", "forget", "epoch", hid),
            ("HGET", *bucket(keys.urls_prefix, uh, self.bits)),
        ]
        if fp:
            commands.append(("HGET", *bucket(keys.fingerprints_prefix, fp, self.bits)))
        places = [self.place(a) for a in anchors]
        buckets = list(dict.fromkeys(key for key, _ in places))
        if buckets:
            commands.append(("MGET", *buckets))
        versions, own, *rest = batch(self.client, commands)
        owner = int(rest.pop(0) or 0) if fp else 0
        found: list[list[int]] = [[] for _ in anchors]
        if buckets and not owner:
            values = dict(zip(buckets, rest[0], strict=True))
            found = [postings(values[key] or b"", field) for key, field in places]
        seq, forget = (int(x or 0) for x in versions[:2])
        return Read(int(versions[3] or 0), versions[2], seq, forget, int(own or 0), owner, found)

    def host_state(self, hid: int, have: int) -> tuple[int, bytes, bytes, list[bytes]]:
        """A host's pages learned and template length (its ``:v`` field), its template's
        blocks from the ``have``-th on, its model's snapshot and the log since, in one
        ``MULTI``."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(keys.versions, hid)
        pipe.getrange(keys.template(hid), have * 4, -1)
        pipe.get(keys.snapshot(hid))
        pipe.lrange(keys.lessons(hid), 0, -1)
        meta, rest, snapshot, log = pipe.execute()
        return int(meta or 0), rest, snapshot or b"", log

    def templates(self, have: dict[int, int]) -> list[bytes]:
        """The blocks of each host's template (by host id) from the ``have[hid]``-th on, in one
        round trip."""
        keys = self.keys
        return batch(
            self.client, [("GETRANGE", keys.template(h), n * 4, -1) for h, n in have.items()]
        )

    def records(self, docs: list[int]) -> list[bytes | None]:
        """The records of ``docs`` (None: no original now), in one round trip."""
        return batch(self.client, [("HGET", self.keys.records(doc // SLOTS), doc) for doc in docs])

    def commit(self, page: Decided, read: Read) -> tuple[int, int] | None:
        """Record a decision in one ``MULTI``/``EXEC``, under a ``WATCH`` of ``:v`` (every
        commit writes it): None (retry) if something the decision read changed since
        ``read``; else the host's counts (pages << 26 | duplicates) and the commit's ``seq``."""
        keys, own = self.keys, read.own
        watch: list[Command] = [
            ("WATCH", keys.versions),
            ("HMGET", keys.versions, "seq", "forget", page.hid, *page.checks),
        ]
        if own and page.action != "unchanged":  # a URL stored before: its record now
            watch.append(("HGET", keys.records(own // SLOTS), own))

        def attempt(conn: wire.one_connection, node: Any) -> Any:
            got = conn.run(watch)
            raise_reply_error(self.client, got)
            seq, forget, meta, *tlens = (int(x or 0) for x in got[1])
            moved = [t & TLEN for t in tlens] != list(page.checks.values())
            if seq != read.seq and not self._unchanged(conn, page, read, seq, forget, meta, moved):
                conn.run([("UNWATCH",)])
                return None
            writes = self._writes(page, read, seq + 1, got[2] if len(got) > 2 else None)
            replies = conn.run([("MULTI",), *writes, ("EXEC",)])
            if replies[-1] is None:  # another commit came in between
                return AGAIN
            raise_reply_error(self.client, replies)
            return replies[-1][-1], seq + 1

        return watched(self.client, keys.versions, attempt)

    def _unchanged(
        self, conn: Any, page: Decided, read: Read, seq: int, forget: int, meta: int, moved: bool
    ) -> bool:
        """Whether what the decision read is as it was, other workers' commits since
        notwithstanding: the host's template (and model, if the page teaches it), the
        candidates' hosts' templates (``moved``: one grew), the URL's and fingerprint's ids,
        and no original stored since has an anchor of this page whose postings were not full
        (it would have voted)."""
        learned = page.lesson.learned if page.lesson else -1
        if meta & TLEN != page.version or (learned >= 0 and meta >> 24 != learned) or moved:
            return False
        if forget != read.forget:
            return False
        listed = zip(page.anchors, read.postings, strict=False)  # (no anchors: none read)
        mine = [(*self.place(a), len(p)) for a, p in listed if len(p) < MAX_POSTING]
        buckets = list(dict.fromkeys(key for key, _, _ in mine))
        reads: list[Command] = [("HGET", *bucket(self.keys.urls_prefix, page.uh, self.bits))]
        if page.fp:
            reads.append(("HGET", *bucket(self.keys.fingerprints_prefix, page.fp, self.bits)))
        if buckets:
            reads.append(("MGET", *buckets))
        got = conn.run(reads)
        raise_reply_error(self.client, got)
        if int(got[0] or 0) != read.own or (page.fp and int(got[1] or 0) != read.owner):
            return False
        values = dict(zip(buckets, got[-1] if buckets else (), strict=True))
        return all(len(postings(values[key] or b"", field)) == n for key, field, n in mine)

    def _writes(self, page: Decided, read: Read, seq: int, was: bytes | None) -> list[Command]:
        """The commit's writes (``was``: the record the URL's id has now)."""
        keys, own, action = self.keys, read.own, page.action
        first = ("epoch", self.epoch, "forget", 0, "hashtable", WIDE) if seq == 1 else ()
        writes: list[Command] = [("HSET", keys.versions, "seq", seq, *first)]
        if first:  # (as :v, :hc a hashtable)
            writes.append(("HSET", keys.host_counts, " hashtable", WIDE))
        if action != "unchanged":
            doc = own or seq  # a new URL's id is its commit's place
            rkey = keys.records(doc // SLOTS)
            if not own:
                writes.append(("HSET", *bucket(keys.urls_prefix, page.uh, self.bits), doc))
            elif was:  # a refetched original: what it says now goes
                # (its fingerprint's entry names it: a commit sets one only where none is, and
                # drops it with the record)
                writes.append(("HDEL", *bucket(keys.fingerprints_prefix, was[:8], self.bits)))
                if action != "new":
                    writes.append(("HDEL", rkey, own))
                writes.append(("HINCRBY", keys.versions, "forget", 1))
            if action == "new":
                fbucket = bucket(keys.fingerprints_prefix, page.fp or bytes(8), self.bits)
                writes += [("HSET", rkey, doc, page.record), ("HSET", *fbucket, doc)]
                if page.anchors:  # its postings (an original stored again is listed again)
                    for anchor, listed in zip(page.anchors, read.postings, strict=True):
                        if len(listed) < MAX_POSTING:
                            key, field = self.place(anchor)
                            writes.append(("APPEND", key, (field << 32 | doc).to_bytes(8, "big")))
            if page.lesson is not None and action in ("new", "near"):
                writes += _teach(keys, page.hid, page.lesson)
        dup = action in ("exact", "near")
        writes.append(("HINCRBY", keys.host_counts, page.host, (1 << 26) + dup))
        return writes


def _teach(keys: NeardupKeys, hid: int, lesson: Lesson) -> list[Command]:
    """The writes of what a page taught its host's model (and template)."""
    made = np.array(lesson.made, ">u4").tobytes()
    if lesson.snapshot:  # a pruning: the snapshot replaces the log so far
        out: list[Command] = [
            ("SET", keys.snapshot(hid), lesson.snapshot),
            ("DEL", keys.lessons(hid)),
        ]
    else:
        out = [("RPUSH", keys.lessons(hid), lesson.entry)]
    out.append(("HINCRBY", keys.versions, hid, (1 << 24) + len(lesson.made)))
    if made:
        out.append(("APPEND", keys.template(hid), made))
    return out
