"""What the near-duplicate detectors compare of a page: its fingerprint, its blocks (lines) and
the bottom-k sketch of its text without its host's template, computed the same way in every
process and worker (:func:`compute_features`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from crawler.config import defaults
from crawler.content.normalize import content_fingerprint, normalize_text
from crawler.content.shingles import shingle_hashes32

# The detector's shingles (words) and permutations, chosen with bench/neardup.py (sections 1,
# 2 and 5); constants, not settings (docs/decisions/0003-settings.md): a crawl's detector state
# is only comparable with one of the same sizes. On the labelled set, 3-word shingles at
# threshold 0.5 put the hardest positive pair (10 % of the words edited, scattered) 2.2 standard
# deviations of the 128-permutation estimate above the threshold and the hardest negative pair
# (two pages of one module's documentation) 6 below it: precision and recall 1.0. Word pairs
# would centre the margin better (4.6 sd both ways) but unrelated pages share far more pairs than
# triples: 8 times the LSH candidates to verify (38 against 5 per page with 10,000 pages
# indexed), a cost that grows with the index. Larger shingles lose the 10 %-edited pages. More
# permutations: a closer estimate, more CPU and bytes per page.
DEFAULT_SHINGLE_SIZE = 3
DEFAULT_NUM_PERM = 128
DEFAULT_THRESHOLD = defaults.NEARDUP_THRESHOLD
# Pages of a host checked before its duplicate share counts (lowers its priority): one early
# duplicate of a new host must not penalize it.
HOST_MIN_PAGES = 5
ANCHORS = 16  # smallest hashes of an original in the candidate index
MAX_SHINGLES = 50_000  # shingles of one page fed to the sketch (the page's start)


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


def title_hash(title: str | None) -> int:
    """The id of a page's ``<title>`` (0: none) that :func:`pick_best` compares."""
    return block_hash(normalize_text(title)) if title else 0


def compute_features(
    lines: list[str], template: set[int] | frozenset[int], shingle_size: int, num_perm: int
) -> Features:
    """Fingerprint, blocks and the sketch of a main text without the ``template`` blocks of its
    host (see the module). ``lines``: the text's :func:`normalize_lines`, which the page's
    change fingerprint is made of too (``crawler.content.html.parse_page``): the text is
    normalized once a page."""
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
