"""Why the near-duplicate detector flags a page or not (``scrapy neardup``): the numbers behind
one decision, and the exact and LSH figures the benchmarks compare the sketch with."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crawler.content.neardup import NearDuplicateDetector
from crawler.content.neardup_features import (
    ANCHORS,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
)
from crawler.content.normalize import normalize_text
from crawler.content.shingles import shingle_set, shingle_texts


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
