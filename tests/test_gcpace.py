"""The paced garbage collector (crawler/extensions/gcpace.py): what is alive at a tick is frozen,
out of reach of Python's full collections, and freed by the next full one when it has become
garbage since; cycles that die young are freed at the next tick as ever."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from crawler.extensions.gcpace import GcPacer


class Node:
    """A reference cycle of one: only the cycle collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def pacer() -> Iterator[GcPacer]:
    # no automatic collections meanwhile: the test decides which generation an object is in
    gc.disable()
    try:
        yield GcPacer(crawler=None, interval=1.0, full_interval=0)  # type: ignore[arg-type]
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_cycle_alive_at_a_tick_waits_for_the_full_collection(pacer: GcPacer) -> None:
    node = Node()
    ref = weakref.ref(node)
    pacer.tick()
    assert gc.get_freeze_count() > 0
    del node
    gc.collect()  # what Python's own full collection would do: the frozen cycle is not seen
    assert ref() is not None
    pacer.full()
    assert ref() is None
    assert gc.get_freeze_count() == 0
    assert pacer.fulls == 1


def test_a_cycle_that_dies_young_is_freed_at_the_next_tick(pacer: GcPacer) -> None:
    pacer.tick()
    node = Node()
    ref = weakref.ref(node)
    del node
    pacer.tick()
    assert ref() is None
    assert pacer.fulls == 0


def test_the_full_collection_comes_every_full_interval(pacer: GcPacer) -> None:
    pacer.full_interval = 1e-9
    pacer.tick()
    pacer.tick()
    assert pacer.fulls == 2



def _generations_collected(allocations: int) -> set[int]:
    """Which generations Python collected by itself while ``allocations`` containers were
    made and kept (they survive into the oldest generation, as a crawl's new state does)."""
    seen: set[int] = set()

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.add(info["generation"])

    kept = []
    gc.collect()
    gc.callbacks.append(callback)
    try:
        for i in range(allocations):
            kept.append([i])
    finally:
        gc.callbacks.remove(callback)
    return seen


def test_no_automatic_full_collection_while_paced() -> None:
    """The pacer switches off Python's own collections of the oldest generation while the
    crawl runs (they would walk everything since the last tick) and gives them back after."""
    before = gc.get_threshold()
    assert 2 in _generations_collected(300_000)  # Python on its own: full collections
    pacer = GcPacer(crawler=None, interval=1.0, full_interval=0)  # type: ignore[arg-type]
    pacer.pause_full_collections()
    try:
        collected = _generations_collected(300_000)
        assert 1 in collected and 2 not in collected  # young ones still run
    finally:
        pacer.resume()
    assert gc.get_threshold() == before
