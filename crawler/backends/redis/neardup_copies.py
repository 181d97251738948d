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

A worker keeps a host's template in its copy of the model (another host's, a candidate's, without
the rest of it), and brings the template to Redis's before the model: its copy then counts no
block that became template since, which it drops (:meth:`HostTemplates.uncount_template`), and
ends where the model learned page by page would.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from crawler.backends.redis.neardup_codec import (
    decode_snapshot,
    encode_snapshot,
    pack_sorted,
    unpack_sorted,
)
from crawler.backends.redis.neardup_state import TLEN, NeardupState
from crawler.content.template import PRUNE_EVERY, HostTemplates


@dataclass
class Lesson:
    """What a page teaches its host's model, learned into the worker's copy until the commit
    says whether it stands."""

    hid: int
    learned: int  # the model's pages before this one (its version)
    entry: bytes  # the page's log entry
    made: list[int]  # blocks it made template
    snapshot: bytes  # the model after it, when it pruned (else empty)
    saved: Any  # HostTemplates.checkpoint, to undo it


class HostCopies:
    """This worker's copies of the hosts' template models, their templates with them (by host
    id), and the hosts' ids."""

    def __init__(self, budget: int) -> None:
        self.budget = budget  # bytes the copies may take; the least recently used hosts go
        self.hids: dict[str, int] = {}  # host -> host id in Redis (never changes)
        self.names: dict[int, str] = {}  # host id -> host (of those in hids)
        self.models = HostTemplates()  # by host id
        self.replayed = 0  # pages other workers taught that this worker learned from the log
        self._arrays: dict[int, tuple[int, np.ndarray]] = {}  # host id -> its template, sorted
        self._used: OrderedDict[int, int] = OrderedDict()  # host id -> bytes, by last use
        self.used = 0

    def version(self, hid: int) -> int:
        """The length of the copy of host ``hid``'s template (it only grows: its version)."""
        return len(self.models.template(hid))

    def current(self, hid: int, meta: int) -> bool:
        """Whether the copy of host ``hid``'s template and model are Redis's (``meta``: its
        ``:v`` field)."""
        return meta & TLEN == self.version(hid) and meta >> 24 == self.models.pages(hid)

    def template(self, hid: int) -> np.ndarray:
        """The sorted blocks of the copy of host ``hid``'s template."""
        template = self.models.template(hid)
        cached = self._arrays.get(hid)
        if cached is None or cached[0] != len(template):
            blocks = np.sort(np.fromiter(template, np.uint32, len(template)))
            cached = self._arrays[hid] = (len(template), blocks)
        return cached[1]

    def touch(self, hid: int) -> None:
        """Host ``hid``'s copies were just used: counted at their size, the most recent."""
        if not hid:
            return
        # 7 bytes per counted block (numpy), a template block in a Python set and an array (~80)
        size = 7 * self.models.counted(hid) + 80 * self.version(hid) + 600
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
            self.models.forget(hid)
            self._arrays.pop(hid, None)
            self.hids.pop(self.names.pop(hid, ""), None)

    def catch_up(self, store: NeardupState, hid: int) -> None:
        """Bring the copy of host ``hid``'s template and model to Redis's: the template's
        blocks it lacks, then the model's log since its version (or the snapshot at the last
        pruning and the log since)."""
        models, have = self.models, self.version(hid)
        meta, rest, snapshot, log = store.host_state(hid, have)
        if have > meta & TLEN:  # ahead of Redis (it lost writes): read it whole next time
            models.forget(hid)
            return
        models.add_template(hid, *np.frombuffer(rest, ">u4").tolist())
        pages, learned = meta >> 24, models.pages(hid)
        base = int.from_bytes(snapshot[:4], "big") if snapshot else 0
        if pages == learned:
            return
        if base <= learned <= base + len(log):
            log = log[learned - base :]
        elif snapshot:
            _, keys, counts = decode_snapshot(snapshot)
            models.load(hid, base, keys, counts, set(models.template(hid)))
        else:
            models.seed(hid, 0, models.template(hid))
        for entry in log:
            models.learn(hid, unpack_sorted(entry)[0].tolist())
            self.replayed += 1
        models.journal.clear()
        models.uncount_template(hid)
        if models.pages(hid) != pages:
            raise RuntimeError(f"host {hid}: template model at {models.pages(hid)}, not {pages}")

    def learn(self, hid: int, blocks: list[int]) -> Lesson:
        """Learn one more page of host ``hid`` into this worker's copy of its model."""
        models = self.models
        template = models.template(hid)
        fresh = np.unique(
            np.fromiter((b for b in blocks if b not in template) if template else blocks, np.uint32)
        )
        learned = models.pages(hid)
        saved = models.checkpoint(hid)
        made = models.learn(hid, fresh.tolist())
        models.journal.clear()
        snapshot = b""
        if models.pages(hid) % PRUNE_EVERY == 0:
            pages, keys, counts = models.counts(hid)
            snapshot = encode_snapshot(pages, keys, counts)
        return Lesson(hid, learned, pack_sorted(fresh), made, snapshot, saved)

    def undo(self, lesson: Lesson | None) -> None:
        if lesson is not None:
            self.models.rollback(lesson.hid, lesson.saved, lesson.made)

    def refresh(self, store: NeardupState, hids: Iterable[int], tlens: dict[int, int]) -> bool:
        """Bring the copies of the templates of ``hids`` (the candidates' other hosts) to the
        lengths read with them (one round trip when some grew); False if one has grown further
        meanwhile."""
        stale = {h: self.version(h) for h in hids if self.version(h) < tlens[h]}
        if not stale:
            return True
        for hid, rest in zip(stale, store.templates(stale), strict=True):
            self.models.add_template(hid, *np.frombuffer(rest, ">u4").tolist())
        return all(self.version(h) == tlens[h] for h in stale)
