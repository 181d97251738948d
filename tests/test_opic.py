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
    assert ledger.bucket(0.5) == 5 and ledger.bucket(1e-9) == 7
    # the floor takes only URLs worth next to nothing; no cash known is not worthless
    assert ledger.bucket(1 / 64) == 6 and ledger.bucket(1 / 512) == 7 and ledger.bucket(0.0) == 6


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


def test_the_link_intake_hands_a_pages_cash_on_even_for_repeated_links() -> None:
    """Through admission and the link intake (the scheduler's path, without Scrapy): a page's
    cash is split over its links; a link the intake remembers (not sent again to the seen-test)
    still brings its share; a distrusted domain's links take the distrust policy."""
    from crawler.frontier import Prioritizer, UrlPolicy
    from crawler.frontier.policies import CrawlPolicy, PolicyBook
    from crawler.frontier.scope import ScopeRegistry
    from crawler.scheduler.admission import Admission
    from crawler.scheduler.intake import LinkIntake
    from crawler.scheduler.stats import FrontierStats
    from tests.test_scheduler_intake import Stats

    frontier = MercatorFrontier(PolitenessPolicy(min_delay=0.0), back_queues=1,
                                ledger=CashLedger(8))
    book = PolicyBook({"distrust": CrawlPolicy("distrust", multiplier=0.001)},
                      distrusted=frozenset({"spam.test"}), distrusted_policy="distrust")
    admission = Admission(UrlPolicy(any_host=True), Prioritizer("opic", 8), ScopeRegistry(),
                          lambda origin, host: None, book)
    stats = Stats()
    intake = LinkIntake(admission, frontier, FrontierStats(stats), slice_size=1000,
                        cache_size=1000)
    frontier.add(Entry("http://busy.test/0", "busy.test", cash=1.0))  # holds the back queue
    frontier.add(Entry("http://busy.test/1", "busy.test", cash=1.0))
    lease = frontier.next()
    intake.take(["http://a.test/x", "http://b.test/", "http://spam.test/"], 1, None, None,
                cash=0.9, page="http://busy.test/0")
    intake.take(["http://a.test/x"], 1, None, None, cash=0.6, page="http://busy.test/1")
    ledger = frontier.ledger
    assert ledger.cash("http://a.test/x") == pytest.approx(0.3 + 0.6)  # the repeat counted
    assert ledger.cash("http://b.test/") == pytest.approx(0.3)
    assert ledger.cash("http://spam.test/") == pytest.approx(0.3 * 0.001)
    assert stats.values["frontier/policy/distrust"] == 1
    assert stats.values["frontier/policy/default"] == 2
    frontier.finish(lease.token, 0.1)


def test_stale_copies_never_end_a_crawl_early() -> None:
    """Raised URLs leave stale copies behind; a refill skips them without spending its batch,
    so ``due_in`` never says "nothing queued" while live URLs wait behind them."""
    clock = FakeClock()
    f = _memory(PolitenessPolicy(min_delay=0, delay_factor=0), clock=clock, back_queues=1,
                refill_batch=1)
    for i in range(2):
        f.add(Entry(f"http://busy.test/{i}", "busy.test", cash=1.0))
    lease = f.next()
    urls = [f"http://h{i}.test/" for i in range(6)]
    for url in urls:
        f.add(Entry(url, url.split("/")[2], cash=1e-6))
    for url in urls:  # each raised out of its queue: six stale copies below
        f.add(Entry(url, url.split("/")[2], cash=1.0))
    f.finish(lease.token, 0.1)
    got = []
    while f.due_in() is not None:
        lease = f.next()
        assert lease is not None
        got.append(lease.entry.url)
        f.finish(lease.token, 0.1)
    assert sorted(got) == sorted(["http://busy.test/1", *urls])
    assert len(f) == 0


def test_a_url_admitted_again_while_queued_is_counted_once() -> None:
    """A URL admitted again while it waits in a front queue (a seed given twice) is queued
    anew and its older copy goes stale: the frontier counts it once, and is empty once it
    handed it out (a count left at 1 kept the crawl from ever ending)."""
    clock = FakeClock()
    f = _memory(PolitenessPolicy(min_delay=0, delay_factor=0), clock=clock)
    f.add(Entry("http://a.test/", "a.test", cash=0.001))
    f.add(Entry("http://a.test/", "a.test", cash=1.0), force=True)
    assert len(f) == 1
    got = []
    while f.due_in() is not None:
        lease = f.next()
        assert lease is not None
        got.append(lease.entry.url)
        f.finish(lease.token, 0.1)
    assert got == ["http://a.test/"] and len(f) == 0
