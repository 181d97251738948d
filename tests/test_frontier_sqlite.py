"""The SQLite frontier store: the shared contract, plus what survives a stop or a kill."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest

from crawler.backends.sqlite.frontier import FrontierFileError, SqliteQueueStore
from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy
from tests.frontier_contract import FakeClock, FrontierContract, entries, simulate


def sqlite_frontier(path: Path, policy=None, *, clock=None, **kwargs) -> MercatorFrontier:
    front = kwargs.get("front_queues", 8)
    store_args = {k: kwargs.pop(k) for k in ("read_ahead", "back_buffer") if k in kwargs}
    store = SqliteQueueStore(path, front, **store_args)
    return MercatorFrontier(policy or PolitenessPolicy(), store=store, clock=clock, **kwargs)


class TestSqliteFrontierContract(FrontierContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp = tmp_path

    def make_frontier(self, policy=None, *, clock, **kwargs):
        # small windows, so the tests cross the disk/memory boundary often
        path = Path(tempfile.mkdtemp(dir=self.tmp)) / "frontier.sqlite"
        return sqlite_frontier(path, policy, clock=clock, read_ahead=3, back_buffer=2, **kwargs)

    def reopened(self, frontier, clock, **kwargs):
        """A JOBDIR reopen: the file closed by a clean stop, opened by the next run."""
        path = frontier.store.path
        frontier.close()
        return sqlite_frontier(
            Path(path), frontier.policy, clock=clock, read_ahead=3, back_buffer=2, **kwargs
        )


def test_a_stopped_frontier_resumes_where_it_was(tmp_path):
    path = tmp_path / "f.sqlite"
    clock = FakeClock()
    f = sqlite_frontier(path, PolitenessPolicy(min_delay=0.1), clock=clock, back_queues=3)
    f.add_many(entries(5, 6))
    sim = simulate(f, clock, concurrency=2, until=2.0)
    fetched = {x.url for x in sim.fetches if x.end <= sim.end_time}
    assert 0 < len(fetched) < 30
    f.close()  # a clean stop: whatever was in flight has completed in the simulation

    clock = FakeClock()
    again = sqlite_frontier(path, PolitenessPolicy(min_delay=0.1), clock=clock, back_queues=3)
    in_flight = {x.url for x in sim.fetches} - fetched
    assert len(again) == 30 - len(fetched)  # in flight at the stop: back in the queue
    for e in entries(5, 6):
        assert again.add(Entry(e.url, e.host)).reason == "seen"
    rest = simulate(again, clock, concurrency=2)
    assert {x.url for x in rest.fetches} == {e.url for e in entries(5, 6)} - fetched
    assert in_flight <= {x.url for x in rest.fetches}


def kill(frontier: MercatorFrontier) -> None:
    """The process dies here: no flush, no commit (closing the connection rolls the open
    transaction back, as the kill would)."""
    frontier.store.db.close()


def test_a_killed_frontier_fetches_again_what_was_not_acknowledged(tmp_path):
    """The lease lifecycle's point: a page fetched but not yet processed (its links not yet
    committed) when the process dies is fetched again, so its links are found again."""
    path = tmp_path / "f.sqlite"
    clock = FakeClock()
    f = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), clock=clock, back_queues=2)
    f.add_many(entries(2, 5))
    done = f.next()
    fetched = f.next()
    assert done is not None and fetched is not None
    clock.now = 0.1
    f.complete(done.token, 0.1)
    f.add_many([Entry("http://h0.test/from-done", "h0.test")])
    f.ack(done.token)  # commits: the 10 URLs, done's link and done's deletion
    f.complete(fetched.token, 0.1)  # its fetch ended; its page is still being processed:
    f.add_many([Entry("http://h1.test/from-fetched", "h1.test")])  # its link is not committed
    f.add(Entry("http://late.test/", "late.test"))  # discovered after the last commit
    kill(f)

    clock = FakeClock()
    again = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), clock=clock, back_queues=2)
    links = {fetched.entry.url: [Entry("http://h1.test/from-fetched", "h1.test")]}
    rest = simulate(again, clock, discover=lambda url: links.get(url, []))
    urls = [x.url for x in rest.fetches]
    assert done.entry.url not in urls  # acknowledged: gone for good
    assert "http://h0.test/from-done" in urls  # committed with done's acknowledgement
    assert urls.count(fetched.entry.url) == 1  # completed but not acknowledged: fetched again
    assert "http://h1.test/from-fetched" in urls  # so the link lost in the kill is found again
    assert "http://late.test/" not in urls  # (a link of a page that is not fetched again)
    assert len(urls) == 9 + 2
    again.close()


def test_an_expired_lease_keeps_its_row_until_acknowledged(tmp_path):
    path = tmp_path / "f.sqlite"
    clock = FakeClock()
    f = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), clock=clock, lease_ttl=10)
    f.add_many(entries(1, 2))
    lease = f.next()
    assert lease is not None
    clock.now = 10.0
    assert f.expire() == 1
    again = f.next()
    assert again is not None and again.entry.url == lease.entry.url
    clock.now = 10.1
    f.complete(again.token, 0.1)
    f.ack(lease.token)  # the expired lease's late acknowledgement must not delete the row
    f.store.commit()
    kill(f)
    resumed = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), clock=FakeClock())
    assert len(resumed) == 2  # both rows: neither URL's page was acknowledged
    resumed.close()


def test_memory_stays_bounded_with_many_queued_urls(tmp_path):
    clock = FakeClock()
    f = sqlite_frontier(
        tmp_path / "f.sqlite", clock=clock, back_queues=2, read_ahead=50, back_buffer=10
    )
    f.add_many([Entry(f"http://h{i % 3}.test/{i}", f"h{i % 3}.test") for i in range(20_000)])
    store = f.store
    assert len(f) == 20_000
    in_memory = sum(map(len, store._head)) + sum(map(len, store._back.values()))
    assert in_memory <= 8 * 50 + 2 * 10
    sim = simulate(f, clock, concurrency=4)
    assert len(sim.fetches) == 20_000
    f.close()


def test_page_budgets_and_admitted_hosts_survive_a_resume(tmp_path):
    path = tmp_path / "f.sqlite"
    f = sqlite_frontier(path, clock=FakeClock(), max_pages_per_host=3)
    assert [f.add(e).added for e in entries(1, 2)] == [True, True]
    f.close()
    again = sqlite_frontier(path, clock=FakeClock(), max_pages_per_host=3)
    assert again.hosts() == ["h0.test"]  # what the hosts-per-domain budget is rebuilt from
    late = [Entry(url=f"http://h0.test/late{i}", host="h0.test") for i in range(2)]
    assert [again.add(e).reason for e in late] == ["", "host_budget"]


def test_referrers_survive_a_stop_in_few_bytes(tmp_path):
    """A link keeps where it was found across a stop, stored as a coded delta against its URL
    (host and folder shared), not as the page's URL."""
    path = tmp_path / "f.sqlite"
    f = sqlite_frontier(path, clock=FakeClock())
    f.add(Entry("https://a.test/old.html", "a.test"))
    f.add(Entry("https://a.test/doc/new.html", "a.test", referrer="https://a.test/doc/i.html"))
    f.close()
    again = sqlite_frontier(path, PolitenessPolicy(min_delay=0.0), clock=FakeClock())
    found = {x.url: x.referrer for x in again.store.iter_queued()}
    assert found == {
        "https://a.test/old.html": "",
        "https://a.test/doc/new.html": "https://a.test/doc/i.html",
    }
    stored = again.store.db.execute("SELECT referrer FROM queue WHERE referrer IS NOT NULL")
    [(blob,)] = stored.fetchall()
    assert len(blob) <= 2 + len("i.html") * 6 // 8


def test_a_file_of_another_layout_is_refused_by_name(tmp_path):
    """A JOBDIR's frontier written by another version (its referrers coded otherwise) is not
    read: one line names the file and what to do, and the file is left as it was."""
    path = tmp_path / "f.sqlite"
    f = sqlite_frontier(path, clock=FakeClock())
    f.add(Entry("https://a.test/doc/new.html", "a.test", referrer="https://a.test/doc/i.html"))
    f.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 1")
    db.close()
    with pytest.raises(FrontierFileError, match=r"f\.sqlite was written by another version.*"
                       r"layout 1, this one reads 2"):
        SqliteQueueStore(path, 4)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM queue").fetchone()[0] == 1
    db.close()
