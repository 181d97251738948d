"""The in-memory stores of the near-duplicate detectors: the anchor index that finds candidates
(kept by the in-process detector, and by every Redis worker as its copy of the crawl's index
log), and the pool of packed sketches of the in-process detector's originals."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

MAX_POSTING = 48  # candidates taken per anchor (a template shingle's list can be long)
MERGE_EVERY = 4096  # postings kept in a dict before they are merged into the sorted arrays


class AnchorIndex:
    """Each anchor's postings: the ids of the originals that listed it, in the order they were
    stored; only the first :data:`MAX_POSTING` of an anchor ever count.

    The postings live in two sorted arrays (anchor, id), plus a dict of the latest, merged into
    the arrays by :meth:`settle` once there are :data:`MERGE_EVERY` of them: a dict per anchor
    would cost ~100 bytes a posting, the arrays 8."""

    def __init__(self, doc_type: type[np.integer[Any]]) -> None:
        self.doc_type = doc_type
        self._keys = np.empty(0, dtype=np.uint32)  # merged postings, sorted by anchor
        self._docs = np.empty(0, dtype=doc_type)
        self._buffer: dict[int, list[int]] = {}  # the latest postings
        self._buffered = 0

    def add(self, doc: int, anchors: Iterable[int]) -> None:
        """``doc`` lists ``anchors`` (distinct); :meth:`settle` merges them in due time."""
        buffer = self._buffer
        n = 0
        for anchor in anchors:
            posting = buffer.get(anchor)
            if posting is None:
                buffer[anchor] = [doc]
            else:
                posting.append(doc)
            n += 1
        self._buffered += n

    def settle(self) -> None:
        """Merge the latest postings into the sorted arrays once there are enough of them; a
        stable sort keeps earlier postings first within an anchor, which is what
        :data:`MAX_POSTING` keeps."""
        if self._buffered < MERGE_EVERY:
            return
        count = self._buffered
        buffer = self._buffer
        new_keys = np.fromiter((k for k, ds in buffer.items() for _ in ds), np.uint32, count)
        new_docs = np.fromiter((d for ds in buffer.values() for d in ds), self.doc_type, count)
        keys = np.concatenate((self._keys, new_keys))
        docs = np.concatenate((self._docs, new_docs))
        order = np.argsort(keys, kind="stable")
        self._keys, self._docs = keys[order], docs[order]
        buffer.clear()
        self._buffered = 0

    def postings(self, anchors: np.ndarray) -> list[list[int]]:
        """The first :data:`MAX_POSTING` postings of each anchor, in the order stored."""
        out: list[list[int]] = []
        keys, docs = self._keys, self._docs
        lo = np.searchsorted(keys, anchors, "left").tolist()
        hi = np.searchsorted(keys, anchors, "right").tolist()
        for a, b, anchor in zip(lo, hi, anchors.tolist(), strict=True):
            posting = docs[a : min(b, a + MAX_POSTING)].tolist()
            if len(posting) < MAX_POSTING:  # the merged arrays hold the earlier postings
                posting.extend(self._buffer.get(anchor, ())[: MAX_POSTING - len(posting)])
            out.append(posting)
        return out


class Packed(NamedTuple):
    """Where a sketch sits in a :class:`SketchPool`."""

    offset: int
    length: int
    distinct: int


class SketchPool:
    """Sketches packed in one growing array: a sketch's n hashes at ``pool[o:o+n]``, its d
    distinct blocks at ``pool[o+n:o+n+d]``, then the block of each hash as a byte (two when
    ``num_perm`` > 256) indexing those, four (two) to a word. A page's 112 hashes come from ~40
    blocks on real documentation, so 5.4 bytes a hash instead of 8 (a block hash per hash); no
    row of ``num_perm`` for a short page, and growth by a quarter, not doubling. Append-only: a
    replaced sketch stays, unused, so a :class:`Packed` stays valid."""

    def __init__(self, num_perm: int) -> None:
        self._pool = np.empty(0, dtype=np.uint32)
        self._used = 0
        self._index_type = np.dtype(np.uint8 if num_perm <= 256 else np.uint16)

    def _index_words(self, n: int) -> int:
        per_word = 4 // self._index_type.itemsize
        return -(-n // per_word)

    def put(self, sketch: np.ndarray, blocks: np.ndarray) -> Packed:
        n = len(sketch)
        table, index = np.unique(blocks, return_inverse=True)
        d = len(table)
        size = n + d + self._index_words(n)
        used = self._used
        if used + size > len(self._pool):
            grown = np.empty(max(used + size, len(self._pool) * 5 // 4 + 4096), np.uint32)
            grown[:used] = self._pool[:used]
            self._pool = grown
        self._pool[used : used + n] = sketch
        self._pool[used + n : used + n + d] = table
        packed = self._pool[used + n + d : used + size]
        packed[:] = 0
        packed.view(self._index_type)[:n] = index.reshape(-1)
        self._used = used + size
        return Packed(used, n, d)

    def get(self, o: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
        """The sketch at ``o`` of ``n`` hashes and ``d`` blocks, and the block of each hash."""
        pool = self._pool
        index = pool[o + n + d : o + n + d + self._index_words(n)].view(self._index_type)[:n]
        return pool[o : o + n], pool[o + n : o + n + d][index]
