"""A broad crawl holds its pace: the work of one operation on a worker's per-host and per-origin
structures is the same with 10 times more hosts met (issue 36). Each test counts work (states
looked at, hosts compared), never time, at two sizes 10 times apart."""

from __future__ import annotations

from typing import Any

import pytest

import crawler.robots.book as book_module
from crawler.robots import MemoryRobotsCache, RobotsBook, RobotsRecord
from crawler.robots.rules import RULES


class _Counted(book_module.OriginState):
    """An origin state that counts every read of its fields: the states an operation looks at."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            _Counted.reads += 1
        return super().__getattribute__(name)


def _book_with_waiting_origins(waiting: int, monkeypatch: pytest.MonkeyPatch) -> RobotsBook:
    """A book over its bound: ``waiting`` origins met whose robots.txt is queued and not yet
    fetched (the soak's state: far more hosts known than fetched), and a full LRU of settled
    ones read from the cache."""
    monkeypatch.setattr(book_module, "OriginState", _Counted)
    cache = MemoryRobotsCache()
    book = RobotsBook(cache, "bot", max_origins=100)
    for i in range(waiting):
        origin = f"http://w{i}.example"
        book.discovered(origin, f"w{i}.example")
        book.queued(origin)
    for i in range(300):
        origin = f"http://s{i}.example"
        cache.put(RobotsRecord(origin, RULES, 200, 0.0, 1e9, "User-agent: *\nDisallow: /x\n"))
        book.discovered(origin, f"s{i}.example")
    return book


def _reads_to_meet_one_more(book: RobotsBook) -> int:
    """The fields read while the fetcher meets a new origin and queues its robots.txt."""
    _Counted.reads = 0
    origin = "http://new.example"
    book.discovered(origin, "new.example")
    if book.needs_fetch(origin, 0.0):
        book.queued(origin)
    return _Counted.reads


def test_meeting_an_origin_costs_the_same_with_ten_times_more_origins_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The robots book's eviction: with 1,000 then 10,000 origins waiting for their robots.txt
    (unsettled, never dropped), one more origin costs the same. It used to scan up to 4x the
    excess over the bound on every new origin and drop nothing (quadratic in origins met)."""
    small = _reads_to_meet_one_more(_book_with_waiting_origins(1_000, monkeypatch))
    large = _book_with_waiting_origins(10_000, monkeypatch)
    assert _reads_to_meet_one_more(large) == small
    settled = [st for st in large.states() if st.origin.startswith("http://s")]
    assert len(settled) == 100  # the bound holds for the settled ones
    assert len(large.states()) == 10_000 + 100 + 1  # no waiting origin was dropped
