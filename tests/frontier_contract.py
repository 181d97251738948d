"""The contract every frontier backend must pass, driven directly with simulated time.

A backend's test module subclasses ``FrontierContract`` and implements ``make_frontier``, which
must build the frontier on the ``clock`` it is given: the tests set that clock's time before
each call, so the frontier never reads a clock of its own.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from crawler.frontier import (
    BiasedSelector,
    Entry,
    Frontier,
    Lease,
    Outcome,
    PolitenessPolicy,
    Prioritizer,
)
from crawler.frontier.addresses import AddressBudget, AddressPolicy, LocalAddressBudget
from crawler.scheduler.address_gate import AddressGate


class FakeClock:
    """A clock the test sets: ``clock.now = 5.0``, then every frontier call happens at 5.0."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


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
    clock: FakeClock,
    *,
    concurrency: int = 4,
    duration: Callable[[str], float] = lambda url: 0.1,
    outcome: Callable[[str], str] = lambda url: Outcome.FETCHED,
    discover: Callable[[str], list[Entry]] = lambda url: [],
    until: float = 10_000.0,
    gate: AddressGate | None = None,
) -> Simulation:
    """``gate``: each lease passes the scheduler's address gate too, as in a crawl (a refused
    one goes back, its host held until its turn)."""
    sim = Simulation()
    now = clock.now
    running: list[tuple[float, int, Lease]] = []
    in_flight: Counter[str] = Counter()
    seq = 0
    for _ in range(1_000_000):  # a frontier that says "due now" but hands nothing out must fail
        if now > until:
            break
        clock.now = now
        while len(running) < concurrency:
            lease = frontier.next()
            if lease is None:
                break
            entry = lease.entry
            if gate is not None and not gate.admit(lease.token, entry.host, now, entry.priority):
                continue
            host = lease.entry.host
            in_flight[host] += 1
            sim.max_in_flight[host] = max(sim.max_in_flight.get(host, 0), in_flight[host])
            end = now + duration(lease.entry.url)
            seq += 1
            heapq.heappush(running, (end, seq, lease))
            sim.fetches.append(
                Fetch(lease.entry.url, host, lease.slot, now, end, lease.entry.priority)
            )
        due_in = frontier.due_in()
        due = None if due_in is None else now + due_in
        if due is not None and due_in > 0 and due <= now:  # rounding: step by one ulp at least
            due = math.nextafter(now, math.inf)
        candidates = [t for t in (running[0][0] if running else None, due) if t is not None]
        candidates = [t for t in candidates if t > now] or candidates
        if not candidates:
            break
        now = min(candidates)
        while running and running[0][0] <= now:
            end, _, lease = heapq.heappop(running)
            in_flight[lease.entry.host] -= 1
            clock.now = end
            if gate is not None:
                gate.ended(lease.token, end, end - lease.issued_at)
            # the fetch ends, the page's links go in, then the page is acknowledged
            frontier.complete(lease.token, end - lease.issued_at, outcome(lease.entry.url))
            frontier.add_many(discover(lease.entry.url))
            frontier.ack(lease.token)
    else:
        raise AssertionError("simulation did not settle")
    sim.end_time = clock.now = now
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
        self, policy: PolitenessPolicy | None = None, *, clock: FakeClock, **kwargs: object
    ) -> Frontier:  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def make_address_budget(self, policy: AddressPolicy, clock: FakeClock) -> AddressBudget:
        """The budgets per server address that go with this backend (on ``clock``)."""
        return LocalAddressBudget(policy)

    def reopened(self, frontier: Frontier, clock: FakeClock, **kwargs: object) -> Frontier:
        """The frontier as the next run (or another worker) finds it after ``frontier`` was
        stopped; a backend that keeps nothing across runs goes on with the same object."""
        return frontier

    def frontier(
        self, policy: PolitenessPolicy | None = None, **kwargs: object
    ) -> tuple[Frontier, FakeClock]:
        clock = FakeClock()
        return self.make_frontier(policy, clock=clock, **kwargs), clock

    # -- seen-test and admission ---

    def test_a_url_enters_once_unless_forced(self) -> None:
        f, _ = self.frontier()
        e = Entry(url="http://a.test/x", host="a.test")
        assert f.add(e).added
        assert f.add(Entry(url="http://a.test/x", host="a.test")).reason == "seen"
        assert f.add(Entry(url="http://a.test/x", host="a.test"), force=True).added
        assert len(f) == 2

    def test_a_forced_url_is_seen_from_then_on(self) -> None:
        """A start URL (dont_filter) is forced in; a link back to it must not fetch it again."""
        f, _ = self.frontier()
        assert f.add(Entry(url="http://a.test/", host="a.test"), force=True).added
        assert f.add(Entry(url="http://a.test/", host="a.test")).reason == "seen"
        assert len(f) == 1

    def test_mark_seen(self) -> None:
        f, _ = self.frontier()
        assert f.mark_seen(["http://a.test/1", "http://a.test/2"]) == 2
        assert f.mark_seen(["http://a.test/2"]) == 0
        assert f.add(Entry(url="http://a.test/1", host="a.test")).reason == "seen"
        assert f.add(Entry(url="http://a.test/3", host="a.test")).added
        assert len(f) == 1

    def test_host_budget(self) -> None:
        f, _ = self.frontier(max_pages_per_host=3)
        results = [f.add(e) for e in entries(1, 5)]
        assert [r.added for r in results] == [True, True, True, False, False]
        assert results[-1].reason == "host_budget"

    def test_hosts_lists_the_hosts_with_admitted_urls(self) -> None:
        f, _ = self.frontier()
        f.add_many(entries(2, 2))
        f.set_crawl_delay("c.test", 1.0)  # known to the frontier, nothing admitted
        assert sorted(f.hosts()) in (["h0.test", "h1.test"], ["c.test", "h0.test", "h1.test"])
        assert "h0.test" in f.hosts()

    def test_add_many_returns_one_result_per_entry_in_order(self) -> None:
        f, _ = self.frontier(max_pages_per_host=2)
        f.mark_seen(["http://b.test/old"])
        batch = [
            Entry(url="http://a.test/1", host="a.test"),
            Entry(url="http://a.test/1", host="a.test"),  # twice in one page
            Entry(url="http://b.test/old", host="b.test"),
            Entry(url="http://a.test/2", host="a.test"),
            Entry(url="http://a.test/3", host="a.test"),  # over a.test's budget of 2
            Entry(url="http://b.test/new", host="b.test"),
        ]
        results = f.add_many(batch)
        assert [(r.added, r.reason) for r in results] == [
            (True, ""),
            (False, "seen"),
            (False, "seen"),
            (True, ""),
            (False, "host_budget"),
            (True, ""),
        ]
        assert len(f) == 3
        assert f.add_many([]) == []

    def test_each_url_comes_back_with_the_page_it_was_found_on(self) -> None:
        """The referrer survives the front queues, the back queues, the store's disk or
        Redis form and an expired lease: a link of the same folder, of another folder, of
        another site, of a site with a port, with non-ASCII characters; a seed has none."""
        f, clock = self.frontier(PolitenessPolicy(min_delay=0, delay_factor=0), lease_ttl=10,
                                 back_queues=2)
        found = {
            "https://a.test/doc/b.html": "https://a.test/doc/a.html",
            "https://a.test/doc/sub/c.html": "https://a.test/doc/a.html",
            "https://a.test/other/d.html?q=1": "https://a.test/doc/sub/c.html",
            "http://b.test/e.html": "https://a.test/doc/a.html",
            "http://c.test:8080/f": "http://c.test:8080/",
            "https://d.test/caf\u00e9.html": "https://d.test/r\u00e9sum\u00e9.html",
            "https://d.test/seed.html": "",
        }
        batch = [
            Entry(url=u, host=u.split("/")[2].split(":")[0], depth=0 if not r else 2,
                  payload="seed" if not r else None, referrer=r)
            for u, r in found.items()
        ]
        assert all(r.added for r in f.add_many(batch))
        first = f.next()
        assert first is not None and first.entry.referrer == found[first.entry.url]
        clock.now = 11.0
        f.expire()  # back at the head of its host's queue, with its referrer
        handed: dict[str, str] = {}
        while len(handed) < len(found):
            lease = f.next()
            assert lease is not None
            handed[lease.entry.url] = lease.entry.referrer
            f.finish(lease.token, 0.0)
        assert handed == found

    def test_every_url_is_handed_out_exactly_once(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=0.5), back_queues=3)
        urls = entries(10, 7)
        f.add_many(urls)
        sim = simulate(f, clock, concurrency=4)
        assert Counter(x.url for x in sim.fetches) == Counter(e.url for e in urls)
        assert len(f) == 0 and f.in_flight() == 0
        assert not f.has_work(300)

    # -- politeness ---

    @pytest.mark.parametrize("slots", [1, 3])
    def test_no_host_above_its_slots(self, slots: int) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=0.2, host_concurrency=slots))
        f.add_many(entries(3, 30))
        sim = simulate(f, clock, concurrency=20)
        assert len(sim.fetches) == 90
        assert max(sim.max_in_flight.values()) == slots

    def test_no_slot_used_before_its_time(self) -> None:
        policy = PolitenessPolicy(min_delay=1.0, delay_factor=5.0, max_delay=4.0)
        f, clock = self.frontier(policy, back_queues=4)
        durations = {0: 0.05, 1: 0.5, 2: 2.0}  # 1 s minimum, 2.5 s, capped at 4 s
        f.add_many(entries(3, 6))
        sim = simulate(f, clock, concurrency=8, duration=lambda url: durations[int(url[8])])
        by_slot: dict[tuple[str, int], list[Fetch]] = defaultdict(list)
        for x in sim.fetches:
            by_slot[(x.host, x.slot)].append(x)
        for fetches in by_slot.values():
            for prev, nxt in itertools.pairwise(fetches):
                wanted = policy.delay(prev.end - prev.start)
                assert nxt.start >= prev.end + wanted - 1e-9
                assert nxt.start == pytest.approx(prev.end + wanted)  # and not later either

    def test_crawl_delay_is_honoured_even_above_max_delay(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=1, max_delay=2, max_crawl_delay=10))
        assert f.set_crawl_delay("h0.test", 7)
        f.add_many(entries(1, 3))
        sim = simulate(f, clock)
        starts = [x.start for x in sim.fetches]
        assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx([7.1, 7.1])

    def test_host_asking_too_long_a_crawl_delay_is_skipped(self) -> None:
        gave_up: list[tuple[str, str, int]] = []
        f, clock = self.frontier(
            PolitenessPolicy(max_crawl_delay=10), on_give_up=lambda *a: gave_up.append(a)
        )
        f.add_many(entries(2, 3))
        assert not f.set_crawl_delay("h1.test", 60)
        assert gave_up == [("h1.test", "host_skipped", 3)]  # reported, with its URLs dropped
        sim = simulate(f, clock)
        assert {x.host for x in sim.fetches} == {"h0.test"}
        assert f.add(Entry(url="http://h1.test/new", host="h1.test")).reason == "host_skipped"

    def test_a_held_host_waits_and_keeps_its_urls(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=0.0, delay_factor=0.0))
        f.add_many(entries(2, 2))
        clock.now = 10.0
        f.hold_host("h1.test", 40.0)  # relative: until 50
        f.hold_host("h1.test", 5.0)  # a shorter hold does not shorten the first one
        sim = simulate(f, clock)
        h1 = [x.start for x in sim.fetches if x.host == "h1.test"]
        assert len(sim.fetches) == 4 and min(h1) == 50.0
        assert all(x.start < 50.0 for x in sim.fetches if x.host == "h0.test")

    def test_a_hold_placed_during_a_fetch_outlasts_its_completion(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=1.0))
        f.add_many(entries(1, 2))
        lease = f.next()
        assert lease is not None
        f.hold_host("h0.test", 30.0)
        clock.now = 0.5
        f.finish(lease.token, 0.5)
        clock.now = 29.0
        assert f.next() is None
        clock.now = 30.0
        assert f.next() is not None

    def test_not_sent_frees_the_slot_without_a_delay(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=5))
        f.add_many(entries(1, 3))
        first = f.next()
        assert first is not None and f.next() is None
        clock.now = 0.01
        f.finish(first.token, None, Outcome.NOT_SENT)
        second = f.next()
        assert second is not None
        clock.now = 1.0
        f.finish(second.token, 1.0, Outcome.FETCHED)
        clock.now = 5.9
        assert f.next() is None
        assert f.due_in() == pytest.approx(0.1)
        clock.now = 6.0
        assert f.next() is not None

    def test_failing_host_is_given_up(self) -> None:
        gave_up: list[tuple[str, str, int]] = []
        f, clock = self.frontier(
            PolitenessPolicy(min_delay=0.1, max_failures=3), on_give_up=lambda *a: gave_up.append(a)
        )
        f.add_many(entries(2, 10))
        sim = simulate(
            f, clock, outcome=lambda url: Outcome.FAILED if "h1" in url else Outcome.FETCHED
        )
        per_host = Counter(x.host for x in sim.fetches)
        assert per_host == {"h0.test": 10, "h1.test": 3}
        assert gave_up == [("h1.test", "host_dead", 7)]
        assert len(f) == 0 and not f.has_work(300)
        assert f.add(Entry(url="http://h1.test/late", host="h1.test")).reason == "host_dead"

    def test_a_failing_host_is_held_longer_at_each_failure(self) -> None:
        # Every fetch of h1 fails (a timeout, a 5xx): its next fetch waits the delay plus
        # min_delay x 2^(failures - 1), doubling, until the give-up rule ends it; h0 keeps its
        # pace. A hanging host stops taking a download slot at every turn.
        gave_up: list[tuple[str, str, int]] = []
        f, clock = self.frontier(
            PolitenessPolicy(min_delay=1.0, delay_factor=0, max_failures=6, failure_window=0),
            on_give_up=lambda *a: gave_up.append(a),
        )
        f.add_many(entries(2, 10))
        sim = simulate(
            f, clock, duration=lambda url: 0.5,
            outcome=lambda url: Outcome.FAILED if "h1" in url else Outcome.FETCHED,
        )
        starts = [x.start for x in sim.fetches if x.host == "h1.test"]
        rests = [round(b - a - 0.5, 6) for a, b in itertools.pairwise(starts)]
        assert rests == [1 + 1, 1 + 2, 1 + 4, 1 + 8, 1 + 16]
        assert gave_up == [("h1.test", "host_dead", 4)]
        h0 = [x.start for x in sim.fetches if x.host == "h0.test"]
        assert len(h0) == 10
        assert {round(b - a, 6) for a, b in itertools.pairwise(h0)} == {1.5}

    def test_a_success_resets_the_count_in_a_row_but_not_the_window(self) -> None:
        # One failure in three: never two in a row, and under half of the window.
        f, clock = self.frontier(
            PolitenessPolicy(min_delay=0.1, max_failures=2, failure_window=10)
        )
        f.add_many(entries(1, 30))
        sim = simulate(
            f, clock, outcome=lambda url: Outcome.FAILED if int(url[-1]) % 3 == 1 else
            Outcome.FETCHED
        )
        assert len(sim.fetches) == 30

    def test_a_host_that_fails_half_its_fetches_is_given_up(self) -> None:
        # Failures never two in a row, but every other fetch: the 5th failure among the last
        # 10 fetches gives the host up (a success used to wipe the count, for ever).
        f, clock = self.frontier(
            PolitenessPolicy(min_delay=0.1, max_failures=2, failure_window=10)
        )
        f.add_many(entries(1, 30))
        sim = simulate(
            f, clock, outcome=lambda url: Outcome.FAILED if int(url[-1]) % 2 else Outcome.FETCHED
        )
        assert len(sim.fetches) == 10  # fetches 0-9: the 5th failure is the 10th fetch
        assert len(f) == 0 and not f.has_work(300)
        assert f.add(Entry(url="http://h0.test/late", host="h0.test")).reason == "host_dead"

    def test_old_failures_leave_the_window(self) -> None:
        # Three failures, then successes that push them out of the window of 8 (4 failures
        # give up), then three more: six in all, never four among any 8 fetches in a row.
        failing = {"0", "2", "4", "20", "22", "24"}
        for window in (8, 0):  # 0: only failures in a row count
            f, clock = self.frontier(
                PolitenessPolicy(min_delay=0.1, max_failures=5, failure_window=window)
            )
            f.add_many(entries(1, 40))
            sim = simulate(
                f,
                clock,
                outcome=lambda url: Outcome.FAILED
                if url.rsplit("/", 1)[1] in failing
                else Outcome.FETCHED,
            )
            assert len(sim.fetches) == 40, window

    def test_failures_within_the_window_add_up(self) -> None:
        # The same failures closer together: four among 8 fetches give the host up.
        failing = {"0", "2", "4", "6"}
        f, clock = self.frontier(
            PolitenessPolicy(min_delay=0.1, max_failures=5, failure_window=8)
        )
        f.add_many(entries(1, 40))
        sim = simulate(
            f,
            clock,
            outcome=lambda url: Outcome.FAILED
            if url.rsplit("/", 1)[1] in failing
            else Outcome.FETCHED,
        )
        assert len(sim.fetches) == 7

    # -- a host's first request ---

    def test_first_request_goes_alone_before_the_hosts_others(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=1, host_concurrency=3))
        f.add_many(entries(1, 4))
        f.add(Entry(url="http://h0.test/robots.txt", host="h0.test"), first=True)
        lease = f.next()
        assert lease is not None and lease.entry.url.endswith("robots.txt")
        assert f.next() is None  # the others wait for it, even with free slots
        clock.now = 0.5
        f.complete(lease.token, 0.5)
        clock.now = 0.6
        assert f.next() is not None  # another slot, due at once, before the first is acked
        f.ack(lease.token)
        sim = simulate(f, clock, concurrency=5, until=100)
        assert len(sim.fetches) == 3

    # -- priorities ---

    def test_higher_priorities_first_yet_low_priorities_progress(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=0.0), front_queues=4, back_queues=2)
        urls = [
            Entry(url=f"http://h{i}.test/p{p}", host=f"h{i}.test", priority=p)
            for i in range(200)
            for p in (3, 0)
        ]
        f.add_many(urls)
        sim = simulate(f, clock, concurrency=1)
        order = [x.priority for x in sim.fetches]
        assert len(order) == 400
        first_half = order[:200]
        assert first_half.count(0) > first_half.count(3) * 2  # mostly high priority first
        assert 3 in order[:50]  # yet the low queue is not starved

    @pytest.mark.parametrize("reopen", [False, True], ids=["one_run", "reopened"])
    def test_scrapy_priorities_order_the_urls_that_wait_together(self, reopen: bool) -> None:
        """Under the ``request`` policy, requests queued together leave by Scrapy priority as
        the biased selector draws their front queues, whether this run queued them or found
        them after a stop (a JOBDIR reopen, another Redis worker): one host, so only the
        priorities can order them."""
        prioritizer, k = Prioritizer("request", 8), 8
        scrapy_priorities = [0, 3, -2, 5, 1, 0, -4, 2, -1, 3, 9, -9, 1, 0]
        urls = [
            Entry(f"http://h.test/{i}", "h.test", prioritizer.priority(
                depth=1, host="h.test", request_priority=p))
            for i, p in enumerate(scrapy_priorities)
        ]
        policy = PolitenessPolicy(min_delay=0.1, max_delay=0.1)
        f, clock = self.frontier(policy, front_queues=k)
        f.add_many(urls)
        if reopen:
            f = self.reopened(f, clock, front_queues=k)
        order = [x.url for x in simulate(f, clock, concurrency=1).fetches]
        waiting = [[e.url for e in urls if e.priority == q] for q in range(k)]
        selector, expected = BiasedSelector(k), []
        while any(waiting):
            expected.append(waiting[selector.pick([len(w) for w in waiting])].pop(0))
        assert order == expected
        # priorities 5 and 9 share the top queue (K queues centred on 0), in order of arrival
        assert order[0] == "http://h.test/3"

    # -- hosts that share a server address ---

    @pytest.mark.parametrize("order", ["depth", "fifo"])
    def test_hosts_of_one_address_take_turns_in_priority_order(self, order: str) -> None:
        """50 names on one server address, one fetch there at a time: the address goes to the
        best URL of the host that has waited longest, so under depth order every name's home
        page (depth 0) comes before any name's second page, under FIFO (one priority) the
        names take turns, and the address stays polite."""
        delay = 0.5
        names = [f"n{i}.test" for i in range(50)]
        f, clock = self.frontier(PolitenessPolicy(min_delay=delay, max_delay=delay))
        budget = self.make_address_budget(
            AddressPolicy(concurrency=1, delay=delay, factor=0, ttl=60), clock
        )
        gate = AddressGate(f, budget, want=lambda host: None, inc=lambda stat: None)
        for name in names:
            gate.resolved(name, "192.0.2.7")
        f.add_many([
            Entry(f"http://{name}/{'' if depth == 0 else depth}", name,
                  depth if order == "depth" else 0, depth)
            for depth in range(3)
            for name in names
        ])
        fetches = simulate(f, clock, concurrency=4, gate=gate).fetches
        assert len(fetches) == 150
        for turn in range(3):
            assert sorted(x.host for x in fetches[50 * turn:50 * turn + 50]) == sorted(names)
        if order == "depth":
            assert [x.priority for x in fetches] == [0] * 50 + [1] * 50 + [2] * 50
        for prev, nxt in itertools.pairwise(fetches):
            assert nxt.start >= prev.end + delay - 1e-6, (prev, nxt)

    # -- crawl end ---

    def test_due_in_and_has_work(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=50, max_delay=50))
        assert f.due_in() is None and not f.has_work(300)
        f.add_many(entries(1, 2))
        assert f.due_in() == 0.0
        lease = f.next()
        assert lease is not None
        clock.now = 1.0
        assert f.has_work(horizon=10)  # in flight
        f.finish(lease.token, 0.1)
        clock.now = 2.0
        assert f.due_in() == pytest.approx(49.0)  # relative to now
        assert f.has_work(horizon=60)
        assert not f.has_work(horizon=10)  # due too far ahead: the crawl may end
        assert [r.host for r in f.waiting_hosts()] == ["h0.test"]
        assert f.waiting_hosts()[0].due_in == pytest.approx(49.0)

    # -- the lease lifecycle: complete, ack, renew, release, expire ---

    def test_a_completed_lease_stays_open_until_acknowledged(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=1, max_delay=1))
        f.add_many(entries(1, 2))
        lease = f.next()
        assert lease is not None
        clock.now = 0.5
        f.complete(lease.token, 0.5)
        assert f.in_flight() == 1 and len(f) == 1
        clock.now = 1.5
        second = f.next()  # the slot is free again before the first page is processed
        assert second is not None
        f.finish(second.token, 0.1)
        assert len(f) == 0 and f.in_flight() == 1
        assert f.has_work(horizon=0)  # nothing queued, but a page is still being processed
        f.ack(lease.token)
        assert f.in_flight() == 0 and not f.has_work(horizon=300)
        clock.now = 1000.0  # long past the lease's deadline: an acked URL never comes back
        assert f.expire() == 0 and f.next() is None and len(f) == 0


    def test_complete_says_how_long_the_slot_rests(self) -> None:
        """The delay the frontier applied, as it applied it: the politeness rule on the
        fetch's duration, the host's Crawl-delay, a hold placed during the fetch; nothing for
        a fetch that never reached the network or a lease that is not open."""
        policy = PolitenessPolicy(min_delay=1.0, delay_factor=5.0, max_delay=4.0)
        f, clock = self.frontier(policy)
        assert f.set_crawl_delay("h1.test", 7.0)  # above max_delay: honoured in full
        f.add_many(entries(3, 3))
        leases = {lease.entry.host: lease for lease in (f.next(), f.next(), f.next())}
        assert set(leases) == {"h0.test", "h1.test", "h2.test"}
        f.hold_host("h2.test", 20.0)  # until 20.0, placed while its fetch is in flight
        clock.now = 0.5
        assert f.complete(leases["h0.test"].token, 0.5) == pytest.approx(2.5)  # 5 x 0.5
        assert f.complete(leases["h0.test"].token, 0.5) is None  # completed already
        assert f.complete("no-such-token", 0.5) is None
        assert f.complete(leases["h1.test"].token, 0.1) == pytest.approx(7.0)
        assert f.finish(leases["h2.test"].token, 0.1) == pytest.approx(19.5)
        clock.now = 3.0
        lease = f.next()
        assert lease is not None and lease.entry.host == "h0.test"
        assert f.finish(lease.token, None, Outcome.NOT_SENT) is None  # no time moved
        lease = f.next()
        assert lease is not None and lease.entry.host == "h0.test"
        clock.now = 3.1
        assert f.finish(lease.token, 0.1) == pytest.approx(1.0)  # the minimum delay
    def test_an_expired_lease_comes_back_first_and_rests_its_slot(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=5, max_delay=5), lease_ttl=10)
        f.add_many(entries(1, 3))
        lease = f.next()
        assert lease is not None and lease.entry.url == "http://h0.test/0"
        clock.now = 9.9
        assert f.expire() == 0 and f.in_flight() == 1
        clock.now = 10.0
        assert f.next() is None  # expired now; the fetch may have happened: the slot rests
        assert f.in_flight() == 0 and len(f) == 3
        assert f.due_in() == pytest.approx(5.0)
        assert f.has_work(horizon=5) and not f.has_work(horizon=4)
        clock.now = 15.0
        again = f.next()
        assert again is not None and again.entry.url == "http://h0.test/0"  # head of its host
        assert again.token != lease.token
        f.complete(lease.token, 0.1)  # the expired lease's worker wakes up: no effect
        f.ack(lease.token)
        assert f.in_flight() == 1 and len(f) == 2
        clock.now = 15.5
        f.finish(again.token, 0.1)
        sim = simulate(f, clock)
        assert [x.url for x in sim.fetches] == ["http://h0.test/1", "http://h0.test/2"]

    def test_an_expired_lease_whose_fetch_completed_does_not_rest_again(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=2, max_delay=2), lease_ttl=10)
        f.add_many(entries(1, 1))
        lease = f.next()
        assert lease is not None
        clock.now = 1.0
        f.complete(lease.token, 1.0)  # slot free from 3.0; the page is never acknowledged
        clock.now = 11.0
        assert f.expire() == 1
        assert f.due_in() == 0.0
        again = f.next()
        assert again is not None and again.entry.url == lease.entry.url

    def test_an_expired_first_request_still_goes_before_the_hosts_others(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=0, delay_factor=0), lease_ttl=10)
        f.add_many(entries(1, 2))
        f.add(Entry(url="http://h0.test/robots.txt", host="h0.test"), first=True)
        lease = f.next()
        assert lease is not None and lease.entry.url.endswith("robots.txt")
        clock.now = 10.0
        again = f.next()
        assert again is not None and again.entry.url.endswith("robots.txt")
        assert f.next() is None  # the others still wait for it

    def test_renew_keeps_a_lease_alive_past_its_deadline(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=0, delay_factor=0), lease_ttl=10)
        f.add_many(entries(1, 2))
        lease = f.next()
        assert lease is not None
        clock.now = 8.0
        assert f.renew([lease.token, "no-such-token"]) == 1
        clock.now = 15.0
        assert f.expire() == 0 and f.in_flight() == 1
        assert f.next() is None  # the slot is still taken by the renewed lease
        clock.now = 17.9
        assert f.has_work(horizon=0) and f.in_flight() == 1
        clock.now = 18.0
        assert f.expire() == 1 and f.in_flight() == 0
        assert f.renew([lease.token]) == 0  # too late

    def test_release_hands_back_at_once_without_a_delay(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=5, max_delay=5))
        f.add_many(entries(2, 2))
        a, b = f.next(), f.next()
        assert a is not None and b is not None and f.next() is None
        clock.now = 1.0
        assert f.release([a.token, b.token, "no-such-token"]) == 2
        assert f.in_flight() == 0 and len(f) == 4
        again = {lease.entry.url for lease in f.next_many(10)}  # at once, heads of their hosts
        assert again == {a.entry.url, b.entry.url}
        assert f.release([a.token]) == 0  # already handed back
        f.complete(a.token, 0.1)
        f.ack(a.token)
        assert f.in_flight() == 2 and len(f) == 2

    def test_release_of_a_cut_download_rests_the_slot(self) -> None:
        """A worker stopping mid-download hands the URL back, but the server may have seen
        the request: the host rests for the politeness delay before the URL goes out again."""
        f, clock = self.frontier(PolitenessPolicy(min_delay=3, max_delay=3))
        f.add_many(entries(1, 2))
        a = f.next()
        assert a is not None
        clock.now = 1.0
        assert f.release([a.token], rest=True) == 1
        assert f.in_flight() == 0 and len(f) == 2
        assert f.next() is None and f.due_in() == pytest.approx(3.0)
        clock.now = 4.0
        again = f.next()
        assert again is not None and again.entry.url == a.entry.url  # still the head
        assert f.release([a.token], rest=True) == 0  # already handed back

    def test_unknown_or_finished_lease_tokens_are_ignored(self) -> None:
        f, clock = self.frontier(lease_ttl=10)
        f.add_many(entries(1, 1))
        lease = f.next()
        assert lease is not None
        clock.now = 1.0
        f.complete("no-such-token", 0.1)
        f.ack("no-such-token")
        assert f.in_flight() == 1
        f.finish(lease.token, 0.1)
        f.finish(lease.token, 0.1)  # twice: no harm
        f.complete(lease.token, 0.1)
        assert f.in_flight() == 0 and len(f) == 0 and not f.has_work(300)
        assert f.renew([lease.token]) == 0 and f.release([lease.token]) == 0
        clock.now = 100.0
        assert f.expire() == 0 and len(f) == 0

    def test_acknowledging_without_a_completion_frees_the_slot(self) -> None:
        f, clock = self.frontier(PolitenessPolicy(min_delay=2, max_delay=2))
        f.add_many(entries(1, 2))
        lease = f.next()
        assert lease is not None
        clock.now = 1.0
        f.ack(lease.token)
        assert f.in_flight() == 0
        assert f.due_in() == pytest.approx(2.0)  # rests as after a fetch of unknown duration
        clock.now = 3.0
        assert f.next() is not None


