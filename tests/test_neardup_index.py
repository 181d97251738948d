"""The in-memory stores of the near-duplicate detectors: the anchor index keeps each anchor's
first postings in the order stored, merged or not; the sketch pool gives back what it took."""

from __future__ import annotations

import numpy as np
import pytest

from crawler.content.neardup_index import MAX_POSTING, MERGE_EVERY, AnchorIndex, SketchPool


@pytest.mark.parametrize("doc_type", [np.int32, np.uint32])
def test_postings_keep_the_order_stored_across_merges(doc_type: type[np.integer]) -> None:
    index = AnchorIndex(doc_type)
    expected: dict[int, list[int]] = {}
    rng = np.random.default_rng(7)
    for doc in range(3 * MERGE_EVERY // 4):
        anchors = rng.choice(40, size=4, replace=False).tolist()
        index.add(doc, anchors)
        for a in anchors:
            expected.setdefault(a, []).append(doc)
        if doc % 100 == 99:
            index.settle()  # merged once past MERGE_EVERY postings, kept in the dict before
    asked = np.array([3, 99, 17, 0], dtype=np.uint32)
    got = index.postings(asked)
    assert got == [expected.get(a, [])[:MAX_POSTING] for a in asked.tolist()]
    assert got[1] == []  # an anchor no original listed
    assert all(len(p) == MAX_POSTING for p in got if p)  # every listed one is long: capped


def test_postings_of_a_young_index_come_from_the_dict() -> None:
    index = AnchorIndex(np.int32)
    index.add(0, [5, 6])
    index.add(1, [6])
    index.settle()  # too few to merge
    assert index.postings(np.array([6, 5, 7], dtype=np.uint32)) == [[0, 1], [0], []]


@pytest.mark.parametrize("num_perm", [112, 300])
def test_the_sketch_pool_gives_back_every_sketch_it_took(num_perm: int) -> None:
    pool = SketchPool(num_perm)
    rng = np.random.default_rng(1)
    stored = []
    for n in (num_perm, 3, 0, num_perm // 2) * 200:
        sketch = np.sort(rng.choice(2**32 - 1, size=n, replace=False)).astype(np.uint32)
        blocks = rng.choice(np.array([11, 22, 33, 2**31 + 5], np.uint32), size=n)
        stored.append((pool.put(sketch, blocks), sketch, blocks))
    for packed, sketch, blocks in stored:  # after the pool grew many times
        got_sketch, got_blocks = pool.get(*packed)
        assert got_sketch.tolist() == sketch.tolist()
        assert got_blocks.tolist() == blocks.tolist()
        assert packed.distinct == len(set(blocks.tolist()))
