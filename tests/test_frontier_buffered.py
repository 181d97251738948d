"""BufferedFrontier: a shared frontier behind a worker thread, so the caller never waits on it.

The shared frontier here is the real in-memory Mercator frontier; a subclass can block chosen
calls on an Event to show what the caller sees while the shared frontier is slow.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy
from crawler.frontier.api import AddResult, Lease, Outcome
from crawler.frontier.buffered import PENDING, BufferedFrontier
from tests.frontier_contract import entries

WAIT = 10.0  # generous: these waits end as soon as the worker has done its part


class GatedFrontier(MercatorFrontier):
    """Mercator whose ``next_many`` and ``add_many`` wait for a gate to open."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def next_many(self, n: int) -> list[Lease]:
        self.entered.set()
        assert self.gate.wait(WAIT)
        return super().next_many(n)

    def add_many(self, batch: Sequence[Entry]) -> list[AddResult]:
        self.entered.set()
        assert self.gate.wait(WAIT)
        return super().add_many(batch)


def fast_policy() -> PolitenessPolicy:
    return PolitenessPolicy(min_delay=0.0, delay_factor=0.0, max_delay=0.0)


@pytest.fixture
def arrived() -> threading.Event:
    return threading.Event()


def answered(frontier: BufferedFrontier, horizon: float) -> bool:
    """``has_work`` as the engine sees it: asked, answered by the worker (``notify``), asked
    again (the reactor never waits for the shared frontier)."""
    frontier.has_work(horizon)
    assert frontier.flush(WAIT)
    return frontier.has_work(horizon)


def wait_for_lease(frontier: BufferedFrontier, arrived: threading.Event) -> Lease:
    for _ in range(100):
        lease = frontier.next()
        if lease is not None:
            return lease
        arrived.wait(WAIT / 100)
        arrived.clear()
    raise AssertionError("no lease arrived")


def test_leases_arrive_ahead_and_every_url_is_served_once(arrived) -> None:
    inner = MercatorFrontier(fast_policy())
    inner.add_many(entries(6, 5))
    f = BufferedFrontier(inner, read_ahead=4, notify=arrived.set)
    served = []
    while len(served) < 30:
        lease = wait_for_lease(f, arrived)
        served.append(lease.entry.url)
        f.finish(lease.token, 0.01)
    assert sorted(served) == sorted(e.url for e in entries(6, 5))
    assert f.flush(WAIT)
    f._take_snapshot()
    assert not answered(f, 300) and inner.in_flight() == 0 and len(inner) == 0
    f.close()


def test_next_never_waits_for_the_shared_frontier(arrived) -> None:
    inner = GatedFrontier(fast_policy())
    inner.add_many(entries(2, 2))
    inner.gate.clear()  # the shared frontier is stuck
    f = BufferedFrontier(inner, read_ahead=2, notify=arrived.set)
    assert f.next() is None  # answered while the worker is blocked
    assert inner.entered.wait(WAIT)
    assert f.next() is None and f.has_work(300)  # a lease request is outstanding
    inner.gate.set()
    assert wait_for_lease(f, arrived).entry.host in {"h0.test", "h1.test"}
    f.close()


def test_queued_adds_count_as_work_until_sent_and_report_their_results(arrived) -> None:
    inner = GatedFrontier(fast_policy())
    inner.add(Entry("http://h0.test/0", "h0.test"))
    results: list[list[AddResult]] = []
    got = threading.Event()

    def on_added(batch: list[Entry], res: list[AddResult]) -> None:
        results.append(res)
        got.set()

    f = BufferedFrontier(inner, notify=arrived.set, on_added=on_added)
    lease = wait_for_lease(f, arrived)
    f.finish(lease.token, 0.01)
    assert f.flush(WAIT)
    inner.gate.clear()
    inner.entered.clear()
    links = [Entry("http://h0.test/0", "h0.test"), Entry("http://h0.test/1", "h0.test")]
    assert [r.reason for r in f.add_many(links)] == [PENDING, PENDING]
    assert inner.entered.wait(WAIT)
    f._take_snapshot()
    assert f.has_work(0)  # nothing due in the snapshot, but links are on their way
    inner.gate.set()
    assert got.wait(WAIT)
    assert [(r.added, r.reason) for r in results[0]] == [(False, "seen"), (True, "")]
    f.close()


