"""Near-duplicate detection in this process: exact fingerprints, then bottom-k sketches of the
host-template-free main text.

Plain Python, no Scrapy: :class:`NearDuplicateDetector` takes (url, main text) and answers
"new", or "duplicate of <url> with similarity s". The pipeline is a thin adapter over it.

What a page is compared on is :mod:`crawler.content.neardup_features`'s; how the decision is
made, :mod:`crawler.content.neardup_decide`'s pure functions, which the shared detector of
:mod:`crawler.backends.redis.neardup` (its state in Redis) calls alike; this module keeps the
state they are asked about, in this process's memory, and its journal.

State (``bench/realpages.py --costs``: ~1.4 KB per page):
per original its sketch and block ids packed in one pool (~5.4 bytes per kept hash on real
pages, at most ``num_perm`` hashes: 4 for the hash, a byte indexing its block, 4 per distinct
block), 16 anchors in the candidate index, its URL and fingerprint; per duplicate its URL
and a few bytes; per host the template model's block counts (7 bytes a block, pruned). It is
journaled (:meth:`NearDuplicateDetector.drain`) so a pipeline can append it to a file every few
seconds and :meth:`NearDuplicateDetector.replay` it on resume.

A refetched URL replaces its own entry (it is never its own duplicate). Per-host counters of
duplicates feed the frontier (:meth:`NearDuplicateDetector.host_duplicate_ratio`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np

from crawler.content.config import NeardupConfig
from crawler.content.neardup_decide import (
    VERIFY,
    Candidate,
    Decision,
    Outcome,
    decide,
    pick_best,
    rank_candidates,
    similarity,
)
from crawler.content.neardup_features import (
    ANCHORS,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    HOST_MIN_PAGES,
    Features,
    block_hash,
    compute_features,
    title_hash,
)
from crawler.content.neardup_index import AnchorIndex, Packed, SketchPool
from crawler.content.normalize import normalize_lines
from crawler.content.template import HostTemplates

__all__ = [
    "DEFAULT_NUM_PERM",
    "DEFAULT_SHINGLE_SIZE",
    "DEFAULT_THRESHOLD",
    "Decision",
    "Features",
    "NearDuplicateDetector",
    "block_hash",
    "compute_features",
    "title_hash",
]


class NearDuplicateDetector:
    """In-memory near-duplicate index of the pages a crawl has kept.

    Not thread-safe: one thread at a time. ``runs_in_thread`` tells the pipeline it may make
    every call from the crawl's content thread (one thread, calls in item order) instead of the
    reactor's; reads of the per-host counters (:meth:`host_duplicate_ratio`) may come from
    another thread. ``num_perm`` is the sketch size (hash values kept per page).
    """

    runs_in_thread: ClassVar[bool] = True

    def __init__(
        self,
        shingle_size: int = DEFAULT_SHINGLE_SIZE,
        num_perm: int = DEFAULT_NUM_PERM,
        threshold: float = DEFAULT_THRESHOLD,
        candidate_recall: float = 0.99,
        seed: int = 1,
    ) -> None:
        if shingle_size < 1:
            raise ValueError("shingle_size must be at least 1")
        if not 0.0 < threshold <= 1.0:
            raise ValueError("threshold must be in (0, 1]")
        if num_perm < ANCHORS:
            raise ValueError(f"num_perm must be at least {ANCHORS}")
        self.shingle_size = shingle_size
        self.num_perm = num_perm
        self.threshold = threshold
        self.seed = seed
        self.templates = HostTemplates()
        self._template_arrays: dict[str, tuple[int, np.ndarray]] = {}
        # Sketches of originals, packed (doc's at _offset[doc], _length[doc], _distinct[doc]):
        # no row of num_perm for a duplicate or a short page
        self._pool = SketchPool(num_perm)
        self._offset = np.zeros(64, dtype=np.int64)
        self._length = np.zeros(64, dtype=np.uint16)
        self._distinct = np.zeros(64, dtype=np.uint16)
        self._cover = np.zeros(64, dtype=np.uint32)
        self._alive = np.zeros(64, dtype=bool)
        self._host_of = np.zeros(64, dtype=np.int32)
        self._title = np.zeros(64, dtype=np.uint32)  # 0: no title known
        self._host_names: list[str] = []
        self._host_index: dict[str, int] = {}
        self._anchors = AnchorIndex(np.int32)
        self._urls: list[str] = []  # doc id -> URL
        self._ids: dict[str, int] = {}  # URL -> doc id (originals and duplicates)
        self._fingerprints: dict[bytes, int] = {}  # fingerprint -> doc id of the original
        self._fingerprint_of: dict[int, bytes] = {}  # doc id -> its fingerprint (originals)
        self._hosts: dict[str, list[int]] = {}  # host -> [pages, duplicates]
        self._journal: list[tuple[Any, ...]] = []

    @classmethod
    def from_crawler(cls, crawler: Any) -> NearDuplicateDetector:
        """``neardup_store``'s constructor: the ``NEARDUP_*`` settings of the crawl."""
        s = crawler.settings
        return cls(
            threshold=NeardupConfig.from_settings(s).threshold,
        )

    @property
    def params(self) -> tuple[Any, ...]:
        return ("sketch-1", self.shingle_size, self.num_perm, self.threshold, self.seed)

    # --- features -------------------------------------------------------------------------

    def features(self, text: str, host: str = "", *, lines: list[str] | None = None) -> Features:
        """Fingerprint, blocks and the template-free sketch of a main text (see the module);
        ``lines``: its :func:`normalize_lines` when the caller has them already."""
        if lines is None:
            lines = normalize_lines(text)
        return compute_features(lines, self.templates.template(host), self.shingle_size,
                                self.num_perm)

    def observe(self, url: str, text: str) -> None:
        """Learn ``url``'s blocks into its host's template model without recording the page
        (a crawl learns from every original it checks; this is for warming a model up)."""
        host = urlsplit(url).hostname or ""
        self.templates.learn(host, (block_hash(line) for line in normalize_lines(text)))

    # --- the decision ---------------------------------------------------------------------

    def check(
        self,
        url: str,
        text: str,
        *,
        add: bool = True,
        title: str | None = None,
        lines: list[str] | None = None,
    ) -> Decision:
        """Decide whether the page at ``url`` with main text ``text`` duplicates an original.

        With ``add`` (the default) the page is recorded: as an original when it is not a
        duplicate (and its blocks teach its host's template model), otherwise as a duplicate
        of one; ``add=False`` only looks (noindex pages, the explain command). A refetched URL
        replaces its earlier entry. ``title`` (the page's ``<title>``) raises the bar for two
        pages of different titles to :data:`OTHER_TITLE_THRESHOLD`. ``lines``:
        ``normalize_lines(text)`` when the caller made them already (the page's parse did, for
        its change fingerprint), so the text is not normalized again.
        """
        host = urlsplit(url).hostname or ""
        f = self.features(text, host, lines=lines)
        title_id = title_hash(title)
        own = self._ids.get(url)
        owner = self._fingerprints.get(bytes.fromhex(f.fingerprint)) if f.words else None
        outcome = decide(
            f, own, owner, self._urls.__getitem__,
            lambda: self._best_candidate(f, host, own, title_id), self.threshold,
        )
        if add:
            self._apply(url, host, own, outcome, f, title_id)
        return outcome.decision

    def _apply(
        self, url: str, host: str, own: int | None, outcome: Outcome, f: Features, title_id: int
    ) -> None:
        """Record a checked page as :func:`decide` says (the in-memory state's write side)."""
        action, decision = outcome.action, outcome.decision
        if action == "unchanged":
            self._count(host, duplicate=False)
        elif action == "new":
            self._record(url, host, own, decision, None, f, title_id)
        else:  # empty, exact, near
            self._record(url, host, own, decision, outcome.original, None)
            if outcome.teaches:
                self.templates.learn(host, f.blocks)

    def _template_array(self, host: str) -> np.ndarray:
        template = self.templates.template(host)
        cached = self._template_arrays.get(host)
        if cached is None or cached[0] != len(template):
            arr = np.fromiter(template, np.uint32, len(template))
            arr.sort()
            cached = self._template_arrays[host] = (len(template), arr)
        return cached[1]

    def _candidates(self, anchors: np.ndarray, exclude: int | None) -> list[int]:
        """The originals to verify: :func:`rank_candidates` over the first postings of each
        anchor, in the order they were stored."""
        alive = self._alive
        return [d for d in rank_candidates(self._anchors.postings(anchors), exclude)
                if alive[d]][:VERIFY]

    def _best_candidate(
        self, f: Features, host: str, exclude: int | None, title_id: int = 0
    ) -> tuple[int | None, float]:
        docs = self._candidates(f.sketch[:ANCHORS], exclude)
        if not docs:
            return None, 0.0
        candidates = []
        for doc in docs:
            other_host = self._host_names[self._host_of[doc]]
            sketch, blocks, cover = self._stored(doc)
            candidates.append(Candidate(
                doc, sketch, blocks, cover, int(self._title[doc]),
                self._template_array(other_host) if other_host != host else None,
            ))
        return pick_best(f, title_id, candidates, self._template_array(host), self.threshold)

    def _similarity(
        self,
        sketch: np.ndarray,
        blocks: np.ndarray,
        cover: int,
        doc: int,
        template_a: np.ndarray,
        template_b: np.ndarray | None,
    ) -> tuple[float, float]:
        """:func:`similarity` of a sketch and the stored original ``doc``."""
        other, other_blocks, other_cover = self._stored(doc)
        return similarity(sketch, blocks, cover, other, other_blocks, other_cover,
                          template_a, template_b)

    # --- bookkeeping ----------------------------------------------------------------------

    def _host_id(self, host: str) -> int:
        hid = self._host_index.get(host)
        if hid is None:
            hid = self._host_index[host] = len(self._host_names)
            self._host_names.append(host)
        return hid

    def _record(
        self,
        url: str,
        host: str,
        own: int | None,
        decision: Decision,
        original: int | None,
        features: Features | None,
        title_id: int = 0,
    ) -> None:
        if own is None:
            own = len(self._urls)
            self._urls.append(url)
            self._ids[url] = own
            self._grow(own)
        else:
            self._forget_content(own)
        self._host_of[own] = self._host_id(host)
        self._title[own] = title_id
        if original is None and decision.kind != "empty":
            key = bytes.fromhex(decision.fingerprint)
            self._fingerprints[key] = own
            self._fingerprint_of[own] = key
            if features is not None:
                self.templates.learn(host, features.blocks)
                self._store(own, features.sketch, features.sketch_blocks, features.cover)
                # the sketch is copied out of the pool at drain time (append-only: the slice
                # stays valid), not held twice until then
                self._journal.append((
                    "o", url, host, key,
                    Packed(int(self._offset[own]), int(self._length[own]),
                           int(self._distinct[own])), None,
                    features.cover, title_id,
                ))
            else:
                self._journal.append(("o", url, host, key, b"", b"", 0xFFFFFFFF, title_id))
        else:
            self._journal.append(("d", url, host, original is not None))
        self._count(host, duplicate=original is not None)

    def _grow(self, doc: int) -> None:
        if doc < len(self._cover):
            return
        size = max(doc + 1, len(self._cover) + len(self._cover) // 4 + 64)
        for name in ("_offset", "_length", "_distinct", "_cover", "_alive", "_host_of",
                     "_title"):
            old = getattr(self, name)
            grown = np.zeros(size, dtype=old.dtype)
            grown[: len(old)] = old
            setattr(self, name, grown)

    def _stored(self, doc: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The stored sketch of ``doc``, the block of each of its hashes, and its cover."""
        sketch, blocks = self._pool.get(int(self._offset[doc]), int(self._length[doc]),
                                        int(self._distinct[doc]))
        return sketch, blocks, int(self._cover[doc])

    def _store(self, doc: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> None:
        # a refetched original's old sketch stays in the pool, unused
        self._offset[doc], self._length[doc], self._distinct[doc] = self._pool.put(sketch, blocks)
        self._cover[doc] = cover
        self._alive[doc] = True
        self._anchors.add(doc, sketch[:ANCHORS].tolist())
        self._anchors.settle()

    def _forget_content(self, doc: int) -> None:
        """Drop what a refetched URL said before (its sketch and fingerprint)."""
        key = self._fingerprint_of.pop(doc, None)
        if key is not None and self._fingerprints.get(key) == doc:
            del self._fingerprints[key]
        self._alive[doc] = False  # its anchors stay in the index, skipped as candidates

    def _count(self, host: str, duplicate: bool) -> None:
        counts = self._hosts.setdefault(host, [0, 0])
        counts[0] += 1
        counts[1] += duplicate

    # --- persistence ------------------------------------------------------------------------

    def drain(self) -> list[tuple[Any, ...]]:
        """The records made since the last drain (originals, duplicates, template blocks), for
        a pipeline to append to its journal; :meth:`replay` of every drained record in order
        rebuilds the detector."""
        records = self._journal
        self._journal = []
        for i, record in enumerate(records):
            if record[0] == "o" and isinstance(record[4], Packed):
                sketch, blocks = self._pool.get(*record[4])
                records[i] = (*record[:4], sketch.tobytes(), blocks.tobytes(), *record[6:])
        for host, block in self.templates.journal:
            records.append(("t", host, block, self.templates.pages(host)))
        self.templates.journal = []
        return records

    def replay(self, records: Iterable[tuple[Any, ...] | list[Any]]) -> int:
        """Apply drained records (see :meth:`drain`); returns how many were applied."""
        n = 0
        for record in records:
            kind = record[0]
            if kind == "o":
                _, url, host, key, sketch, blocks, cover, title_id = record
                own = self._ids.get(url)
                decision = Decision(bytes(key).hex())
                self._record(url, host, own, decision, None, None, int(title_id))
                own = self._ids[url]
                if sketch:
                    self._store(own, np.frombuffer(sketch, np.uint32),
                                np.frombuffer(blocks, np.uint32), int(cover))
            elif kind == "d":
                _, url, host, duplicate = record
                own = self._ids.get(url)
                if duplicate:
                    self._record(url, host, own, Decision("", "?", kind="near"), -1, None)
                else:
                    self._record(url, host, own, Decision("", kind="empty"), None, None)
            elif kind == "t":
                _, host, block, pages = record
                self.templates.add_template(host, int(block))
                self.templates.set_pages(host, int(pages))
            n += 1
        self._journal = []
        return n

    def records(self) -> list[tuple[Any, ...]]:
        """Every record of the current state (a compacted journal)."""
        out: list[tuple[Any, ...]] = []
        for host, hid in self._host_index.items():
            for block in self.templates.template(host):
                out.append(("t", host, block, self.templates.pages(host)))
            del hid
        for doc, url in enumerate(self._urls):
            host = self._host_names[self._host_of[doc]]
            key = self._fingerprint_of.get(doc)
            if key is None:
                out.append(("d", url, host, True))
                continue
            if self._alive[doc]:
                sketch, blocks, _ = self._stored(doc)
                out.append(("o", url, host, key, sketch.tobytes(), blocks.tobytes(),
                            int(self._cover[doc]), int(self._title[doc])))
            else:
                out.append(("o", url, host, key, b"", b"", 0xFFFFFFFF, int(self._title[doc])))
        return out

    # --- queries --------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of URLs recorded (originals and duplicates)."""
        return len(self._urls)

    @property
    def originals(self) -> int:
        return len(self._fingerprints)

    def host_duplicate_ratio(
        self, host: str, min_pages: int = HOST_MIN_PAGES
    ) -> float:
        """Share of ``host``'s checked pages (fetches) that were duplicates; 0 until ``min_pages``.

        The frontier lowers the priority of hosts whose pages are mostly duplicates (mirrors,
        session-id URL spaces, calendars). ``min_pages`` keeps one early duplicate from
        penalizing a host.
        """
        pages, dups = self._hosts.get(host, (0, 0))
        if pages < min_pages:
            return 0.0
        return dups / pages

    def state(self) -> dict[str, Any]:
        """Everything needed to rebuild the detector (its records and host counters)."""
        return {"params": self.params, "records": self.records(),
                "hosts": {h: list(c) for h, c in self._hosts.items()}}

    def restore(self, state: dict[str, Any]) -> bool:
        """Load a :meth:`state`; False (and nothing changed) if it was made with other params."""
        if tuple(state.get("params", ())) != self.params:
            return False
        self.replay(state["records"])
        self._hosts = {h: list(c) for h, c in state.get("hosts", {}).items()}
        return True
