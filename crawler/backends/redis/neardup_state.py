"""The shared near-duplicate detector's state in Redis, as the detector
(:mod:`crawler.backends.redis.neardup`) reads and writes it: plain commands, in ``MULTI`` where
a read must see one moment (in order where that is enough), and ``lua/neardup_commit.lua``
where a check and a write must be one step. Nothing here decides; every key is named by
:class:`crawler.backends.redis.keys.NeardupKeys` and given to the script that touches it.

**Records.** An original's record (``neardup_codec``'s packing) is kept under its id in a chunk
of :data:`SLOTS` ids (``:r``); an id without one is no original (now). Its first
:data:`ENTRY` bytes (fingerprint, host id) say which version it is. A new URL's id is its commit's
place in the crawl's order (``:v`` ``seq``; so is the store key of an original stored again):
one counter a commit takes from, which the worker reads anyway. The commit is given the chunks
of the next id and of the one after; an id past both (more than :data:`SLOTS` commits between
the worker's read and its commit) is a ``retry``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from importlib import resources
from typing import Any

from crawler.backends.redis.keys import NeardupKeys
from crawler.backends.redis.neardup_anchors import AnchorPostings
from crawler.content.neardup_index import MAX_POSTING

COMMIT = resources.files("crawler.backends.redis").joinpath("lua/neardup_commit.lua").read_text()
SLOTS = 1024  # ids per chunk of the records (:r)
ENTRY = 12  # bytes a record starts with, its version: the fingerprint (8) and host id (4)
RECENT = 4096  # originals kept in :recent (a check spanning more commits than this retries)
TLEN = (1 << 24) - 1  # :v packs a host's pages learned << 24 | its template length
NEAR_END = 256  # ids before a chunk's end from which a commit is given the next chunk's keys


def bucket(prefix: str, digest: bytes, bits: int) -> tuple[str, bytes]:
    """The bucket key and field of an 8-byte digest: its top ``bits`` bits name the bucket, the
    bytes after those they give whole are the field (lossless)."""
    return prefix + str(int.from_bytes(digest[:4], "big") >> (32 - bits)), digest[bits // 8 :]


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
    pending: list[bytes]
    stored: list[bytes]


class NeardupState:
    """One worker's calls on the crawl's near-duplicate state (``keys``); ``bits``: of the URL
    and fingerprint bucket numbers."""

    def __init__(
        self, client: Any, keys: NeardupKeys, bits: int, anchors: AnchorPostings
    ) -> None:
        self.client, self.keys, self.bits, self.anchors = client, keys, bits, anchors
        self._commit = client.register_script(COMMIT)
        self.epoch = os.urandom(8).hex()  # the state's epoch if this worker's commit is its first

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
        """The state a decision on a page depends on, in one pipeline (no ``MULTI``: each
        command of it costs Redis twice over; the order is enough): the commit count first, so
        that any commit after a value read counts past it and has the commit check that value;
        the pending originals before the postings of ``anchors`` (read unless the fingerprint
        has an owner). The store keys whose postings this worker wrote since are taken off
        ``:pend`` first."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=False)
        done = self.anchors.take_done()
        if done:
            pipe.hdel(keys.pending, *done)
        pipe.hmget(keys.versions, "seq", "forget", "epoch", hid)
        pipe.hget(*bucket(keys.urls_prefix, uh, self.bits))
        if fp:
            pipe.hget(*bucket(keys.fingerprints_prefix, fp, self.bits))
        pipe.hvals(keys.pending)
        # one server answers a page's postings in this pipeline; a cluster, after it
        one = self.anchors.one_server
        reads = self.anchors.queue_read(pipe, anchors) if one else []
        versions, own, *rest = pipe.execute()[1 if done else 0 :]
        owner = int(rest.pop(0) or 0) if fp else 0
        if not anchors or owner:
            stored = [b""] * len(anchors)
        elif one:
            stored = self.anchors.parse_read(reads, rest[1:], len(anchors))
        else:
            stored = self.anchors.read(anchors)
        seq, forget = (int(x or 0) for x in versions[:2])
        return Read(int(versions[3] or 0), versions[2], seq, forget, int(own or 0), owner,
                    rest[0], stored)

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

    def records(self, docs: list[int]) -> list[bytes | None]:
        """The records of ``docs`` (None: no original now), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for doc in docs:
            pipe.hget(self.keys.records(doc // SLOTS), doc)
        return pipe.execute()  # type: ignore[no-any-return]

    def metas(self, hids: list[int]) -> list[int]:
        """The ``:v`` fields of the hosts ``hids`` (pages learned, template length)."""
        return [int(m or 0) for m in self.client.hmget(self.keys.versions, hids)]

    def commit(
        self, action: str, host: str, hid: int, uh: bytes, fp: bytes, read: Read, version: int,
        lesson: list[Any], old_fp: bytes, anchors: bytes, lens: bytes, checks: bytes,
        payload: bytes,
    ) -> bytes:
        """``neardup_commit.lua``'s answer to recording a decision (its header says what)."""
        keys = self.keys
        ukey, ufield = bucket(keys.urls_prefix, uh, self.bits)
        fkey, ffield = bucket(keys.fingerprints_prefix, fp or bytes(8), self.bits)
        chunk = (read.own or read.seq + 1) // SLOTS
        learned, entry, made, snapshot = lesson
        # the next chunk's keys only where a new id may land in it (else such a commit retries)
        near = not read.own and (read.seq + 1) % SLOTS >= SLOTS - NEAR_END
        old_key, old_field = (bucket(keys.fingerprints_prefix, old_fp, self.bits) if old_fp
                              else ("", b""))
        numbers = struct.pack(
            ">IIIIQIIiIIII", hid, read.own, read.owner, read.forget, read.seq,
            version, MAX_POSTING, learned, SLOTS, chunk, RECENT, int(near),
        )
        strings = (action.encode(), host.encode("utf-8"), ufield, fp, ffield if fp else b"",
                   anchors, lens, checks, entry, made, snapshot, old_fp, old_field,
                   self.epoch.encode(), str(hid).encode())
        optional = []
        if near:
            optional.append(keys.records(chunk + 1))
        if old_fp:
            optional.append(old_key)
        if learned >= 0:
            optional.append(keys.lessons(hid))
        if made:
            optional.append(keys.template(hid))
        if snapshot:
            optional.append(keys.snapshot(hid))
        return self._commit(  # type: ignore[no-any-return]
            keys=[keys.versions, keys.host_counts,
                  keys.pending, keys.recent, ukey, fkey, keys.records(chunk),
                  *optional],
            args=[numbers + b"".join(struct.pack(">I", len(x)) + x for x in strings),
                  fp + hid.to_bytes(4, "big") + payload if payload else b""],
        )
