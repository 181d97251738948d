"""The SQLite frontier store: the shared contract, plus what survives a stop or a kill."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy
from crawler.frontier.sqlite import SqliteStore
from tests.frontier_contract import FrontierContract, entries, simulate


def sqlite_frontier(path: Path, policy=None, **kwargs) -> MercatorFrontier:
    front = kwargs.get("front_queues", 8)
    store_args = {k: kwargs.pop(k) for k in ("read_ahead", "back_buffer") if k in kwargs}
    store = SqliteStore(path, front, **store_args)
    return MercatorFrontier(policy or PolitenessPolicy(), store=store, **kwargs)


class TestSqliteFrontierContract(FrontierContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp = tmp_path

    def make_frontier(self, policy=None, **kwargs):
        # small windows, so the tests cross the disk/memory boundary often
        path = Path(tempfile.mkdtemp(dir=self.tmp)) / "frontier.sqlite"
        return sqlite_frontier(path, policy, read_ahead=3, back_buffer=2, **kwargs)


def test_a_stopped_frontier_resumes_where_it_was(tmp_path):
    path = tmp_path / "f.sqlite"
    f = sqlite_frontier(path, PolitenessPolicy(min_delay=0.1), back_queues=3)
    f.add_many(entries(5, 6))
    sim = simulate(f, concurrency=2, until=2.0)
    fetched = {x.url for x in sim.fetches if x.end <= sim.end_time}
    assert 0 < len(fetched) < 30
    f.close()  # a clean stop: whatever was in flight has completed in the simulation

    again = sqlite_frontier(path, PolitenessPolicy(min_delay=0.1), back_queues=3)
    in_flight = {x.url for x in sim.fetches} - fetched
    assert len(again) == 30 - len(fetched)  # in flight at the stop: back in the queue
    for e in entries(5, 6):
        assert again.add(Entry(e.url, e.host)).reason == "seen"
    rest = simulate(again, concurrency=2)
    assert {x.url for x in rest.fetches} == {e.url for e in entries(5, 6)} - fetched
    assert in_flight <= {x.url for x in rest.fetches}


def test_a_killed_frontier_loses_only_what_was_not_committed(tmp_path):
    path = tmp_path / "f.sqlite"
    f = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), back_queues=2)
    f.add_many(entries(2, 5))
    done = f.next(0.0)
    leased = f.next(0.0)
    f.complete(done.token, 0.1, 0.1)  # commits: the 10 URLs, and done's deletion
    f.add(Entry("http://late.test/", "late.test"))  # discovered after the last commit
    f.store.db.close()  # the process dies here: no flush, no commit (the open transaction
    # rolls back as it would when the process is killed)
    again = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), back_queues=2)
    rest = simulate(again)
    urls = [x.url for x in rest.fetches]
    assert len(urls) == 9 and done.entry.url not in urls and leased.entry.url in urls
    assert "http://late.test/" not in urls


def test_memory_stays_bounded_with_many_queued_urls(tmp_path):
    f = sqlite_frontier(tmp_path / "f.sqlite", back_queues=2, read_ahead=50, back_buffer=10)
    f.add_many(Entry(f"http://h{i % 3}.test/{i}", f"h{i % 3}.test") for i in range(20_000))
    store = f.store
    assert len(f) == 20_000
    in_memory = sum(map(len, store._head)) + sum(map(len, store._back.values()))
    assert in_memory <= 8 * 50 + 2 * 10
    sim = simulate(f, concurrency=4)
    assert len(sim.fetches) == 20_000
    f.close()
