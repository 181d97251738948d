"""What a worker of the shared near-duplicate detector keeps of the crawl's state in Redis, within
half of ``DEFAULT_CACHE_BYTES`` (``neardup``; the records it decoded the other half): the
templates and template models of the hosts it met, the least recently used dropped (read again
when a page needs them). Nothing of it is needed to decide: a new worker starts empty.

**Template models.** A host's model lives in Redis as a log (one field per counted block was
most of the store's bytes and time): each page that taught it, as its distinct blocks not yet
template (``pack_sorted``), and at every pruning (each
:data:`~crawler.content.template.PRUNE_EVERY` pages, where the model is smallest) a *snapshot*
that replaces the log so far. A worker brings its copy up to date from the log (the entries
since its copy's version, or the snapshot and the log), learns a page there before the commit
(a :class:`Lesson`, undone if the commit is refused) and sends the commit the page's log entry,
the blocks it made template and, at a pruning, the snapshot. The template only grows, so its
length is its version; a model's version is its pages learned.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crawler.backends.redis.neardup_codec import (
    Record,
    decode_snapshot,
    encode_snapshot,
    pack_sorted,
    unpack_sorted,
)
from crawler.backends.redis.neardup_state import batch
from crawler.content.template import PRUNE_EVERY, HostTemplates

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


class HostCopies:
    """This worker's copies of the hosts' ids, templates (by host id) and template models (by
    host)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget  # bytes the copies may take; the least recently used hosts go
        self.hids: dict[str, int] = {}  # host -> host id in Redis (never changes)
        self.names: dict[int, str] = {}  # host id -> host
        self.templates: dict[int, TemplateCopy] = {}  # host id -> this worker's copy
        self.models = HostTemplates()  # this worker's copies of the hosts' models
        self.replayed = 0  # pages other workers taught that this worker learned from the log
        self._used: OrderedDict[int, int] = OrderedDict()  # host id -> bytes, by last use
        self.used = 0

    def touch(self, hid: int) -> None:
        """Host ``hid``'s copies were just used: counted at their size, the most recent."""
        if not hid:
            return
        host = self.names.get(hid, "")
        template = self.templates.get(hid)
        tlen = len(template) if template is not None else 0
        # 7 bytes per counted block (numpy), a template block in two Python sets (~150)
        size = 7 * self.models.counted(host) + 150 * (tlen + len(self.models.template(host))) + 600
        self.used += size - self._used.pop(hid, 0)
        self._used[hid] = size

    def evict(self, keep: int = 0) -> None:
        """Drop the least recently used hosts' copies (not ``keep``'s) until within budget;
        they are read again from Redis when a page needs them."""
        while self.used > self.budget and self._used:
            hid = next(iter(self._used))
            if hid == keep:
                if len(self._used) == 1:
                    return
                self._used.move_to_end(hid)
                continue
            self.used -= self._used.pop(hid)
            self.templates.pop(hid, None)
            host = self.names.pop(hid, None)
            if host is not None:
                self.hids.pop(host, None)
                self.models.forget(host)

    def template(self, hid: int) -> np.ndarray:
        """The sorted blocks of the copy of host ``hid``'s template."""
        copy = self.templates.get(hid)
        return copy.array() if copy is not None else EMPTY

    def follow(self, host: str, hid: int, model: list[Any]) -> None:
        """Bring this worker's copy of ``host``'s model to Redis's version (what it read:
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

    def committed(self, hid: int, lesson: Lesson | None) -> None:
        """A commit stood: the template blocks the page made go to this worker's copy of the
        template (which the commit found current)."""
        if lesson is not None and lesson.made:
            self.extend(hid, np.array(lesson.made, ">u4").tobytes())

    def extend(self, hid: int, more: bytes) -> None:
        """Blocks Redis added to host ``hid``'s template after those this worker has."""
        self.templates.setdefault(hid, TemplateCopy()).extend(more)

    def refresh(
        self, client: Any, keys: Any, hid: int, records: Iterable[Record],
        tlens: dict[int, int],
    ) -> bool:
        """Bring the copies of the candidates' hosts' templates (not ``hid``'s, current) to
        the lengths read with them (one pipelined round trip when some grew); False if one has
        grown further meanwhile."""
        have = {r.hid: len(self.templates.get(r.hid) or ()) for r in records if r.hid != hid}
        stale = {other: n for other, n in have.items() if n < tlens[other]}
        if not stale:
            return True
        got = batch(client, [("GETRANGE", keys.template(o), n * 4, -1) for o, n in stale.items()])
        for other, rest in zip(stale, got, strict=True):
            self.extend(other, rest)
        return all(len(self.templates[other]) == tlens[other] for other in stale)