class OpicContract:
    """OPIC ordering (``crawler.frontier.opic``) in a Mercator frontier over any queue store:
    cash conservation, a raise when cash arrives for a queued URL, politeness unbroken, a back
    queue given up after a run of low-value URLs, and robots.txt only for a host whose pages
    are due. ``make_opic_frontier`` builds the frontier with a ``CashLedger`` of its own."""

    def make_opic_frontier(
        self, policy: PolitenessPolicy | None = None, *, clock: FakeClock, **kwargs: object
    ) -> Frontier:  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def opic(
        self, policy: PolitenessPolicy | None = None, **kwargs: object
    ) -> tuple[Any, FakeClock]:
        clock = FakeClock()
        return self.make_opic_frontier(policy, clock=clock, **kwargs), clock

    @staticmethod
    def _graph_crawl(f: Any, clock: FakeClock, hosts: int = 4, pages: int = 12):
        """Crawl a small graph where every page links to 3 others (some seen already); returns
        the simulation, the cash handed to links, and the cash the leases carried."""
        def url(h: int, i: int) -> str:
            return f"http://h{h}.test/{i}"

        handed = 0.0
        leased = 0.0

        def discover(u: str) -> list[Entry]:
            nonlocal handed, leased
            cash = fetched_cash.pop(u)
            leased += cash
            h, i = int(u.split("/")[2][1:-5]), int(u.rsplit("/", 1)[1])
            targets = [((h + 1) % hosts, (i * 3 + 1) % pages), (h, (i + 1) % pages),
                       ((h + 2) % hosts, (i * 7) % pages)]
            out = []
            for th, ti in targets:
                out.append(Entry(url(th, ti), f"h{th}.test", cash=cash / len(targets)))
                handed += cash / len(targets)
            return out

        fetched_cash: dict[str, float] = {}
        real_next = f.next

        def next_with_cash():
            lease = real_next()
            if lease is not None:
                fetched_cash[lease.entry.url] = lease.entry.cash
            return lease

        f.next = next_with_cash
        seeds = [Entry(url(h, 0), f"h{h}.test", cash=1.0) for h in range(hosts)]
        for e in seeds:
            f.add(e, force=True)
        sim = simulate(f, clock, concurrency=3, discover=discover)
        return sim, handed, leased, float(hosts)

    def test_cash_is_conserved(self) -> None:
        f, clock = self.opic(PolitenessPolicy(min_delay=0.5), back_queues=2)
        sim, handed, leased, seeded = self._graph_crawl(f, clock)
        ledger = f.ledger
        assert len(sim.fetches) == 4 * 12  # every page once: order changes, coverage does not
        assert len({x.url for x in sim.fetches}) == len(sim.fetches)
        # every unit of cash that entered went somewhere: a queued URL, a fetched page's
        # history, or a lease (spent) that handed it on
        assert ledger.seeded + ledger.credited + ledger.to_fetched == pytest.approx(
            seeded + handed
        )
        assert ledger.spent == pytest.approx(leased)
        assert ledger.total == pytest.approx(0.0, abs=1e-9) and len(ledger) == 0
        assert leased == pytest.approx(seeded + handed - ledger.to_fetched)

    def test_cash_arriving_for_a_queued_url_raises_it(self) -> None:
        f, _ = self.opic(PolitenessPolicy(min_delay=0, delay_factor=0), back_queues=1)
        for i in range(2):  # holds the one back queue
            f.add(Entry(f"http://busy.test/{i}", "busy.test", cash=1.0))
        lease = f.next()
        assert lease is not None
        for i in range(1, 6):
            f.add(Entry(f"http://other{i}.test/", f"other{i}.test", cash=0.01))
        f.add(Entry("http://late.test/", "late.test", cash=0.01))  # queued last, same value
        # four more pages link to it (seen: its cash grows and it moves to a better queue),
        # one of them through credit() (a link the intake remembered)
        for _ in range(3):
            assert f.add(Entry("http://late.test/", "late.test", cash=0.5)).reason == "seen"
        f.credit([("http://late.test/", 0.5, "")])
        f.finish(lease.token, 0.1)
        order = []
        while (lease := f.next()) is not None:
            order.append(lease.entry.url)
            assert lease.entry.url != "http://late.test/" or lease.entry.cash == pytest.approx(
                2.01
            )
            f.finish(lease.token, 0.1)
        assert order[:2] == ["http://busy.test/1", "http://late.test/"]
        assert sorted(order) == sorted(
            ["http://busy.test/1", "http://late.test/"]
            + [f"http://other{i}.test/" for i in range(1, 6)]
        )  # the copy left behind by the raise is skipped, not fetched again
        assert len(f) == 0

    def test_politeness_is_unbroken(self) -> None:
        policy = PolitenessPolicy(min_delay=1.0, delay_factor=0, host_concurrency=1)
        f, clock = self.opic(policy, back_queues=3)
        sim, _, _, _ = self._graph_crawl(f, clock, hosts=5, pages=10)
        assert len(sim.fetches) == 50
        by_host: dict[str, list[Fetch]] = defaultdict(list)
        for fetch in sim.fetches:
            by_host[fetch.host].append(fetch)
        for fetches in by_host.values():
            fetches.sort(key=lambda x: x.start)
            for a, b in itertools.pairwise(fetches):
                assert b.start >= a.end + 1.0 - 1e-9  # the delay after the previous fetch
        assert max(sim.max_in_flight.values()) == 1

    def test_a_low_value_host_gives_its_back_queue_up(self) -> None:
        f, _ = self.opic(PolitenessPolicy(min_delay=0, delay_factor=0), back_queues=1,
                         back_run=2)
        for i in range(10):  # one host with many URLs of little value holds the back queue
            f.add(Entry(f"http://deep.test/{i}", "deep.test", cash=0.001))
        lease = f.next()
        assert lease is not None and lease.entry.host == "deep.test"
        f.finish(lease.token, 0.1)
        f.add(Entry("http://good.test/", "good.test", cash=1.0))  # waits in a front queue
        hosts = []
        while (lease := f.next()) is not None:
            hosts.append(lease.entry.host)
            f.finish(lease.token, 0.1)
        # after at most back_run more low-value URLs, the valuable one goes
        assert hosts.index("good.test") <= 2
        assert sorted(hosts) == sorted(["good.test"] + ["deep.test"] * 9)

    def test_robots_txt_waits_until_its_host_has_a_back_queue(self) -> None:
        f, _ = self.opic(PolitenessPolicy(min_delay=0, delay_factor=0), back_queues=1)
        for i in range(2):
            f.add(Entry(f"http://a.test/{i}", "a.test", cash=1.0))
        assert f.due_in() == 0.0  # a takes the only back queue
        f.add(Entry("http://b.test/robots.txt", "b.test"), first=True)
        f.add(Entry("http://b.test/", "b.test", cash=0.1))  # no back queue free for b
        first = f.next()
        assert first is not None and first.entry.host == "a.test"
        assert f.next() is None  # b's robots.txt waits with its pages
        f.finish(first.token, 0.1)
        order = []
        while (lease := f.next()) is not None:
            order.append(lease.entry.url)
            f.finish(lease.token, 0.1)
        assert order == ["http://a.test/1", "http://b.test/robots.txt", "http://b.test/"]
