"""The contract every frontier backend must pass, driven directly with simulated time.

A backend's test module subclasses ``FrontierContract`` and implements ``make_frontier``.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from crawler.frontier import Entry, Frontier, Lease, Outcome, PolitenessPolicy


@dataclass
class Fetch:
    url: str
    host: str
    slot: int
    start: float
    end: float
    priority: int


@dataclass
class Simulation:
    """A discrete-event crawl: ``concurrency`` fetchers, each fetch taking ``duration(url)``."""

    fetches: list[Fetch] = field(default_factory=list)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    end_time: float = 0.0


def simulate(
    frontier: Frontier,
    *,
    concurrency: int = 4,
    duration: Callable[[str], float] = lambda url: 0.1,
    outcome: Callable[[str], str] = lambda url: Outcome.FETCHED,
    discover: Callable[[str], list[Entry]] = lambda url: [],
    until: float = 10_000.0,
) -> Simulation:
    sim = Simulation()
    now = 0.0
    running: list[tuple[float, int, Lease]] = []
    in_flight: Counter[str] = Counter()
    seq = 0
    for _ in range(1_000_000):  # a frontier that says "due now" but hands nothing out must fail
        if now > until:
            break
        while len(running) < concurrency:
            lease = frontier.next(now)
            if lease is None:
                break
            host = lease.entry.host
            in_flight[host] += 1
            sim.max_in_flight[host] = max(sim.max_in_flight.get(host, 0), in_flight[host])
            end = now + duration(lease.entry.url)
            seq += 1
            heapq.heappush(running, (end, seq, lease))
            sim.fetches.append(
                Fetch(lease.entry.url, host, lease.slot, now, end, lease.entry.priority)
            )
        due = frontier.next_due(now)
        candidates = [t for t in (running[0][0] if running else None, due) if t is not None]
        candidates = [t for t in candidates if t > now] or candidates
        if not candidates:
            break
        now = min(candidates)
        while running and running[0][0] <= now:
            end, _, lease = heapq.heappop(running)
            in_flight[lease.entry.host] -= 1
            frontier.complete(lease.token, end, end - lease.issued_at, outcome(lease.entry.url))
            for e in discover(lease.entry.url):
                frontier.add(e)
    else:
        raise AssertionError("simulation did not settle")
    sim.end_time = now
    return sim


def entries(hosts: int, per_host: int, priority: Callable[[int, int], int] = lambda h, i: 0):
    return [
        Entry(url=f"http://h{h}.test/{i}", host=f"h{h}.test", priority=priority(h, i))
        for i in range(per_host)
        for h in range(hosts)
    ]


class FrontierContract:
    """Semantics that every backend must show."""

    def make_frontier(
        self, policy: PolitenessPolicy | None = None, **kwargs: object
    ) -> Frontier:  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    # -- seen-test and admission ---

    def test_a_url_enters_once_unless_forced(self) -> None:
        f = self.make_frontier()
        e = Entry(url="http://a.test/x", host="a.test")
        assert f.add(e).added
        assert f.add(Entry(url="http://a.test/x", host="a.test")).reason == "seen"
        assert f.add(Entry(url="http://a.test/x", host="a.test"), force=True).added
        assert len(f) == 2

    def test_mark_seen(self) -> None:
        f = self.make_frontier()
        assert f.mark_seen(["http://a.test/1", "http://a.test/2"]) == 2
        assert f.mark_seen(["http://a.test/2"]) == 0
        assert f.add(Entry(url="http://a.test/1", host="a.test")).reason == "seen"
        assert f.add(Entry(url="http://a.test/3", host="a.test")).added
        assert len(f) == 1

    def test_host_budget(self) -> None:
        f = self.make_frontier(max_pages_per_host=3)
        results = [f.add(e) for e in entries(1, 5)]
        assert [r.added for r in results] == [True, True, True, False, False]
        assert results[-1].reason == "host_budget"

    def test_every_url_is_handed_out_exactly_once(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=0.5), back_queues=3)
        urls = entries(10, 7)
        f.add_many(urls)
        sim = simulate(f, concurrency=4)
        assert Counter(x.url for x in sim.fetches) == Counter(e.url for e in urls)
        assert len(f) == 0 and f.in_flight() == 0
        assert not f.has_work(sim.end_time, 300)

    # -- politeness ---

    @pytest.mark.parametrize("slots", [1, 3])
    def test_no_host_above_its_slots(self, slots: int) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=0.2, host_concurrency=slots))
        f.add_many(entries(3, 30))
        sim = simulate(f, concurrency=20)
        assert len(sim.fetches) == 90
        assert max(sim.max_in_flight.values()) == slots

    def test_no_slot_used_before_its_time(self) -> None:
        policy = PolitenessPolicy(min_delay=1.0, delay_factor=5.0, max_delay=4.0)
        f = self.make_frontier(policy, back_queues=4)
        durations = {0: 0.05, 1: 0.5, 2: 2.0}  # 1 s minimum, 2.5 s, capped at 4 s
        f.add_many(entries(3, 6))
        sim = simulate(f, concurrency=8, duration=lambda url: durations[int(url[8])])
        by_slot: dict[tuple[str, int], list[Fetch]] = defaultdict(list)
        for x in sim.fetches:
            by_slot[(x.host, x.slot)].append(x)
        for fetches in by_slot.values():
            for prev, nxt in itertools.pairwise(fetches):
                wanted = policy.delay(prev.end - prev.start)
                assert nxt.start >= prev.end + wanted - 1e-9
                assert nxt.start == pytest.approx(prev.end + wanted)  # and not later either

    def test_crawl_delay_is_honoured_even_above_max_delay(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=1, max_delay=2, max_crawl_delay=10))
        assert f.set_crawl_delay("h0.test", 7)
        f.add_many(entries(1, 3))
        sim = simulate(f)
        starts = [x.start for x in sim.fetches]
        assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx(
            [7.1, 7.1]
        )

    def test_host_asking_too_long_a_crawl_delay_is_skipped(self) -> None:
        f = self.make_frontier(PolitenessPolicy(max_crawl_delay=10))
        f.add_many(entries(2, 3))
        assert not f.set_crawl_delay("h1.test", 60)
        sim = simulate(f)
        assert {x.host for x in sim.fetches} == {"h0.test"}
        assert f.add(Entry(url="http://h1.test/new", host="h1.test")).reason == "host_skipped"

    def test_a_held_host_waits_and_keeps_its_urls(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=0.0, delay_factor=0.0))
        f.add_many(entries(2, 2))
        f.hold_host("h1.test", 50.0)
        sim = simulate(f)
        h1 = [x.start for x in sim.fetches if x.host == "h1.test"]
        assert len(sim.fetches) == 4 and min(h1) == 50.0
        assert all(x.start < 50.0 for x in sim.fetches if x.host == "h0.test")

    def test_a_hold_placed_during_a_fetch_outlasts_its_completion(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=1.0))
        f.add_many(entries(1, 2))
        lease = f.next(0.0)
        f.hold_host("h0.test", 30.0)
        f.complete(lease.token, 0.5, 0.5)
        assert f.next(29.0) is None and f.next(30.0) is not None

    def test_not_sent_frees_the_slot_without_a_delay(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=5))
        f.add_many(entries(1, 3))
        first = f.next(0.0)
        assert first is not None and f.next(0.0) is None
        f.complete(first.token, 0.01, None, Outcome.NOT_SENT)
        second = f.next(0.01)
        assert second is not None
        f.complete(second.token, 1.0, 1.0, Outcome.FETCHED)
        assert f.next(5.9) is None
        assert f.next(6.0) is not None

    def test_failing_host_is_given_up(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=0.1, max_failures=3))
        f.add_many(entries(2, 10))
        sim = simulate(
            f, outcome=lambda url: Outcome.FAILED if "h1" in url else Outcome.FETCHED
        )
        per_host = Counter(x.host for x in sim.fetches)
        assert per_host == {"h0.test": 10, "h1.test": 3}
        assert len(f) == 0 and not f.has_work(sim.end_time, 300)
        assert f.add(Entry(url="http://h1.test/late", host="h1.test")).reason == "host_dead"

    def test_a_success_resets_the_failure_count(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=0.1, max_failures=2))
        f.add_many(entries(1, 6))
        sim = simulate(
            f, outcome=lambda url: Outcome.FAILED if int(url[-1]) % 2 else Outcome.FETCHED
        )
        assert len(sim.fetches) == 6

    # -- a host's first request ---

    def test_first_request_goes_alone_before_the_hosts_others(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=1, host_concurrency=3))
        f.add_many(entries(1, 4))
        f.add(Entry(url="http://h0.test/robots.txt", host="h0.test"), first=True)
        lease = f.next(0.0)
        assert lease is not None and lease.entry.url.endswith("robots.txt")
        assert f.next(0.0) is None  # the others wait for it, even with free slots
        f.complete(lease.token, 0.5, 0.5)
        assert f.next(0.6) is not None  # another slot, due at once
        sim = simulate(f, concurrency=5, until=100)
        assert len(sim.fetches) == 3

    # -- priorities ---

    def test_higher_priorities_first_yet_low_priorities_progress(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=0.0), front_queues=4, back_queues=2)
        urls = [
            Entry(url=f"http://h{i}.test/p{p}", host=f"h{i}.test", priority=p)
            for i in range(200)
            for p in (3, 0)
        ]
        f.add_many(urls)
        sim = simulate(f, concurrency=1)
        order = [x.priority for x in sim.fetches]
        assert len(order) == 400
        first_half = order[:200]
        assert first_half.count(0) > first_half.count(3) * 2  # mostly high priority first
        assert 3 in order[:50]  # yet the low queue is not starved

    # -- crawl end ---

    def test_next_due_and_has_work(self) -> None:
        f = self.make_frontier(PolitenessPolicy(min_delay=50, max_delay=50))
        assert f.next_due(0.0) is None and not f.has_work(0.0, 300)
        f.add_many(entries(1, 2))
        assert f.next_due(0.0) == 0.0
        lease = f.next(0.0)
        assert lease is not None
        assert f.has_work(1.0, horizon=10)  # in flight
        f.complete(lease.token, 1.0, 0.1)
        assert f.next_due(2.0) == pytest.approx(51.0)
        assert f.has_work(2.0, horizon=60)
        assert not f.has_work(2.0, horizon=10)  # due too far ahead: the crawl may end
        assert [r.host for r in f.waiting_hosts(2.0)] == ["h0.test"]

    def test_unknown_lease_tokens_are_ignored(self) -> None:
        f = self.make_frontier()
        f.add_many(entries(1, 1))
        lease = f.next(0.0)
        assert lease is not None
        f.complete(lease.token + 1000, 1.0, 0.1)
        assert f.in_flight() == 1
        f.complete(lease.token, 1.0, 0.1)
        f.complete(lease.token, 1.0, 0.1)  # twice: no harm
        assert f.in_flight() == 0
