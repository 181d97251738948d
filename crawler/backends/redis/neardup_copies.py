"""What a worker of the shared near-duplicate detector keeps of the crawl's state in Redis, so a
page costs Redis two round trips: its copy of the index log (where each original's record is,
each anchor's postings), the records it decoded, and the hosts' templates and template models,
each brought up to date from the ``READ`` replies (``neardup``).

The template only grows, so its length is its version; a model's version is its pages learned.
A page is learned into the worker's copy of its host's model before the commit (a
:class:`Lesson`), and undone if the commit is refused.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crawler.backends.redis.neardup_codec import (
    decode_sketch,
    decode_snapshot,
    encode_snapshot,
    pack_sorted,
    unpack_sorted,
)
from crawler.content.neardup_index import AnchorIndex
from crawler.content.template import PRUNE_EVERY, HostTemplates

DECODED = 8192  # decoded candidate records a worker keeps (siblings come back as candidates)
EMPTY = np.empty(0, dtype=np.uint32)


@dataclass
class TemplateCopy:
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
class Lesson:
    """What a page teaches its host's model, learned into the worker's copy until the commit
    says whether it stands."""

    host: str
    learned: int  # the model's pages before this one (its version)
    entry: bytes  # the page's log entry
    made: list[int]  # blocks it made template
    snapshot: bytes  # the model after it, when it pruned (else empty)
    saved: Any  # HostTemplates.checkpoint, to undo it

    def commit_args(self) -> list[Any]:
        """``COMMIT``'s last arguments: the model's version the lesson follows, the log entry,
        the blocks made template, the snapshot."""
        return [self.learned, self.entry, np.array(self.made, ">u4").tobytes(), self.snapshot]


NO_LESSON = [-1, b"", b"", b""]  # Lesson.commit_args of a page that teaches nothing


class HostCopies:
    """This worker's copies of the hosts' ids, templates (by host id) and template models (by
    host)."""

    def __init__(self) -> None:
        self.hids: dict[str, int] = {}  # host -> host id in Redis (never changes)
        self.names: dict[int, str] = {}  # host id -> host
        self.templates: dict[int, TemplateCopy] = {}  # host id -> this worker's copy
        self.models = HostTemplates()  # this worker's copies of the hosts' models
        self.replayed = 0  # pages other workers taught that this worker learned from the log

    def template(self, hid: int) -> np.ndarray:
        """The sorted blocks of the copy of host ``hid``'s template."""
        copy = self.templates.get(hid)
        return copy.array() if copy is not None else EMPTY

    def follow(self, host: str, hid: int, model: list[Any]) -> None:
        """Bring this worker's copy of ``host``'s model to Redis's version (``READ``'s reply:
        pages, the version the log follows, the snapshot if the copy needs it, the log)."""
        pages, base, snapshot, log = int(model[0]), int(model[1]), model[2], model[3]
        models = self.models
        if pages == models.pages(host):
            return
        if snapshot:
            learned, tlen, keys, counts = decode_snapshot(snapshot)
            copy = self.templates.get(hid)
            raw = bytes(copy.raw[: 4 * tlen]) if copy is not None else b""
            models.load(host, learned, keys, counts, np.frombuffer(raw, ">u4").tolist())
        elif base == 0:
            models.forget(host)
        if models.pages(host) != base:
            raise RuntimeError(f"{host}: template model at {models.pages(host)}, log from {base}")
        for entry in log:
            models.learn(host, unpack_sorted(entry)[0].tolist())
            self.replayed += 1
        models.journal.clear()
        if models.pages(host) != pages:
            raise RuntimeError(f"{host}: template model at {models.pages(host)}, not {pages}")

    def learn(self, host: str, blocks: list[int]) -> Lesson:
        """Learn one more page of ``host`` into this worker's copy of its model."""
        models = self.models
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
            snapshot = encode_snapshot(pages, len(models.template(host)), keys, counts)
        return Lesson(host, learned, pack_sorted(fresh), made, snapshot, saved)

    def undo(self, lesson: Lesson | None) -> None:
        if lesson is not None:
            self.models.rollback(lesson.host, lesson.saved, lesson.made)

    def committed(self, host: str, hid: int, lesson: Lesson | None) -> None:
        """A commit stood: the template blocks the page made go to this worker's copy of the
        template (which the commit found current)."""
        if hid:
            self.hids[host] = hid
            self.names[hid] = host
            if lesson is not None and lesson.made:
                self.templates.setdefault(hid, TemplateCopy()).extend(
                    np.array(lesson.made, ">u4").tobytes()
                )

    def catch_up(self, host: str, hid: int, start: int, rest: bytes) -> None:
        """Bring this worker's copy of a host's template up to Redis's (``rest``: its blocks
        from ``start`` on)."""
        if not hid:
            return
        self.hids[host] = hid
        template = self.templates.get(hid)
        if template is None or start == 0 or len(template) != start:
            template = self.templates[hid] = TemplateCopy()
            start = 0
        template.extend(rest)


