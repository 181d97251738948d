"""Near-duplicate detection: exact fingerprints, then bottom-k sketches of the host-template-free
main text.

Plain Python, no Scrapy: :class:`NearDuplicateDetector` takes (url, main text) and answers
"new", or "duplicate of <url> with similarity s". The pipeline is a thin adapter over it.

How a decision is made (the defaults are justified by ``bench/neardup.py`` on the synthetic set
and ``bench/realpages.py`` on real documentation pages):

1. The main text is normalized (:func:`crawler.content.normalize.normalize_text`: counters,
   dates, session ids masked, version strings kept) and fingerprinted; a fingerprint already
   owned by another URL is an exact duplicate (similarity 1.0). Mirrors land here. The
   fingerprint is of the *whole* main text, independent of anything learned, so it is also the
   crawl database's stable change fingerprint.
2. Each line of the main text is a block. Blocks that recur on many distinct pages of the host
   are its template (:mod:`crawler.content.template`: rustdoc's trait implementations, the
   shared option sections of one command family) and are left out of the comparison.
3. What is left is shingled (``shingle_size`` words, at most :data:`MAX_SHINGLES`) and kept as a
   bottom-k sketch: the ``num_perm`` smallest 32-bit shingle hashes, each with the hash of the
   block it came from. Because every entry knows its block, a stored sketch can be filtered
   *later* by template blocks learned since, and by the template of the other page's host (a
   mirror on a fresh host), so both sides of a comparison always leave out the same blocks.
   The similarity is the Jaccard similarity of the two filtered sketches over the hash range
   both cover (exact when both pages are small).
4. Candidates come from an inverted index of each original's :data:`ANCHORS` smallest hashes
   (a near-duplicate shares most of them); the candidates sharing the most anchors are
   verified, and the decision is ``similarity >= threshold``.
5. A page that is not a duplicate becomes an original and teaches the host's template model;
   duplicates never become originals, so ``duplicate_of`` always names an original (no chains),
   and the first URL seen with a content is its original.

Deliberate cases: a page whose main text, template left out, is empty (a page that is all
template) is compared exactly only. A *tiny* page, under :data:`MIN_WORDS` words (a stub, an
index of one entry, a redirect stub whose only line of its own is its heading), is compared only
with pages of its title, and only as "the same lines plus one inserted run of lines"
(:func:`tiny_insertion`): a handful of shingles cannot tell a near-duplicate from a sibling, but
an edit (a "last updated" line, a banner, a paragraph) leaves the page's lines whole. Link-list
pages (indexes, tables of contents) are compared on their link texts: main-text extraction keeps
link-heavy blocks when a page has little else, or when they outweigh the rest of a part the page
declares its main content (:mod:`crawler.content.maintext`), so an index page is its list of
entries and one inserted paragraph does not outweigh it. Pages of one ``<title>`` get two more
rules (:func:`pick_best`): a page with *one block inserted* (a paragraph added to a short page,
whose Jaccard similarity is ~0.5 by construction) is a near-duplicate when the smaller page's
sketch is all in the larger's but for the shingles that spanned the insertion point
(:func:`insertion`); and two *short* pages (under :data:`SHORT_PAGE` shingles) must share whole
lines (:func:`keeps_lines`): on a sentence or two, an edited word cannot be told from a sibling
naming something else (Doxygen's "complete list of members for <class>"), but real edits add
lines.

State (``bench/realpages.py --costs``: ~1.4 KB per page):
per original its sketch and block ids packed in one pool (~5.4 bytes per kept hash on real
pages, at most ``num_perm`` hashes: 4 for the hash, a byte indexing its block, 4 per distinct
block), 16 anchors in the candidate index, its URL and fingerprint; per duplicate its URL
and a few bytes; per host the template model's block counts (7 bytes a block, pruned). It is
journaled (:meth:`NearDuplicateDetector.drain`) so a pipeline can append it to a file every few
seconds and :meth:`NearDuplicateDetector.replay` it on resume.

A refetched URL replaces its own entry (it is never its own duplicate). Per-host counters of
duplicates feed the frontier (:meth:`NearDuplicateDetector.host_duplicate_ratio`).

The decision itself is a set of pure functions (:func:`compute_features`,
:func:`rank_candidates`, :func:`pick_best`, :func:`decide`) over what the state answers (the
page's own id, the owner of its fingerprint, the first postings of its anchors, the stored
candidates, the hosts' templates), so the shared detector of
:mod:`crawler.backends.redis.neardup`, whose state is in Redis, decides exactly as this one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple
from urllib.parse import urlsplit

import numpy as np

from crawler.config import defaults
from crawler.content.normalize import content_fingerprint, normalize_lines, normalize_text
from crawler.content.shingles import shingle_hashes32, shingle_set, shingle_texts
from crawler.content.template import HostTemplates

__all__ = [
    "DEFAULT_NUM_PERM",
    "DEFAULT_SHINGLE_SIZE",
    "DEFAULT_THRESHOLD",
    "Candidate",
    "Decision",
    "Explanation",
    "Features",
    "NearDuplicateDetector",
    "Outcome",
    "compute_features",
    "decide",
    "exact_similarity",
    "explain",
    "insertion",
    "keeps_lines",
    "lsh_params",
    "pick_best",
    "rank_candidates",
    "similarity",
    "tiny",
    "tiny_insertion",
    "title_hash",
]

# The NEARDUP_* defaults (chosen with the benches; the reasons are in crawler/config/defaults.py).
DEFAULT_SHINGLE_SIZE = defaults.NEARDUP_SHINGLE_SIZE
DEFAULT_NUM_PERM = defaults.NEARDUP_NUM_PERM
DEFAULT_THRESHOLD = defaults.NEARDUP_THRESHOLD
# A page with fewer words than this (template left out) is tiny: compared only as its own lines
# plus one inserted run (tiny_insertion).
MIN_WORDS = 8
ANCHORS = 16  # smallest hashes of an original in the candidate index
MAX_POSTING = 48  # candidates taken per anchor (a template shingle's list can be long)
VERIFY = 12  # candidates verified, those sharing the most anchors first
MAX_SHINGLES = 50_000  # shingles of one page fed to the sketch (the page's start)
# Pages whose titles differ name different things (two commands, two structs of one module):
# they must be this similar to be near-duplicates. A mirror with another title suffix, or an
# original and its edit, are far above it; siblings of one template are below.
OTHER_TITLE_THRESHOLD = 0.95
# A short page of one title (a template names such pages alike: Doxygen's every "Member
# List") must share whole blocks with a near-duplicate: most of one page's text (this share of
# its sketch's entries) is lines the other page has verbatim. On a page of a sentence or two an
# edited word cannot be told from a sibling naming something else ("the complete list of
# members for <class>": Jaccard 0.5-0.65), but a real edit of it adds, drops or moves lines (a
# banner, a date line, a paragraph; dates and counters are masked by normalization). On the
# real-pages set's tuning part every positive of similarity >= 0.5 has >= 0.9, every short
# sibling of one title 0-0.24. Longer pages are left to their words: a page lightly edited in
# every paragraph shares no line, and its many shingles say what it is.
SHARED_BLOCKS = 0.5
# ... when the smaller page has fewer shingles than this (template left out): "little content"
# in the sense of main-text extraction's LINK_LIST_WORDS, a paragraph's worth.
SHORT_PAGE = 40
# A near-duplicate this similar or more repeats its original and teaches the template model
# nothing; a less similar one (a sibling let through while the model was young) still teaches
# it, so a shared section flagged early becomes template instead of staying unlearned.
TEACHING_SIMILARITY = 0.9
_BUFFER = 4096  # anchor postings kept in a dict before they are merged into the sorted arrays


class _Packed(NamedTuple):
    """Where a journaled sketch sits in the detector's pool until the journal is drained."""

    offset: int
    length: int
    distinct: int


