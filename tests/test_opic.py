"""OPIC in the embedded frontiers: the shared OPIC contract for memory and SQLite (JOBDIR),
the cash ledger's buckets, and a raised URL fetched once after a restart."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from crawler.backends.sqlite.frontier import SqliteQueueStore
from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy
from crawler.frontier.opic import CashLedger
from tests.frontier_contract import FakeClock, OpicContract


def _memory(policy=None, *, clock, front_queues=8, **kwargs) -> MercatorFrontier:
    return MercatorFrontier(
        policy or PolitenessPolicy(), clock=clock, front_queues=front_queues,
        ledger=CashLedger(front_queues), **kwargs,
    )


def _sqlite(path: Path, policy=None, *, clock, front_queues=8, **kwargs) -> MercatorFrontier:
    store = SqliteQueueStore(path, front_queues, read_ahead=3, back_buffer=2)
    return MercatorFrontier(
        policy or PolitenessPolicy(), store=store, clock=clock, front_queues=front_queues,
        ledger=CashLedger(front_queues), **kwargs,
    )


class TestMemoryOpic(OpicContract):
    def make_opic_frontier(self, policy=None, *, clock, **kwargs):
        return _memory(policy, clock=clock, **kwargs)


class TestSqliteOpic(OpicContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp = tmp_path

    def make_opic_frontier(self, policy=None, *, clock, **kwargs):
        path = Path(tempfile.mkdtemp(dir=self.tmp)) / "frontier.sqlite"
        return _sqlite(path, policy, clock=clock, **kwargs)


def test_buckets_follow_the_mean_on_a_log_scale() -> None:
    ledger = CashLedger(8)
    for i in range(4):
        ledger.admit(Entry(f"http://a.test/{i}", "a.test", cash=1.0))
    assert ledger.bucket(1.0) == 4  # the mean: the middle queue
    assert ledger.bucket(2.0) == 3 and ledger.bucket(16.0) == 0 and ledger.bucket(1e9) == 0
    assert ledger.bucket(0.5) == 5 and ledger.bucket(1e-9) == 7 and ledger.bucket(0.0) == 7


def test_a_raised_url_is_fetched_once_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    clock = FakeClock()
    f = _sqlite(path, PolitenessPolicy(min_delay=0), clock=clock, back_queues=1)
    f.add(Entry("http://busy.test/", "busy.test", cash=1.0))
    for i in range(3):
        f.add(Entry(f"http://x{i}.test/", f"x{i}.test", cash=0.01))
    f.add(Entry("http://x0.test/", "x0.test", cash=5.0))  # raised: a second row
    f.close()
    again = _sqlite(path, PolitenessPolicy(min_delay=0), clock=clock, back_queues=1)
    urls = []
    while (lease := again.next()) is not None:
        urls.append(lease.entry.url)
        again.finish(lease.token, 0.1)
    assert sorted(urls) == ["http://busy.test/", "http://x0.test/", "http://x1.test/",
                            "http://x2.test/"]
    again.close()
