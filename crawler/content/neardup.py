"""Near-duplicate detection: exact fingerprints first, then MinHash LSH over word shingles.

Plain Python, no Scrapy: :class:`NearDuplicateDetector` takes (url, main text) and answers
"new", or "duplicate of <url> with similarity s". The pipeline is a thin adapter over it.

How a decision is made (the defaults are justified by ``bench/neardup.py``):

1. The main text is normalized (:func:`crawler.content.normalize.normalize_text`: counters,
   dates, session ids masked) and fingerprinted; a fingerprint already owned by another URL is an
   exact duplicate (similarity 1.0). Mirrors land here.
2. Otherwise a MinHash (datasketch 2.0, ``affine32`` scheme) of its ``shingle_size``-word shingles
   is queried against an LSH index of the originals seen so far. The LSH bands are tuned for a
   *lower* threshold than the decision (:func:`lsh_params`: a pair of similarity exactly
   ``threshold`` becomes a candidate with probability ``candidate_recall``, 0.99), because with
   datasketch's own parameters for t a pair of similarity t collides in a band only 40-60 % of
   the time; each candidate is then verified against its stored signature, and the decision is
   ``estimated Jaccard >= threshold``.
3. A page that is not a duplicate becomes an original: its signature joins the LSH, its
   fingerprint the exact table. Duplicates never join, so ``duplicate_of`` always names an
   original (no chains), and the first URL seen with a content is its original.

A refetched URL replaces its own entry (it is never its own duplicate). Per-host counters of
duplicates feed the frontier (:meth:`NearDuplicateDetector.host_duplicate_ratio`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from datasketch import MinHash, MinHashLSH

from crawler import defaults
from crawler.content.normalize import content_fingerprint, normalize_text
from crawler.content.shingles import shingle_hashes32, shingle_set, shingle_texts

__all__ = [
    "DEFAULT_NUM_PERM",
    "DEFAULT_SHINGLE_SIZE",
    "DEFAULT_THRESHOLD",
    "Decision",
    "Explanation",
    "NearDuplicateDetector",
    "exact_similarity",
    "explain",
    "lsh_params",
]

# The NEARDUP_* defaults (chosen with bench/neardup.py; the reasons are in crawler/defaults.py).
DEFAULT_SHINGLE_SIZE = defaults.NEARDUP_SHINGLE_SIZE
DEFAULT_NUM_PERM = defaults.NEARDUP_NUM_PERM
DEFAULT_THRESHOLD = defaults.NEARDUP_THRESHOLD
# The LSH bands catch a pair of similarity `threshold` with this probability (then verified).
DEFAULT_CANDIDATE_RECALL = 0.99
# A page with fewer words than this is only compared exactly: a handful of shingles gives a
# MinHash estimate too noisy to call two pages near-duplicates.
MIN_WORDS = 8


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
        # the smallest b with this r that still reaches the recall saves memory
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


class NearDuplicateDetector:
    """In-memory near-duplicate index of the pages a crawl has kept.

    Not thread-safe (Scrapy calls pipelines from one thread). Memory: one ``num_perm`` x 4-byte
    signature per original plus the LSH's band tables (``bench/neardup.py`` measures bytes per
    document).
    """

    def __init__(
        self,
        shingle_size: int = DEFAULT_SHINGLE_SIZE,
        num_perm: int = DEFAULT_NUM_PERM,
        threshold: float = DEFAULT_THRESHOLD,
        candidate_recall: float = DEFAULT_CANDIDATE_RECALL,
        seed: int = 1,
    ) -> None:
        if shingle_size < 1:
            raise ValueError("shingle_size must be at least 1")
        if not 0.0 < threshold <= 1.0:
            raise ValueError("threshold must be in (0, 1]")
        self.shingle_size = shingle_size
        self.num_perm = num_perm
        self.threshold = threshold
        self.seed = seed
        self.bands, self.rows = lsh_params(num_perm, threshold, candidate_recall)
        self._lsh = MinHashLSH(num_perm=num_perm, params=(self.bands, self.rows))
        # Permutations are drawn once; building a MinHash from them skips numpy's RNG per page.
        self._permutations = MinHash(num_perm=num_perm, seed=seed).permutations
        self._signatures = np.empty((64, num_perm), dtype=np.uint32)
        self._urls: list[str] = []  # doc id -> URL
        self._ids: dict[str, int] = {}  # URL -> doc id (originals and duplicates)
        self._fingerprints: dict[bytes, int] = {}  # fingerprint -> doc id of the original
        self._fingerprint_of: dict[int, bytes] = {}  # doc id -> its fingerprint (originals)
        self._hosts: dict[str, list[int]] = {}  # host -> [pages, duplicates]

    @classmethod
    def from_crawler(cls, crawler: Any) -> NearDuplicateDetector:
        """``NEARDUP_STORE_CLASS``'s constructor: the ``NEARDUP_*`` settings of the crawl."""
        s = crawler.settings
        return cls(
            shingle_size=s.getint("NEARDUP_SHINGLE_SIZE", defaults.NEARDUP_SHINGLE_SIZE),
            num_perm=s.getint("NEARDUP_NUM_PERM", defaults.NEARDUP_NUM_PERM),
            threshold=s.getfloat("NEARDUP_THRESHOLD", defaults.NEARDUP_THRESHOLD),
        )

    # --- the decision ---------------------------------------------------------------------

    def minhash(self, normalized: str) -> MinHash:
        """The MinHash of normalized text, built in one batch from vectorized shingle hashes."""
        m = MinHash(
            num_perm=self.num_perm,
            seed=self.seed,
            hashfunc=int,
            permutations=self._permutations,
            scheme="affine32",
        )
        m.update_batch(shingle_hashes32(normalized, self.shingle_size).tolist())
        return m

    def check(self, url: str, text: str, *, add: bool = True) -> Decision:
        """Decide whether the page at ``url`` with main text ``text`` duplicates an original.

        With ``add`` (the default) the page is recorded: as an original when it is not a
        duplicate, otherwise as a duplicate of one; ``add=False`` only looks (noindex pages,
        the explain command). A refetched URL replaces its earlier entry.
        """
        normalized = normalize_text(text)
        fingerprint = content_fingerprint(normalized)
        words = normalized.count(" ") + 1 if normalized else 0
        own = self._ids.get(url)
        if not normalized:
            decision = Decision(fingerprint, kind="empty")
            if add:
                self._record(url, own, decision, None, None)
            return decision
        key = bytes.fromhex(fingerprint)
        owner = self._fingerprints.get(key)
        if owner is not None and owner != own:
            decision = Decision(fingerprint, self._urls[owner], 1.0, "exact", words)
            if add:
                self._record(url, own, decision, owner, None)
            return decision
        if owner is not None:  # refetched, unchanged original
            if add:
                self._count(url, duplicate=False)
            return Decision(fingerprint, kind="new", words=words)
        minhash = None
        best, similarity = None, 0.0
        if words >= MIN_WORDS:
            minhash = self.minhash(normalized)
            best, similarity = self._best_candidate(minhash, exclude=own)
        if best is not None and similarity >= self.threshold:
            decision = Decision(fingerprint, self._urls[best], round(similarity, 4), "near", words)
            if add:
                self._record(url, own, decision, best, None)
            return decision
        decision = Decision(fingerprint, kind="new", words=words)
        if add:
            self._record(url, own, decision, None, minhash)
        return decision

    def _best_candidate(self, minhash: MinHash, exclude: int | None) -> tuple[int | None, float]:
        candidates = [c for c in self._lsh.query(minhash) if c != exclude]
        if not candidates:
            return None, 0.0
        ids = np.fromiter(candidates, dtype=np.int64, count=len(candidates))
        sims = (self._signatures[ids] == minhash.hashvalues).mean(axis=1)
        top = sims.max()
        # ties go to the earliest original
        winner = int(ids[sims == top].min())
        return winner, float(top)

    # --- bookkeeping ----------------------------------------------------------------------

    def _record(
        self,
        url: str,
        own: int | None,
        decision: Decision,
        original: int | None,
        minhash: MinHash | None,
    ) -> None:
        if own is None:
            own = len(self._urls)
            self._urls.append(url)
            self._ids[url] = own
        else:
            self._forget_content(own)
        if original is None and decision.kind != "empty":
            key = bytes.fromhex(decision.fingerprint)
            self._fingerprints[key] = own
            self._fingerprint_of[own] = key
            if minhash is not None:
                self._store_signature(own, minhash)
                self._lsh.insert(own, minhash, check_duplication=False)
        self._count(url, duplicate=original is not None)

    def _forget_content(self, doc: int) -> None:
        """Drop what a refetched URL said before (its signature and fingerprint)."""
        key = self._fingerprint_of.pop(doc, None)
        if key is not None and self._fingerprints.get(key) == doc:
            del self._fingerprints[key]
        if doc in self._lsh:
            self._lsh.remove(doc)

    def _store_signature(self, doc: int, minhash: MinHash) -> None:
        if doc >= len(self._signatures):
            grown = np.empty((max(doc + 1, 2 * len(self._signatures)), self.num_perm), np.uint32)
            grown[: len(self._signatures)] = self._signatures
            self._signatures = grown
        self._signatures[doc] = minhash.hashvalues

    def _count(self, url: str, duplicate: bool) -> None:
        counts = self._hosts.setdefault(urlsplit(url).hostname or "", [0, 0])
        counts[0] += 1
        counts[1] += duplicate

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
        """Everything needed to rebuild the detector (for a JOBDIR-resumed crawl)."""
        return {
            "params": (self.shingle_size, self.num_perm, self.threshold, self.seed),
            "bands": (self.bands, self.rows),
            "lsh": self._lsh,
            "signatures": self._signatures[: len(self._urls)].copy(),
            "urls": self._urls,
            "fingerprints": self._fingerprints,
            "fingerprint_of": self._fingerprint_of,
            "hosts": self._hosts,
        }

    def restore(self, state: dict[str, Any]) -> bool:
        """Load a :meth:`state`; False (and nothing changed) if it was made with other params."""
        if state.get("params") != (self.shingle_size, self.num_perm, self.threshold, self.seed):
            return False
        if state.get("bands") != (self.bands, self.rows):
            return False
        self._lsh = state["lsh"]
        sigs = state["signatures"]
        self._signatures = np.empty((max(64, 2 * len(sigs)), self.num_perm), np.uint32)
        self._signatures[: len(sigs)] = sigs
        self._urls = list(state["urls"])
        self._ids = {u: i for i, u in enumerate(self._urls)}
        self._fingerprints = dict(state["fingerprints"])
        self._fingerprint_of = dict(state["fingerprint_of"])
        self._hosts = {h: list(c) for h, c in state["hosts"].items()}
        return True


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
    """Run the pipeline's decision on A then B, and collect the numbers behind it."""
    detector = NearDuplicateDetector(shingle_size, num_perm, threshold)
    first = detector.check("page:a", text_a)
    decision = detector.check("page:b", text_b)
    norm_a, norm_b = normalize_text(text_a), normalize_text(text_b)
    ma, mb = detector.minhash(norm_a), detector.minhash(norm_b)
    agree = ma.hashvalues == mb.hashvalues
    r = detector.rows
    shared = sum(bool(agree[i * r : (i + 1) * r].all()) for i in range(detector.bands))
    sa, sb = shingle_texts(norm_a, shingle_size), shingle_texts(norm_b, shingle_size)
    set_a, set_b = set(sa), set(sb)
    union = set_a | set_b
    return Explanation(
        words=(len(norm_a.split()), len(norm_b.split())),
        chars=(len(text_a), len(text_b)),
        shingles=(len(set_a), len(set_b)),
        fingerprints=(first.fingerprint, decision.fingerprint),
        exact_duplicate=first.fingerprint == decision.fingerprint and bool(norm_a),
        estimated=float(ma.jaccard(mb)) if norm_a and norm_b else 0.0,
        exact=len(set_a & set_b) / len(union) if union else 1.0,
        shared_bands=shared,
        bands=detector.bands,
        rows=detector.rows,
        flagged=decision.is_duplicate,
        kind=decision.kind,
        shingle_size=shingle_size,
        num_perm=num_perm,
        threshold=threshold,
        only_a=[s for s in sa if s not in set_b][:sample],
        only_b=[s for s in sb if s not in set_a][:sample],
    )