class IndexCopy:
    """This worker's copy of the crawl's index log: where each original's record is in the heap
    (length 0: none, as for a replaced original) and each anchor's postings, the ids of the
    originals that listed it, in commit order (those past
    :data:`~crawler.content.neardup_index.MAX_POSTING` never count, so the log does not carry
    them)."""

    def __init__(self) -> None:
        self.position = 0  # bytes of the log applied
        self.offset = np.zeros(256, np.int64)
        self.length = np.zeros(256, np.uint32)
        self.anchors = AnchorIndex(np.uint32)

    def apply(self, data: bytes) -> None:
        """Apply log entries: id (4 bytes), record offset (5) and length (3), anchors (count,
        4 bytes each)."""
        pos, end = 0, len(data)
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
            self.anchors.add(doc, np.frombuffer(data, ">u4", n, pos + 13).tolist())
            pos += 13 + 4 * n
        self.position += end
        self.anchors.settle()

    def postings(self, anchors: np.ndarray) -> list[list[int]]:
        return self.anchors.postings(anchors)

    def alive(self, doc: int) -> bool:
        return doc < len(self.length) and bool(self.length[doc])

    def where(self, doc: int) -> tuple[int, int]:
        return int(self.offset[doc]), int(self.length[doc])


@dataclass(slots=True)
class DecodedRecord:
    """A decoded original: its host id, the head of its record (for its URL), its sketch."""

    hid: int
    head: bytes
    title: int
    sketch: np.ndarray
    blocks: np.ndarray
    cover: int


class RecordCache:
    """The originals' records this worker decoded, by heap offset (the heap never changes what
    it holds), the most recently used kept."""

    def __init__(self, size: int = DECODED) -> None:
        self.size = size
        self._records: OrderedDict[int, DecodedRecord] = OrderedDict()

    def peek(self, off: int) -> DecodedRecord | None:
        return self._records.get(off)

    def get(self, off: int) -> DecodedRecord | None:
        """The record at ``off``, now the most recently used."""
        rec = self._records.get(off)
        if rec is not None:
            self._records.move_to_end(off)
        return rec

    def wants(self, index: IndexCopy, ranked: list[int]) -> tuple[bytes, bytes, list[int]]:
        """For ``READ``: where the ranked candidates' records this worker has not decoded are,
        the hosts of those it has (for their template lengths), and the records' offsets."""
        wants, hosts, offsets = [], set(), []
        for doc in ranked:
            off, length = index.where(doc)
            rec = self.get(off)
            if rec is None:
                wants.append(struct.pack(">BIBH", off >> 32, off & 0xFFFFFFFF,
                                         length >> 16, length & 0xFFFF))
                offsets.append(off)
            else:
                hosts.add(rec.hid)
        return b"".join(wants), b"".join(h.to_bytes(4, "big") for h in hosts), offsets

    def keep(self, off: int, rec: bytes) -> None:
        """Decode a record ``READ`` sent and keep it under its heap offset."""
        n = int.from_bytes(rec[12:14], "big")
        title, sketch, blocks, cover = decode_sketch(rec, 14 + n)
        self._records[off] = DecodedRecord(int.from_bytes(rec[8:12], "big"), rec[: 14 + n],
                                           title, sketch, blocks, cover)
        if len(self._records) > self.size:
            self._records.popitem(last=False)