@dataclass(frozen=True, slots=True)
class Decision:
    """What the detector concluded about one page."""

    fingerprint: str
    duplicate_of: str | None = None  # URL of the original
    similarity: float | None = None  # estimated Jaccard to the original (1.0 when exact)
    kind: str = "new"  # "new", "exact", "near", "empty"
    words: int = 0

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate_of is not None


def lsh_params(num_perm: int, threshold: float, recall: float = 0.995) -> tuple[int, int]:
    """LSH bands ``(b, r)`` that catch a pair of similarity ``threshold`` with ``recall``.

    Kept for MinHash users (``bench/neardup.py`` section 4); the detector itself indexes anchors.
    Among the (b, r) with ``b * r <= num_perm`` that reach the recall, the one with the largest
    ``r`` (fewest false candidates) and then the fewest bands (least memory); if none reaches
    it, the one with the best recall.
    """
    best: tuple[int, int] | None = None
    best_key: tuple[float, ...] = ()
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if b < 2:
            break
        p = 1.0 - (1.0 - threshold**r) ** b
        if p >= recall:
            b_min = math.ceil(math.log(1.0 - recall) / math.log(1.0 - threshold**r))
            b = max(2, min(b, b_min))
            key: tuple[float, ...] = (1.0, r, -b)
        else:
            key = (0.0, p, -b)
        if key > best_key:
            best, best_key = (b, r), key
    assert best is not None
    return best


