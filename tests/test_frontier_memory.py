"""The in-memory frontier: the shared contract, plus checks of its Mercator structure."""

from __future__ import annotations

from collections import Counter

from crawler.frontier import (
    BiasedSelector,
    Entry,
    MercatorFrontier,
    PolitenessPolicy,
    Prioritizer,
)
from tests.frontier_contract import FakeClock, FrontierContract, entries, simulate


class TestMemoryFrontierContract(FrontierContract):
    def make_frontier(self, policy=None, *, clock, **kwargs):
        return MercatorFrontier(policy or PolitenessPolicy(), clock=clock, **kwargs)


def test_each_back_queue_holds_one_host_and_stays_non_empty():
    clock = FakeClock()
    f = MercatorFrontier(
        PolitenessPolicy(min_delay=0.3), clock=clock, back_queues=4, refill_batch=1000
    )
    f.add_many(entries(12, 8))
    checks = 0

    def discover(url: str) -> list[Entry]:
        nonlocal checks
        back = f.back_queues()
        for host, queue in f.store._back.items():
            assert {e.host for e in queue} == {host}, "a back queue mixes hosts"
        # every back queue in use is non-empty, and all B are in use while the front queues
        # still hold URLs
        assert all(back.values())
        if sum(f.store.front_sizes):
            assert len(back) == 4
        checks += 1
        return []

    sim = simulate(f, clock, concurrency=3, discover=discover)
    assert len(sim.fetches) == 96 and checks == 96


def test_more_hosts_than_back_queues():
    clock = FakeClock()
    f = MercatorFrontier(PolitenessPolicy(min_delay=0.5), clock=clock, back_queues=2)
    f.add_many(entries(25, 4))
    sim = simulate(f, clock, concurrency=6)
    assert Counter(x.host for x in sim.fetches) == {f"h{h}.test": 4 for h in range(25)}
    assert f.counts().back_queues_used == 0


def test_urls_wait_in_front_queues_when_no_back_queue_is_free():
    f = MercatorFrontier(clock=FakeClock(), back_queues=2)
    f.add_many(entries(5, 2))
    assert f.counts().back_queues_used == 0  # routed when URLs are handed out, by priority
    f.due_in()
    assert f.counts().back_queues_used == 2
    assert f.counts().front_queued == 8  # h0 and h1 each got a back queue and one URL


def test_back_queues_resized_take_effect_without_taking_any_back():
    """A worker's B shared anew over its partitions: more back queues route more hosts at
    once; fewer take none back, and no host is routed until the count is under."""
    clock = FakeClock()
    f = MercatorFrontier(clock=clock, back_queues=2)
    f.add_many(entries(6, 3))
    f.due_in()
    assert f.counts().back_queues_used == 2
    f.resize_back(4)
    f.due_in()
    assert f.counts().back_queues_used == 4
    f.resize_back(1)
    f.due_in()
    assert f.counts().back_queues_used == 4  # none taken back from a host holding one
    used: list[int] = []

    def discover(url: str) -> list[Entry]:
        used.append(f.counts().back_queues_used)
        return []

    sim = simulate(f, clock, concurrency=4, discover=discover)
    assert len(sim.fetches) == 18
    under = used.index(1)  # once drained to the one allowed, it stays there
    assert max(used[under:]) == 1


def test_refill_does_bounded_work_per_call():
    f = MercatorFrontier(clock=FakeClock(), back_queues=1, refill_batch=10)
    f.add_many([Entry(url=f"http://a.test/{i}", host="a.test") for i in range(100)])
    f.add(Entry(url="http://b.test/", host="b.test"))
    # The one back queue went to a.test; its URLs move 10 per call, never all 100 at once.
    before = f.counts().front_queued
    lease = f.next()
    assert lease is not None
    assert before - f.counts().front_queued <= 10


def test_politeness_state_outlives_the_back_queue():
    clock = FakeClock()
    f = MercatorFrontier(
        PolitenessPolicy(min_delay=10, max_delay=10), clock=clock, back_queues=1
    )
    f.add(Entry(url="http://a.test/1", host="a.test"))
    lease = f.next()
    assert lease is not None and f.counts().back_queues_used == 0  # ran dry, released
    clock.now = 1.0
    f.finish(lease.token, 0.1)
    f.add(Entry(url="http://a.test/2", host="a.test"))  # gets a back queue again
    clock.now = 5.0
    assert f.next() is None
    assert f.due_in() == 6.0


def test_expiry_is_checked_only_when_the_earliest_deadline_is_due():
    """Expiry costs nothing per call while no lease is overdue, and every overdue lease comes
    back in one pass, whichever call notices it."""
    clock = FakeClock()
    f = MercatorFrontier(PolitenessPolicy(min_delay=0), clock=clock, lease_ttl=10)
    f.add_many(entries(50, 1))
    leases = f.next_many(50)
    assert len(leases) == 50 and len(f._leases._deadlines) == 50
    clock.now = 5.0
    f.renew(lease.token for lease in leases[:10])
    clock.now = 10.0
    assert f.has_work(0) and f.in_flight() == 10 and len(f) == 40  # has_work expired 40
    assert f.counts().extra["leases_expired"] == 40
    for _ in range(100):  # renewing again and again leaves no unbounded trail of deadlines
        f.renew(lease.token for lease in leases[:10])
    assert len(f._leases._deadlines) <= 2 * 10 + 64


def test_selector_is_biased_but_fair():
    sel = BiasedSelector(3)  # weights 3, 2, 1
    picks = Counter(sel.pick([1, 1, 1]) for _ in range(600))
    assert picks == {0: 300, 1: 200, 2: 100}
    assert {sel.pick([0, 0, 5]) for _ in range(5)} == {2}


def test_prioritizer_policies():
    depth = Prioritizer("depth", 4)
    assert [depth.priority(depth=d, host="h") for d in range(6)] == [0, 1, 2, 3, 3, 3]
    assert depth.priority(depth=3, host="h", request_priority=2) == 1  # recrawl boost
    assert depth.priority(depth=3, host="h", request_priority=-2) == 3
    assert Prioritizer("fifo", 4).priority(depth=5, host="h") == 0
    req = Prioritizer("request", 4)
    assert req.priority(depth=0, host="h", request_priority=10) == 0
    assert req.priority(depth=0, host="h", request_priority=-10) == 3
    penalized = Prioritizer("depth", 4)
    penalized.set_penalty("dup", 2)
    assert penalized.priority(depth=0, host="dup") == 2
    assert penalized.priority(depth=0, host="other") == 0
    penalized.set_penalty("dup", 0)  # the host's pages are no longer mostly duplicates
    assert penalized.priority(depth=0, host="dup") == 0 and not penalized.penalties


def test_a_urls_seen_key_is_the_same_in_every_version():
    """``url_key`` is stored (every seen-set, Redis's and SQLite's): the same URL must give
    the same key in every version of the code, whatever makes it faster (the 8 bytes of
    blake2b, read as a signed big-endian integer)."""
    from hashlib import blake2b

    from crawler.frontier.store import url_key

    assert url_key("https://example.com/") == 1493557592560457051
    for url in ("http://a.test/p?q=1", "https://\u00e9.test/\u00e9", ""):
        digest = blake2b(url.encode(), digest_size=8).digest()
        assert url_key(url) == int.from_bytes(digest, "big", signed=True)
