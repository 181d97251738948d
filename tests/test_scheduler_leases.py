"""Lease tracking without Scrapy: requests and responses are plain objects with a ``meta``
dict; the frontier is the real Mercator one (and, for a completion that comes later, the real
BufferedFrontier around it)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from crawler.frontier import Entry, MercatorFrontier, Outcome, PolitenessPolicy
from crawler.frontier.buffered import BufferedFrontier
from crawler.meta import LEASE_META, STOPPED_META
from crawler.scheduler.leases import LeaseTracker
from crawler.scheduler.stats import FrontierStats
from tests.test_frontier_buffered import wait_for_lease
from tests.test_scheduler_intake import Stats


@dataclass(eq=False)
class Page:
    """A request, or the response to it: both carry the request's meta."""

    url: str
    meta: dict[str, Any] = field(default_factory=dict)


class Tracked:
    def __init__(self, frontier: Any, working: set[str] | None = None) -> None:
        self.frontier = frontier
        self.acked: list[str] = []
        self.completed: list[tuple[str, str, float | None, Outcome]] = []
        self.stats = Stats()
        self.working = working
        self.leases = LeaseTracker(
            frontier,
            FrontierStats(self.stats),
            ack=self.ack,
            completed=lambda request, host, rest, outcome: self.completed.append(
                (request.url, host, rest, outcome)
            ),
            engine_holds=lambda r: None if self.working is None else r.url in self.working,
        )

    def ack(self, token: str) -> None:
        self.acked.append(token)
        self.frontier.ack(token)

    def hand_out(self) -> Page:
        lease = self.frontier.next()
        assert lease is not None
        page = Page(lease.entry.url)
        self.leases.handed_out(lease.token, page, lease.entry.host)
        return page


def frontier_with(n: int, min_delay: float = 2.0) -> MercatorFrontier:
    frontier = MercatorFrontier(PolitenessPolicy(min_delay=min_delay, max_delay=min_delay))
    frontier.add_many([Entry(f"http://h{i}.test/", f"h{i}.test") for i in range(n)])
    return frontier


def test_a_completion_reports_the_rest_the_frontier_applied() -> None:
    t = Tracked(frontier_with(2))
    page, unsent = t.hand_out(), t.hand_out()
    t.leases.fetch_ended(page, Outcome.FETCHED, 0.1, size=10, for_spider=True)
    t.leases.fetch_ended(unsent, Outcome.NOT_SENT, None, size=0, for_spider=False)
    assert t.completed == [
        ("http://h0.test/", "h0.test", pytest.approx(2.0), Outcome.FETCHED),
        ("http://h1.test/", "h1.test", None, Outcome.NOT_SENT),
    ]
    assert t.acked == [unsent.meta[LEASE_META]]  # nothing of it goes to the spider
    t.leases.fetch_ended(page, Outcome.FETCHED, 0.1, size=10, for_spider=True)
    assert len(t.completed) == 2  # a fetch ends once
    assert t.stats.values == {"frontier/fetch/fetched": 1, "frontier/fetch/not_sent": 1}


def test_a_page_is_acknowledged_when_its_output_ended_and_its_items_left() -> None:
    t = Tracked(frontier_with(1))
    page = t.hand_out()
    t.leases.fetch_ended(page, Outcome.FETCHED, 0.1, size=10, for_spider=True)
    t.leases.item_done(page)
    t.leases.page_output_done(page, 2)
    assert t.acked == []
    t.leases.item_done(page)
    assert t.acked == [page.meta[LEASE_META]] and t.frontier.in_flight() == 0


def test_a_fetch_cut_by_a_stop_goes_back_to_the_frontier() -> None:
    t = Tracked(frontier_with(1))
    page = t.hand_out()
    page.meta[STOPPED_META] = True
    t.leases.fetch_ended(page, Outcome.FAILED, None, size=0, for_spider=False)
    assert t.completed == [] and t.acked == [] and len(t.frontier) == 1
    assert t.stats.values == {"frontier/leases_released_at_stop": 1}


def test_renewal_keeps_what_the_engine_holds_and_acknowledges_what_it_let_go() -> None:
    t = Tracked(frontier_with(3), working=set())
    working, done, unstarted = t.hand_out(), t.hand_out(), t.hand_out()
    t.working = {working.url}
    t.leases.reached_downloader(working)
    t.leases.reached_downloader(done)
    t.leases.fetch_ended(done, Outcome.FETCHED, 0.1, size=1, for_spider=True)
    assert t.leases.unstarted() == [unstarted.meta[LEASE_META]]
    t.leases.renew()
    assert t.acked == [done.meta[LEASE_META]]
    assert t.stats.values["frontier/acked_late"] == 1
    assert t.frontier.in_flight() == 2  # working, renewed; unstarted, left to expire


def test_a_frontier_that_completes_later_reports_when_it_knows() -> None:
    inner = frontier_with(1)
    reported = threading.Event()
    t: Tracked | None = None

    def on_completed(token: str, rest: float | None) -> None:
        assert t is not None
        t.leases.completed_later(token, rest)  # the adapter hops to its thread first
        reported.set()

    arrived = threading.Event()
    buffered = BufferedFrontier(inner, notify=arrived.set, on_completed=on_completed)
    t = Tracked(buffered)
    lease = wait_for_lease(buffered, arrived)
    page = Page(lease.entry.url)
    t.leases.handed_out(lease.token, page, lease.entry.host)
    t.leases.fetch_ended(page, Outcome.FETCHED, 0.1, size=1, for_spider=False)
    assert reported.wait(10.0)
    assert t.completed == [("http://h0.test/", "h0.test", pytest.approx(2.0), Outcome.FETCHED)]
    buffered.close()