def exact_similarity(text_a: str, text_b: str, shingle_size: int = DEFAULT_SHINGLE_SIZE) -> float:
    """Exact Jaccard similarity of the two texts' shingle sets (after normalization)."""
    a = shingle_set(normalize_text(text_a), shingle_size)
    b = shingle_set(normalize_text(text_b), shingle_size)
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted, non-empty ``sorted_set``: a binary search
    per value. ``np.isin`` sorts (or hashes) both arrays on every call, and the detector makes
    two such calls per candidate and template: it was a third of a crawl's near-duplicate
    time."""
    at = np.searchsorted(sorted_set, values)
    np.minimum(at, len(sorted_set) - 1, out=at)
    return sorted_set[at] == values


def merge_postings(
    keys: np.ndarray,
    docs: np.ndarray,
    buffer: dict[int, list[int]],
    count: int,
    doc_type: type[np.integer[Any]],
) -> tuple[np.ndarray, np.ndarray]:
    """The anchor index's sorted ``keys`` and their ``docs`` with the ``count`` postings of
    ``buffer`` (anchor -> docs, in the order stored) merged in; a stable sort keeps earlier
    postings first within an anchor, which is what :data:`MAX_POSTING` keeps."""
    new_keys = np.fromiter((k for k, ds in buffer.items() for _ in ds), np.uint32, count)
    new_docs = np.fromiter((d for ds in buffer.values() for d in ds), doc_type, count)
    keys = np.concatenate((keys, new_keys))
    docs = np.concatenate((docs, new_docs))
    order = np.argsort(keys, kind="stable")
    return keys[order], docs[order]


def block_hash(normalized_line: str) -> int:
    """Stable 32-bit id of a normalized block (the same in every process and worker)."""
    return int.from_bytes(
        hashlib.blake2b(normalized_line.encode("utf-8"), digest_size=4).digest(), "little"
    )


@dataclass(slots=True)
class Features:
    """What the detector compares of one page."""

    fingerprint: str
    words: int  # words of the whole normalized main text
    kept_words: int  # words left once the host's template is out
    blocks: list[int]  # every block's hash (the template model learns from them)
    sketch: np.ndarray  # sorted distinct uint32 shingle hashes, at most num_perm
    sketch_blocks: np.ndarray  # the block of each
    cover: int  # every kept hash <= cover is in the sketch (0xFFFFFFFF: all of them)
    shingle_size: int = DEFAULT_SHINGLE_SIZE  # words per shingle of the sketch


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
        # Sketches of originals, packed: doc's hashes at _pool[o:o+n], its d distinct blocks
        # at _pool[o+n:o+n+d], then the block of each hash as a byte (two when num_perm > 256)
        # indexing those, four (two) to a word (o = _offset[doc], n = _length[doc],
        # d = _distinct[doc]): a page's 112 hashes come from ~40 blocks on real documentation,
        # so 5.4 bytes a hash instead of 8 (a block hash per hash); no row of num_perm for a
        # duplicate or a short page, and growth by a quarter, not doubling.
        self._pool = np.empty(0, dtype=np.uint32)
        self._pool_used = 0
        self._offset = np.zeros(64, dtype=np.int64)
        self._length = np.zeros(64, dtype=np.uint16)
        self._distinct = np.zeros(64, dtype=np.uint16)
        self._index_type = np.dtype(np.uint8 if num_perm <= 256 else np.uint16)
        self._cover = np.zeros(64, dtype=np.uint32)
        self._alive = np.zeros(64, dtype=bool)
        self._host_of = np.zeros(64, dtype=np.int32)
        self._title = np.zeros(64, dtype=np.uint32)  # 0: no title known
        self._host_names: list[str] = []
        self._host_index: dict[str, int] = {}
        self._keys = np.empty(0, dtype=np.uint32)  # anchor postings, sorted by key
        self._docs = np.empty(0, dtype=np.int32)
        self._buffer: dict[int, list[int]] = {}
        self._buffered = 0
        self._urls: list[str] = []  # doc id -> URL
        self._ids: dict[str, int] = {}  # URL -> doc id (originals and duplicates)
        self._fingerprints: dict[bytes, int] = {}  # fingerprint -> doc id of the original
        self._fingerprint_of: dict[int, bytes] = {}  # doc id -> its fingerprint (originals)
        self._hosts: dict[str, list[int]] = {}  # host -> [pages, duplicates]
        self._journal: list[tuple[Any, ...]] = []

    @classmethod
    def from_crawler(cls, crawler: Any) -> NearDuplicateDetector:
        """``NEARDUP_STORE_CLASS``'s constructor: the ``NEARDUP_*`` settings of the crawl."""
        s = crawler.settings
        return cls(
            shingle_size=s.getint("NEARDUP_SHINGLE_SIZE", defaults.NEARDUP_SHINGLE_SIZE),
            num_perm=s.getint("NEARDUP_NUM_PERM", defaults.NEARDUP_NUM_PERM),
            threshold=s.getfloat("NEARDUP_THRESHOLD", defaults.NEARDUP_THRESHOLD),
        )

    @property
    def params(self) -> tuple[Any, ...]:
        return ("sketch-1", self.shingle_size, self.num_perm, self.threshold, self.seed)

    # --- features -------------------------------------------------------------------------

    def features(self, text: str, host: str = "") -> Features:
        """Fingerprint, blocks and the template-free sketch of a main text (see the module)."""
        return compute_features(text, self.templates.template(host), self.shingle_size,
                                self.num_perm)

    def observe(self, url: str, text: str) -> None:
        """Learn ``url``'s blocks into its host's template model without recording the page
        (a crawl learns from every original it checks; this is for warming a model up)."""
        host = urlsplit(url).hostname or ""
        self.templates.learn(host, (block_hash(line) for line in normalize_lines(text)))

    # --- the decision ---------------------------------------------------------------------

    def check(
        self, url: str, text: str, *, add: bool = True, title: str | None = None
    ) -> Decision:
        """Decide whether the page at ``url`` with main text ``text`` duplicates an original.

        With ``add`` (the default) the page is recorded: as an original when it is not a
        duplicate (and its blocks teach its host's template model), otherwise as a duplicate
        of one; ``add=False`` only looks (noindex pages, the explain command). A refetched URL
        replaces its earlier entry. ``title`` (the page's ``<title>``) raises the bar for two
        pages of different titles to :data:`OTHER_TITLE_THRESHOLD`.
        """
        host = urlsplit(url).hostname or ""
        f = self.features(text, host)
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
        """The originals to verify: :func:`rank_candidates` over the first
        :data:`MAX_POSTING` postings of each anchor, in the order they were stored."""
        postings: list[list[int]] = []
        keys, docs = self._keys, self._docs
        if len(keys):
            lo = np.searchsorted(keys, anchors, "left")
            hi = np.minimum(np.searchsorted(keys, anchors, "right"), lo + MAX_POSTING)
            postings = [docs[a:b].tolist() for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        else:
            postings = [[] for _ in range(len(anchors))]
        for posting, anchor in zip(postings, anchors.tolist(), strict=True):
            if len(posting) < MAX_POSTING:  # the merged arrays hold the earlier postings
                posting.extend(self._buffer.get(anchor, ())[: MAX_POSTING - len(posting)])
        alive = self._alive
        return rank_candidates(postings, exclude, lambda d: bool(alive[d]))

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
        best, similarity = pick_best(
            f, title_id, candidates, self._template_array(host), self.threshold
        )
        return (best.doc if best is not None else None), similarity

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
                    _Packed(int(self._offset[own]), int(self._length[own]),
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
        sketch, blocks = self._unpack(int(self._offset[doc]), int(self._length[doc]),
                                      int(self._distinct[doc]))
        return sketch, blocks, int(self._cover[doc])

    def _unpack(self, o: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A sketch and the block of each of its hashes from the pool (see ``_pool``)."""
        pool = self._pool
        index = pool[o + n + d : o + n + d + self._index_words(n)].view(self._index_type)[:n]
        return pool[o : o + n], pool[o + n : o + n + d][index]

    def _index_words(self, n: int) -> int:
        per_word = 4 // self._index_type.itemsize
        return -(-n // per_word)

    def _store(self, doc: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> None:
        n = len(sketch)
        table, index = np.unique(blocks, return_inverse=True)
        d = len(table)
        words = self._index_words(n)
        size = n + d + words
        used = self._pool_used
        if used + size > len(self._pool):
            grown = np.empty(max(used + size, len(self._pool) * 5 // 4 + 4096), np.uint32)
            grown[:used] = self._pool[:used]
            self._pool = grown
        self._pool[used : used + n] = sketch
        self._pool[used + n : used + n + d] = table
        packed = self._pool[used + n + d : used + size]
        packed[:] = 0
        packed.view(self._index_type)[:n] = index.reshape(-1)
        self._offset[doc] = used
        self._length[doc] = n
        self._distinct[doc] = d
        self._pool_used = used + size  # a refetched original's old sketch stays unused
        self._cover[doc] = cover
        self._alive[doc] = True
        for anchor in sketch[:ANCHORS].tolist():
            self._buffer.setdefault(anchor, []).append(doc)
        self._buffered += min(n, ANCHORS)
        if self._buffered >= _BUFFER:
            self._merge_buffer()

    def _merge_buffer(self) -> None:
        if not self._buffer:
            return
        self._keys, self._docs = merge_postings(
            self._keys, self._docs, self._buffer, self._buffered, np.int32
        )
        self._buffer.clear()
        self._buffered = 0

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
            if record[0] == "o" and isinstance(record[4], _Packed):
                sketch, blocks = self._unpack(*record[4])
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
        self, host: str, min_pages: int = defaults.NEARDUP_HOST_MIN_PAGES
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


# --- the decision as pure functions: any state (memory, Redis) feeds them --------------------


def title_hash(title: str | None) -> int:
    """The id of a page's ``<title>`` (0: none) that :func:`pick_best` compares."""
    return block_hash(normalize_text(title)) if title else 0


def compute_features(
    text: str, template: set[int] | frozenset[int], shingle_size: int, num_perm: int
) -> Features:
    """Fingerprint, blocks and the sketch of a main text without the ``template`` blocks of its
    host (see the module)."""
    lines = normalize_lines(text)
    normalized = " ".join(lines)
    fingerprint = content_fingerprint(normalized)
    words = normalized.count(" ") + 1 if normalized else 0
    blocks = [block_hash(line) for line in lines]
    if template:
        kept = [(line, b) for line, b in zip(lines, blocks, strict=True) if b not in template]
    else:
        kept = list(zip(lines, blocks, strict=True))
    kept_text = " ".join(line for line, _ in kept)
    kept_words = kept_text.count(" ") + 1 if kept_text else 0
    if not kept_words:
        empty = np.empty(0, dtype=np.uint32)
        return Features(fingerprint, words, kept_words, blocks, empty, empty, 0xFFFFFFFF,
                        shingle_size)
    hashes = shingle_hashes32(kept_text, shingle_size)[:MAX_SHINGLES]
    per_line = np.fromiter((line.count(" ") + 1 for line, _ in kept), np.int64, len(kept))
    word_block = np.repeat(np.fromiter((b for _, b in kept), np.uint32, len(kept)), per_line)
    unique, first = np.unique(hashes, return_index=True)
    cover = int(unique[num_perm - 1]) if len(unique) > num_perm else 0xFFFFFFFF
    return Features(fingerprint, words, kept_words, blocks, unique[:num_perm],
                    word_block[first[:num_perm]], cover, shingle_size)


def rank_candidates(
    postings: Iterable[Iterable[int]], exclude: int | None, alive: Callable[[int], bool]
) -> list[int]:
    """The :data:`VERIFY` originals to verify: one vote per posting (each anchor's first
    :data:`MAX_POSTING` originals), live ones but ``exclude`` (the page's own id), most votes
    first, then the earliest stored."""
    votes: dict[int, int] = {}
    for posting in postings:
        for d in posting:
            votes[d] = votes.get(d, 0) + 1
    ranked = sorted((d for d in votes if d != exclude and alive(d)), key=lambda d: (-votes[d], d))
    return ranked[:VERIFY]


@dataclass(slots=True)
class Candidate:
    """A stored original as :func:`pick_best` compares it."""

    doc: int  # its id (ties go to the earliest)
    sketch: np.ndarray
    blocks: np.ndarray
    cover: int
    title: int  # title_hash of its title, 0 if none
    template: np.ndarray | None  # its host's template blocks (sorted); None: the page's host


def _filtered(
    sketch_a: np.ndarray,
    blocks_a: np.ndarray,
    cover_a: int,
    sketch_b: np.ndarray,
    blocks_b: np.ndarray,
    cover_b: int,
    template_a: np.ndarray,
    template_b: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Both sketches (and the block of each entry) over the hash range both cover, without
    either host's template: within that range each holds *every* kept hash of its page, so
    what one has and the other lacks is exact there."""
    limit = min(cover_a, cover_b)
    filters = [t for t in (template_a, template_b) if t is not None and len(t)]
    mine_keep = sketch_a <= limit
    other_keep = sketch_b <= limit
    for t in filters:  # templates are sorted: a binary search per block, no sort per call
        mine_keep &= ~_member(blocks_a, t)
        other_keep &= ~_member(blocks_b, t)
    return sketch_a[mine_keep], blocks_a[mine_keep], sketch_b[other_keep], blocks_b[other_keep]


def similarity(
    sketch_a: np.ndarray,
    blocks_a: np.ndarray,
    cover_a: int,
    sketch_b: np.ndarray,
    blocks_b: np.ndarray,
    cover_b: int,
    template_a: np.ndarray,
    template_b: np.ndarray | None,
) -> tuple[float, float]:
    """Jaccard similarity and containment of two sketches, both without either host's
    template, over the hash range both cover."""
    a, _, b, _ = _filtered(sketch_a, blocks_a, cover_a, sketch_b, blocks_b, cover_b,
                           template_a, template_b)
    if not len(a) or not len(b):
        return 0.0, 0.0
    shared = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - shared
    if union < MIN_WORDS:
        return 0.0, 0.0  # too little left to judge
    small, large = sorted((len(a), len(b)))
    # containment only between pages of comparable size: one added paragraph, not a page
    # that lists everything a smaller one lists (an inherited-members list)
    contained = shared / small if 2 * small >= large else 0.0
    return shared / union, contained


def insertion(f: Features, own_template: np.ndarray, c: Candidate) -> float:
    """The share of the smaller page found in the larger when the larger is the smaller one
    plus *one inserted run of blocks* (a paragraph added, or removed), else 0.

    One added paragraph leaves a short page's Jaccard similarity near 0.5 by construction (a
    page of N words plus N words), yet the edit is plain to see in the sketches, whose entries
    know their block: within the hash range both sketches cover,

    * the smaller page lacks at most ``shingle_size - 1`` of the larger's shingles: those that
      spanned the point where the run went in (nothing of it was rewritten);
    * the larger page's other shingles start in blocks the smaller page does not have (the
      run), but for at most ``shingle_size - 1`` starting just before it;
    * those blocks are one run: when the larger page is the one being checked, no block the
      smaller page has sits between them in its block order; when it is the stored one (whose
      block order is not stored), they are one block.

    A sibling of one template fails the first test as soon as it names anything of its own (a
    member list's "complete list of members for <class>", a function's signature): this is
    why the rule is about containment *and* one run, not containment alone.
    """
    a, a_blocks, b, b_blocks = _filtered(
        f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
        own_template, c.template,
    )
    if not len(a) or not len(b) or len(a) == len(b):
        return 0.0
    boundary = f.shingle_size - 1
    page_larger = len(a) > len(b)
    large, large_blocks, small = (a, a_blocks, b) if page_larger else (b, b_blocks, a)
    in_small = _member(large, small)
    shared = int(in_small.sum())
    if len(small) - shared > boundary:
        return 0.0
    if page_larger:
        small_has = np.unique(c.blocks)  # every block of the stored page with an entry
    else:
        small_has = np.unique(np.fromiter(f.blocks, np.uint32, len(f.blocks)))
    extra_blocks = large_blocks[~in_small]
    known = _member(extra_blocks, small_has)  # both pages have entries: neither is empty
    if int(known.sum()) > boundary:
        return 0.0
    run = np.unique(extra_blocks[~known])
    if not len(run):
        return 0.0
    if page_larger:
        order = np.fromiter(f.blocks, np.uint32, len(f.blocks))
        if len(own_template):
            order = order[~_member(order, own_template)]
        at = np.flatnonzero(_member(order, run))
        if not len(at):
            return 0.0
        between = order[at[0] : at[-1] + 1]
        if _member(between, small_has).any():
            return 0.0
    elif len(run) > 1:
        return 0.0
    return shared / len(small)


def keeps_lines(f: Features, own_template: np.ndarray, c: Candidate) -> bool:
    """False for a short pair that shares too few whole lines to be an edit (see
    :data:`SHARED_BLOCKS`): the smaller has under :data:`SHORT_PAGE` entries over the range both
    cover, templates out, and neither page has :data:`SHARED_BLOCKS` of its entries in blocks the
    other has verbatim. The page's own blocks are all known (``f.blocks``); the stored page's
    are those of its sketch's entries."""
    a, a_blocks, b, b_blocks = _filtered(
        f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
        own_template, c.template,
    )
    if not len(a) or not len(b) or min(len(a), len(b)) >= SHORT_PAGE:
        return True
    page_has = np.unique(np.fromiter(f.blocks, np.uint32, len(f.blocks)))
    stored_has = np.unique(c.blocks)
    share = max(float(_member(b_blocks, page_has).mean()),
                float(_member(a_blocks, stored_has).mean()))
    return share >= SHARED_BLOCKS


def tiny(sketch: np.ndarray, shingle_size: int) -> bool:
    """A sketch of a page under :data:`MIN_WORDS` words (template left out): fewer entries than
    such a page's shingles. Told from the sketch alone, so a stored page (whose word count is
    not kept) is judged as the page being checked is."""
    return len(sketch) < max(1, MIN_WORDS - shingle_size + 1)


def tiny_insertion(f: Features, own_template: np.ndarray, c: Candidate, threshold: float) -> float:
    """For a pair with a :func:`tiny` page: the similarity when the larger page is the smaller
    one, every line of it verbatim, plus one inserted run of lines (:func:`insertion`), else 0.

    A handful of words says too little for a similarity of words: two stubs of one template
    ("GLib Tools / glib-gettextize", a redirect stub whose only line of its own is its
    heading) share most of their shingles. But the edits a page goes through (a "last updated"
    line, a banner, a paragraph added) leave its lines as they were and add lines next to them,
    which siblings do not: they differ *inside* their lines.

    Such a pair is only verified when it is a candidate: when one of the tiny page's few hashes
    is among the larger page's :data:`ANCHORS` (the index is not widened for them).
    """
    sim = insertion(f, own_template, c)
    if not sim:
        return 0.0
    a, a_blocks, b, b_blocks = _filtered(
        f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
        own_template, c.template,
    )
    if len(a) < len(b):  # the page is the smaller: every line of it is one of the stored page's
        small_blocks, large_has = a_blocks, np.unique(c.blocks)
    else:
        small_blocks, large_has = b_blocks, np.unique(np.fromiter(f.blocks, np.uint32,
                                                                   len(f.blocks)))
    if not _member(small_blocks, large_has).all():
        return 0.0
    return max(sim, threshold)


def pick_best(
    f: Features,
    title_id: int,
    candidates: Iterable[Candidate],
    own_template: np.ndarray,
    threshold: float,
) -> tuple[Candidate | None, float]:
    """The candidate most similar to the page (title-aware, see the module) and the
    similarity the threshold is applied to."""
    best: Candidate | None = None
    best_sim = 0.0
    page_tiny = tiny(f.sketch, f.shingle_size)
    for c in candidates:
        if page_tiny or tiny(c.sketch, f.shingle_size):
            # only one page's lines plus a run of others (and one title) say "the same page"
            sim = (tiny_insertion(f, own_template, c, threshold)
                   if title_id and c.title == title_id else 0.0)
            if sim > best_sim or (sim == best_sim and best is not None and c.doc < best.doc):
                best, best_sim = c, sim
            continue
        sim, _ = similarity(
            f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
            own_template, c.template,
        )
        if title_id and c.title and c.title != title_id:
            # a different name: only a near-copy counts (mapped below the threshold else)
            sim = sim if sim >= OTHER_TITLE_THRESHOLD else min(sim, threshold * 0.99)
        elif title_id and c.title == title_id:
            if sim < threshold:
                sim = max(sim, insertion(f, own_template, c))
            if sim >= threshold and not keeps_lines(f, own_template, c):
                sim = min(sim, threshold * 0.99)  # similar words, no line in common: a sibling
        if sim > best_sim or (sim == best_sim and best is not None and c.doc < best.doc):
            best, best_sim = c, sim
    return best, best_sim


@dataclass(frozen=True, slots=True)
class Outcome:
    """A :class:`Decision` and what the state must record for it."""

    decision: Decision
    action: str  # "empty", "exact", "unchanged" (refetched original), "near", "new"
    original: int | None = None  # id of the original of an exact or near duplicate
    teaches: bool = False  # a near duplicate that still teaches the host's template model


def decide(
    f: Features,
    own: int | None,
    owner: int | None,
    url_of: Callable[[int], str],
    best: Callable[[], tuple[int | None, float]],
    threshold: float,
) -> Outcome:
    """The decision for a page of features ``f``: ``own`` is the id its URL already has,
    ``owner`` the id of the original owning its fingerprint, ``best`` finds the most similar
    candidate (called only when needed)."""
    if not f.words:
        return Outcome(Decision(f.fingerprint, kind="empty"), "empty")
    if owner is not None and owner != own:
        return Outcome(Decision(f.fingerprint, url_of(owner), 1.0, "exact", f.words),
                       "exact", owner)
    if owner is not None:  # refetched, unchanged original
        return Outcome(Decision(f.fingerprint, kind="new", words=f.words), "unchanged")
    doc, sim = best() if len(f.sketch) else (None, 0.0)
    if doc is not None and sim >= threshold:
        decision = Decision(f.fingerprint, url_of(doc), round(sim, 4), "near", f.words)
        return Outcome(decision, "near", doc, sim < TEACHING_SIMILARITY)
    return Outcome(Decision(f.fingerprint, kind="new", words=f.words), "new")


@dataclass
class Explanation:
    """Why the detector would (not) flag page B as a duplicate of page A."""

    words: tuple[int, int]
    chars: tuple[int, int]
    shingles: tuple[int, int]
    fingerprints: tuple[str, str]
    exact_duplicate: bool
    estimated: float  # MinHash estimate of the Jaccard similarity
    exact: float  # Jaccard similarity of the shingle sets
    shared_bands: int  # LSH bands where the two signatures agree (>= 1: a candidate)
    bands: int
    rows: int
    flagged: bool
    kind: str  # the detector's decision for B after seeing A: "exact", "near", "new", "empty"
    shingle_size: int
    num_perm: int
    threshold: float
    only_a: list[str]  # a few shingles of A missing from B
    only_b: list[str]

    @property
    def candidate(self) -> bool:
        return self.shared_bands > 0


def explain(
    text_a: str,
    text_b: str,
    shingle_size: int = DEFAULT_SHINGLE_SIZE,
    num_perm: int = DEFAULT_NUM_PERM,
    threshold: float = DEFAULT_THRESHOLD,
    sample: int = 5,
) -> Explanation:
    """Run the pipeline's decision on A then B, and collect the numbers behind it.

    ``bands`` is the number of anchors (the smallest hashes indexed for candidates), ``rows``
    1, and ``shared_bands`` the anchors A and B share.
    """
    detector = NearDuplicateDetector(shingle_size, num_perm, threshold)
    first = detector.check("page:a", text_a)
    decision = detector.check("page:b", text_b, add=False)
    fa, fb = detector.features(text_a), detector.features(text_b)
    estimated = 0.0
    if len(fa.sketch) and len(fb.sketch) and 0 in detector._fingerprint_of:
        estimated, _ = detector._similarity(
            fb.sketch, fb.sketch_blocks, fb.cover, 0, np.empty(0, np.uint32), None
        )
    shared = len(np.intersect1d(fa.sketch[:ANCHORS], fb.sketch[:ANCHORS]))
    norm_a, norm_b = normalize_text(text_a), normalize_text(text_b)
    sa, sb = shingle_texts(norm_a, shingle_size), shingle_texts(norm_b, shingle_size)
    set_a, set_b = set(sa), set(sb)
    union = set_a | set_b
    return Explanation(
        words=(len(norm_a.split()), len(norm_b.split())),
        chars=(len(text_a), len(text_b)),
        shingles=(len(set_a), len(set_b)),
        fingerprints=(first.fingerprint, decision.fingerprint),
        exact_duplicate=first.fingerprint == decision.fingerprint and bool(norm_a),
        estimated=1.0 if decision.kind == "exact" else float(estimated),
        exact=len(set_a & set_b) / len(union) if union else 1.0,
        shared_bands=shared,
        bands=ANCHORS,
        rows=1,
        flagged=decision.is_duplicate,
        kind=decision.kind,
        shingle_size=shingle_size,
        num_perm=num_perm,
        threshold=threshold,
        only_a=[s for s in sa if s not in set_b][:sample],
        only_b=[s for s in sb if s not in set_a][:sample],
    )