def test_link_batches_queued_meanwhile_go_in_one_call_before_a_later_completion(
    arrived,
) -> None:
    """While the worker is busy, the pages' link batches join one call (a sharded frontier's
    one batch per shard); a completion queued after a batch is sent after it."""
    inner = GatedFrontier(fast_policy())
    inner.add_many(entries(1, 2))
    calls: list[int] = []
    order: list[str] = []
    original_add_many, original_finish = inner.add_many, inner.finish

    def add_many(batch: Sequence[Entry]) -> list[AddResult]:
        calls.append(len(batch))
        order.append("links")
        return original_add_many(batch)

    def finish(token: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        order.append("finish")
        return original_finish(token, *args, **kwargs)

    inner.add_many, inner.finish = add_many, finish  # type: ignore[method-assign]
    results: list[list[AddResult]] = []
    f = BufferedFrontier(inner, notify=arrived.set, on_added=lambda b, r: results.append(r))
    first = wait_for_lease(f, arrived)
    inner.gate.clear()  # the worker is now stuck in the first call it makes
    inner.entered.clear()
    f.add_many([Entry("http://h1.test/0", "h1.test")])
    assert inner.entered.wait(WAIT)  # ... sending the first page's links
    f.add_many([Entry("http://h1.test/1", "h1.test"), Entry("http://h1.test/2", "h1.test")])
    f.add_many([Entry("http://h1.test/3", "h1.test")])
    f.finish(first.token, 0.01)
    inner.gate.set()
    assert f.flush(WAIT)
    assert calls == [1, 3]  # the two batches queued meanwhile: one call
    assert order == ["links", "links", "finish"]
    assert [len(r) for r in results] == [1, 2, 1]  # each page still hears its own results
    f.close()


def test_links_and_acknowledgements_queued_meanwhile_go_in_one_call_links_first(
    arrived,
) -> None:
    """Links, completions and acknowledgements queued while the worker is busy go in one call
    (``Frontier.apply``: links first), so no acknowledgement passes the links before it; a
    call of another kind closes the batch."""
    inner = GatedFrontier(fast_policy())
    inner.add_many(entries(3, 1))
    order: list[str] = []
    original_add_many, original_settle = inner.add_many, inner.settle_many

    def add_many(batch: Sequence[Entry]) -> list[AddResult]:
        order.append(f"links x{len(batch)}")
        return original_add_many(batch)

    def settle_many(settlements):  # type: ignore[no-untyped-def]
        order.append(" ".join(s.kind for s in settlements))
        return original_settle(settlements)

    inner.add_many, inner.settle_many = add_many, settle_many  # type: ignore[method-assign]
    rests: list[str] = []
    f = BufferedFrontier(
        inner, notify=arrived.set, on_completed=lambda token, rest: rests.append(token)
    )
    a, b, c = (wait_for_lease(f, arrived) for _ in range(3))
    inner.gate.clear()
    inner.entered.clear()
    f.add_many([Entry("http://h9.test/0", "h9.test")])  # the worker is stuck sending this
    assert inner.entered.wait(WAIT)
    f.complete(a.token, 0.01)
    f.complete(b.token, 0.01)  # joins a's completion
    f.add_many([Entry("http://h9.test/1", "h9.test")])  # a's links
    f.ack(a.token)
    f.hold_host("h9.test", 0.0)  # another kind of call: the batch is closed
    f.finish(c.token, 0.01)
    inner.gate.set()
    assert f.flush(WAIT)
    assert order == ["links x1", "links x1", "complete complete ack", "finish"]
    assert rests == [a.token, b.token, c.token]  # every completion heard, in order
    f.close()


def test_a_batch_lingers_for_more_pages_before_it_is_sent() -> None:
    """``linger``: the pages queued within it go in one call (group commit), even when the
    worker was idle."""
    inner = MercatorFrontier(fast_policy())
    calls: list[int] = []
    original = inner.apply

    def apply(entries_, settlements):  # type: ignore[no-untyped-def]
        calls.append(len(entries_))
        return original(entries_, settlements)

    inner.apply = apply  # type: ignore[method-assign]
    f = BufferedFrontier(inner, linger=0.3)
    for i in range(3):
        f.add_many([Entry(f"http://h{i}.test/", f"h{i}.test")])
    assert f.flush(WAIT)
    assert calls == [3]
    f.close()


def test_completions_report_the_rest_once_the_shared_frontier_applied_it(arrived) -> None:
    """``complete`` returns at once (it cannot know the rest yet); the rest the shared
    frontier gave the slot reaches ``on_completed``, in the order the completions were sent."""
    inner = MercatorFrontier(PolitenessPolicy(min_delay=2.0, max_delay=2.0))
    inner.add_many(entries(2, 1))
    reported: list[tuple[str, float | None]] = []
    f = BufferedFrontier(
        inner, notify=arrived.set, on_completed=lambda token, rest: reported.append((token, rest))
    )
    assert f.completes_later
    first, second = wait_for_lease(f, arrived), wait_for_lease(f, arrived)
    assert f.complete(first.token, 0.1) is None
    assert f.finish(second.token, None, Outcome.NOT_SENT) is None
    assert f.flush(WAIT)
    assert reported[0][0] == first.token and reported[0][1] == pytest.approx(2.0, abs=0.1)
    assert reported[1] == (second.token, None)
    f.close()


def test_close_hands_back_the_leases_never_started(arrived) -> None:
    inner = MercatorFrontier(fast_policy())
    inner.add_many(entries(4, 1))
    f = BufferedFrontier(inner, read_ahead=4, max_wait=WAIT, notify=arrived.set)
    first = wait_for_lease(f, arrived)
    for _ in range(100):  # the rest of the read-ahead arrives
        if len(f._buffer) == 3:
            break
        arrived.wait(WAIT / 100)
    assert len(f._buffer) == 3 and inner.in_flight() == 4
    f.finish(first.token, 0.01)
    f.close()
    assert inner.in_flight() == 0 and len(inner) == 3


class ManualClock:
    """The frontiers' clock, moved on by the test: a lease's lifetime passes only when the test
    says so, however long a loaded machine keeps the worker thread from running."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RenewalsSeen(MercatorFrontier):
    """Mercator that tells the test when a renewal arrived."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.renewed = threading.Event()

    def renew(self, tokens) -> int:  # type: ignore[no-untyped-def]
        n = super().renew(tokens)
        self.renewed.set()
        return n


def test_long_fetches_keep_their_leases(arrived) -> None:
    """The worker renews a lease still out before its lifetime ends: each step of the clock
    ages it past the renewal age (a third of the lifetime) yet less than a lifetime, and the
    clock moves on only once the worker renewed, so the fetch outlives its first lease many
    times over and the lease never expires."""
    clock = ManualClock()
    inner = RenewalsSeen(fast_policy(), lease_ttl=0.3, clock=clock)
    inner.add(Entry("http://h0.test/slow", "h0.test"))
    f = BufferedFrontier(inner, read_ahead=1, refresh=0.05, notify=arrived.set, clock=clock)
    lease = wait_for_lease(f, arrived)
    inner.renewed.clear()
    for _ in range(10):  # 1.2 s on the frontier's clock: four lease lifetimes
        clock.now += 0.12
        assert inner.renewed.wait(WAIT), "the lease was not renewed"
        inner.renewed.clear()
    assert f.flush(WAIT)
    assert inner.in_flight() == 1 and len(inner) == 0  # renewed, never expired
    f.finish(lease.token, 1.0)
    assert f.flush(WAIT)
    assert inner.in_flight() == 0
    f.close()


def test_a_failing_call_is_reported_and_the_worker_goes_on(arrived) -> None:
    errors: list[BaseException] = []
    inner = MercatorFrontier(fast_policy())
    f = BufferedFrontier(inner, notify=arrived.set, on_error=errors.append)

    def boom() -> None:
        raise ConnectionError("shared frontier unreachable")

    f._submit(boom)
    f.add(Entry("http://h0.test/after", "h0.test"))
    assert f.flush(WAIT)
    assert [type(e) for e in errors] == [ConnectionError]
    assert wait_for_lease(f, arrived).entry.url == "http://h0.test/after"
    f.close()


def test_an_idle_frontier_has_no_work_however_often_it_is_asked() -> None:
    """The engine asks for a request at every heartbeat: asking must not look like work, or a
    finished crawl never ends."""
    f = BufferedFrontier(MercatorFrontier(fast_policy()))
    for _ in range(5):
        assert f.next() is None
        assert not answered(f, 300)
    f.close()


def test_reports_still_answer_after_close() -> None:
    inner = MercatorFrontier(fast_policy())
    inner.add(Entry("http://h0.test/0", "h0.test"))
    f = BufferedFrontier(inner)
    f.close()
    assert f.counts().queued == 1  # a closing report (the progress line) must not hang


def test_seen_tests_never_wait_and_are_answered_in_order(arrived) -> None:
    """A seen-test asked on the reactor (a page requisite, the crawl database's URLs) is queued
    behind a slow call on the shared frontier, not waited for: answered after it, in order."""
    inner = GatedFrontier(fast_policy())
    f = BufferedFrontier(inner, notify=arrived.set)
    inner.gate.clear()
    f.add_many([Entry("http://h0.test/slow", "h0.test")])  # the worker waits in add_many
    assert inner.entered.wait(WAIT)
    news: list[object] = []
    f.mark_seen_later(["http://h1.test/a", "http://h1.test/b"], news.append)
    css = "http://h2.test/s.css"
    assert f.add_unseen(Entry(css, "h2.test"), css, news.append).reason == PENDING
    f.add_unseen(Entry(css, "h2.test"), css, news.append)  # another page's: seen by then
    assert news == []
    inner.gate.set()
    assert f.flush(WAIT)
    assert news == [2, True, False]
    assert len(inner) == 2  # the slow page and the stylesheet, once
    f.close()


def test_the_shared_frontier_is_opened_by_the_worker_and_retried_while_away(arrived) -> None:
    """``opener``: the caller has a frontier at once; the worker opens the shared one, retrying
    while it is away (one line each way), and what was queued meanwhile goes to it."""
    tries: list[int] = []
    inner = MercatorFrontier(fast_policy())

    def opener() -> MercatorFrontier:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("not there yet")
        return inner

    f = BufferedFrontier(
        opener=opener, lease_ttl=30.0, notify=arrived.set,
        transient=lambda exc: isinstance(exc, ConnectionError), max_backoff=0.05,
    )
    f.add(Entry("http://h0.test/a", "h0.test"))
    assert wait_for_lease(f, arrived).entry.url == "http://h0.test/a"
    assert len(tries) == 3 and not f.refused
    f.close()


def test_a_refusal_at_opening_is_said_and_the_crawl_has_no_work() -> None:
    errors: list[BaseException] = []

    def opener() -> MercatorFrontier:
        raise RuntimeError("crawl 'x' in Redis was stored by another version")

    f = BufferedFrontier(opener=opener, lease_ttl=30.0, on_error=errors.append)
    assert f.flush(WAIT)
    assert "another version" in f.refused and [type(e) for e in errors] == [RuntimeError]
    assert not f.has_work(300)
    f.close()
