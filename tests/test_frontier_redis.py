"""The Redis frontier against a real redis-server: the frontier semantics (driven with a fake
clock), then what only a shared frontier has to show: several handles on one key acting as one
polite frontier, leases that expire and renew, chunked link batches, memory per URL."""

from __future__ import annotations

import ast
import heapq
import itertools
import pathlib
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import msgpack
import pytest
import redis

from crawler.frontier import Entry, Lease, Outcome, PolitenessPolicy
from crawler.frontier.redis import RedisFrontier, seen_key, unpack_entry
from crawler.frontier.store import url_key
from tests.redis_support import FakeClock, RedisServer, fresh_key, redis_server  # noqa: F401


@pytest.fixture
def make(redis_server: RedisServer) -> Callable[..., RedisFrontier]:  # noqa: F811
    """Frontiers on fresh keys, all on one fake clock (``make.clock``)."""
    clock = FakeClock()
    clients: list[redis.Redis] = []

    def factory(
        policy: PolitenessPolicy | None = None, *, key: str | None = None, **kwargs: object
    ) -> RedisFrontier:
        client = redis_server.client()
        clients.append(client)
        kwargs.setdefault("clock", clock)
        return RedisFrontier(client, key or fresh_key(), policy or PolitenessPolicy(), **kwargs)

    factory.clock = clock  # type: ignore[attr-defined]
    yield factory
    for client in clients:
        client.close()


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
    fetches: list[Fetch] = field(default_factory=list)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    end_time: float = 0.0


def simulate(
    frontier: RedisFrontier,
    clock: FakeClock,
    *,
    concurrency: int = 4,
    duration: Callable[[str], float] = lambda url: 0.1,
    outcome: Callable[[str], Outcome] = lambda url: Outcome.FETCHED,
    until: float = 10_000.0,
) -> Simulation:
    """A discrete-event crawl on the fake clock: fetches complete and are acknowledged at
    their end; the clock jumps to the next completion or the frontier's ``due_in``."""
    sim = Simulation()
    running: list[tuple[float, int, Lease]] = []
    in_flight: Counter[str] = Counter()
    seq = itertools.count()
    for _ in range(100_000):
        if clock.now > until:
            break
        while len(running) < concurrency:
            lease = frontier.next()
            if lease is None:
                break
            host = lease.entry.host
            in_flight[host] += 1
            sim.max_in_flight[host] = max(sim.max_in_flight.get(host, 0), in_flight[host])
            end = clock.now + duration(lease.entry.url)
            heapq.heappush(running, (end, next(seq), lease))
            sim.fetches.append(
                Fetch(lease.entry.url, host, lease.slot, clock.now, end, lease.entry.priority)
            )
        due = frontier.due_in()
        candidates = [running[0][0]] if running else []
        if due is not None:
            candidates.append(clock.now + due)
        later = [t for t in candidates if t > clock.now]
        if not candidates:
            break
        clock.now = min(later or candidates)
        while running and running[0][0] <= clock.now:
            end, _, lease = heapq.heappop(running)
            in_flight[lease.entry.host] -= 1
            frontier.finish(lease.token, end - lease.issued_at, outcome(lease.entry.url))
    else:
        raise AssertionError("simulation did not settle")
    sim.end_time = clock.now
    return sim


def entries(hosts: int, per_host: int, priority: Callable[[int, int], int] = lambda h, i: 0):
    return [
        Entry(url=f"http://h{h}.test/{i}", host=f"h{h}.test", priority=priority(h, i))
        for i in range(per_host)
        for h in range(hosts)
    ]


# -- admission -------------------------------------------------------------------------------


def test_a_url_enters_once_unless_forced(make) -> None:
    f = make()
    assert f.add(Entry(url="http://a.test/x", host="a.test")).added
    assert f.add(Entry(url="http://a.test/x", host="a.test")).reason == "seen"
    assert f.add(Entry(url="http://a.test/x", host="a.test"), force=True).added
    assert len(f) == 2


def test_mark_seen(make) -> None:
    f = make(chunk_size=2)
    assert f.mark_seen(["http://a.test/1", "http://a.test/2", "http://a.test/4"]) == 3
    assert f.mark_seen(["http://a.test/2"]) == 0
    assert f.add(Entry(url="http://a.test/1", host="a.test")).reason == "seen"
    assert f.add(Entry(url="http://a.test/3", host="a.test")).added
    assert len(f) == 1 and f.counts().seen == 4


def test_seen_key_is_the_url_key(make) -> None:
    url = "http://a.test/some/page"
    assert seen_key(url) == url_key(url).to_bytes(8, "big", signed=True)


def test_host_budget(make) -> None:
    f = make(max_pages_per_host=3)
    results = f.add_many(entries(1, 5))
    assert [r.added for r in results] == [True, True, True, False, False]
    assert results[-1].reason == "host_budget"
    assert f.add(entries(1, 9)[-1]).reason == "host_budget"  # across calls too


# -- handing out -----------------------------------------------------------------------------


def test_every_url_is_handed_out_exactly_once(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.5), back_queues=3)
    urls = entries(10, 7)
    f.add_many(urls)
    sim = simulate(f, make.clock, concurrency=4)
    assert Counter(x.url for x in sim.fetches) == Counter(e.url for e in urls)
    assert len(f) == 0 and f.in_flight() == 0
    assert not f.has_work(300)
    assert f.counts().back_queues_used == 0


@pytest.mark.parametrize("slots", [1, 3])
def test_no_host_above_its_slots(make, slots: int) -> None:
    f = make(PolitenessPolicy(min_delay=0.2, host_concurrency=slots))
    f.add_many(entries(3, 30))
    sim = simulate(f, make.clock, concurrency=20)
    assert len(sim.fetches) == 90
    assert max(sim.max_in_flight.values()) == slots


def test_no_slot_used_before_its_time(make) -> None:
    policy = PolitenessPolicy(min_delay=1.0, delay_factor=5.0, max_delay=4.0)
    f = make(policy, back_queues=4)
    durations = {0: 0.05, 1: 0.5, 2: 2.0}  # 1 s minimum, 2.5 s, capped at 4 s
    f.add_many(entries(3, 6))
    sim = simulate(f, make.clock, concurrency=8, duration=lambda url: durations[int(url[8])])
    by_slot: dict[tuple[str, int], list[Fetch]] = defaultdict(list)
    for x in sim.fetches:
        by_slot[(x.host, x.slot)].append(x)
    assert len(sim.fetches) == 18
    for fetches in by_slot.values():
        for prev, nxt in itertools.pairwise(fetches):
            wanted = policy.delay(prev.end - prev.start)
            assert nxt.start == pytest.approx(prev.end + wanted)


def test_crawl_delay_is_honoured_even_above_max_delay(make) -> None:
    f = make(PolitenessPolicy(min_delay=1, max_delay=2, max_crawl_delay=10))
    assert f.set_crawl_delay("h0.test", 7)
    f.add_many(entries(1, 3))
    starts = [x.start for x in simulate(f, make.clock).fetches]
    assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx([7.1, 7.1])


def test_host_asking_too_long_a_crawl_delay_is_skipped(make) -> None:
    f = make(PolitenessPolicy(max_crawl_delay=10))
    f.add_many(entries(2, 3))
    assert not f.set_crawl_delay("h1.test", 60)
    sim = simulate(f, make.clock)
    assert {x.host for x in sim.fetches} == {"h0.test"}
    assert f.add(Entry(url="http://h1.test/new", host="h1.test")).reason == "host_skipped"
    assert len(f) == 0 and f.counts().extra == {"host_skipped": 3}


def test_a_held_host_waits_and_keeps_its_urls(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.0, delay_factor=0.0))
    f.add_many(entries(2, 2))
    f.hold_host("h1.test", 50.0)
    sim = simulate(f, make.clock)
    h1 = [x.start for x in sim.fetches if x.host == "h1.test"]
    assert len(sim.fetches) == 4 and min(h1) == 50.0
    assert all(x.start < 50.0 for x in sim.fetches if x.host == "h0.test")


def test_a_hold_placed_during_a_fetch_outlasts_its_completion(make) -> None:
    f = make(PolitenessPolicy(min_delay=1.0))
    f.add_many(entries(1, 2))
    lease = f.next()
    f.hold_host("h0.test", 30.0)
    make.clock.now = 0.5
    f.complete(lease.token, 0.5)
    make.clock.now = 29.0
    assert f.next() is None
    make.clock.now = 30.0
    assert f.next() is not None


def test_not_sent_frees_the_slot_without_a_delay(make) -> None:
    f = make(PolitenessPolicy(min_delay=5))
    f.add_many(entries(1, 3))
    first = f.next()
    assert first is not None and f.next() is None
    make.clock.now = 0.01
    f.complete(first.token, None, Outcome.NOT_SENT)
    second = f.next()
    assert second is not None
    make.clock.now = 1.0
    f.complete(second.token, 1.0, Outcome.FETCHED)
    make.clock.now = 5.9
    assert f.next() is None and f.due_in() == pytest.approx(0.1)
    make.clock.now = 6.0
    assert f.next() is not None


def test_failing_host_is_given_up(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.1, max_failures=3))
    f.add_many(entries(2, 10))
    sim = simulate(
        f, make.clock, outcome=lambda u: Outcome.FAILED if "h1" in u else Outcome.FETCHED
    )
    assert Counter(x.host for x in sim.fetches) == {"h0.test": 10, "h1.test": 3}
    assert len(f) == 0 and not f.has_work(300)
    assert f.add(Entry(url="http://h1.test/late", host="h1.test")).reason == "host_dead"
    assert f.counts().extra == {"host_dead": 7}


def test_a_success_resets_the_failure_count(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.1, max_failures=2))
    f.add_many(entries(1, 6))
    sim = simulate(
        f, make.clock, outcome=lambda u: Outcome.FAILED if int(u[-1]) % 2 else Outcome.FETCHED
    )
    assert len(sim.fetches) == 6


def test_first_request_goes_alone_before_the_hosts_others(make) -> None:
    f = make(PolitenessPolicy(min_delay=1, host_concurrency=3))
    f.add_many(entries(1, 4))
    f.add(Entry(url="http://h0.test/robots.txt", host="h0.test"), first=True)
    lease = f.next()
    assert lease is not None and lease.entry.url.endswith("robots.txt")
    assert f.next() is None  # the others wait for it, even with free slots
    make.clock.now = 0.5
    f.finish(lease.token, 0.5)
    make.clock.now = 0.6
    assert f.next() is not None  # another slot, due at once
    assert len(simulate(f, make.clock, concurrency=5, until=100).fetches) == 3


def test_higher_priorities_first_yet_low_priorities_progress(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.0), front_queues=4, back_queues=2)
    f.add_many(
        [
            Entry(url=f"http://h{i}.test/p{p}", host=f"h{i}.test", priority=p)
            for i in range(200)
            for p in (3, 0)
        ]
    )
    order = [x.priority for x in simulate(f, make.clock, concurrency=1).fetches]
    assert len(order) == 400
    assert order[:200].count(0) > order[:200].count(3) * 2  # mostly high priority first
    assert 3 in order[:50]  # yet the low queue is not starved


def test_due_in_has_work_and_reports(make) -> None:
    f = make(PolitenessPolicy(min_delay=50, max_delay=50))
    assert f.due_in() is None and not f.has_work(300)
    f.add_many(entries(1, 2))
    assert f.due_in() == 0.0
    lease = f.next()
    assert lease is not None
    make.clock.now = 1.0
    assert f.has_work(10)  # a lease is open
    f.finish(lease.token, 0.1)
    make.clock.now = 2.0
    assert f.due_in() == pytest.approx(49.0)
    assert f.has_work(60) and not f.has_work(10)
    [report] = f.waiting_hosts()
    assert (report.host, report.queued, report.reason) == ("h0.test", 1, "politeness delay")
    assert report.due_in == pytest.approx(49.0)
    assert f.busiest_hosts() == [("h0.test", 1, 0.0)]
    c = f.counts()
    assert (c.queued, c.in_flight, c.seen, c.hosts, c.hosts_waiting) == (1, 0, 2, 1, 1)


def test_unknown_lease_tokens_are_ignored(make) -> None:
    f = make()
    f.add_many(entries(1, 1))
    lease = f.next()
    f.complete("no-such-token", 0.1)
    f.ack("no-such-token")
    assert f.in_flight() == 1
    f.complete(lease.token, 0.1)
    f.complete(lease.token, 0.1)  # twice: no harm
    assert f.in_flight() == 1  # completed, not acknowledged
    f.ack(lease.token)
    f.ack(lease.token)
    assert f.in_flight() == 0 and f.renew([lease.token]) == 0


# -- leases ----------------------------------------------------------------------------------


def test_an_expired_lease_puts_its_url_back_at_the_head(make) -> None:
    f = make(PolitenessPolicy(min_delay=2.0), lease_ttl=60)
    f.add_many(entries(1, 3))
    lease = f.next()
    assert lease is not None and lease.entry.url == "http://h0.test/0"
    make.clock.now = 59.0
    assert f.expire() == 0 and f.in_flight() == 1
    make.clock.now = 60.0
    assert f.expire() == 1 and f.in_flight() == 0 and len(f) == 3
    # the fetch may have happened: the slot rests for the politeness delay
    assert f.next() is None and f.due_in() == pytest.approx(2.0)
    make.clock.now = 62.0
    again = f.next()
    assert again is not None and again.entry.url == lease.entry.url
    assert again.token != lease.token
    f.ack(lease.token)  # the old holder comes back too late: nothing happens
    assert f.in_flight() == 1


def test_next_expires_leases_itself(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.0), lease_ttl=10)
    f.add_many(entries(1, 1))
    lost = f.next()
    make.clock.now = 11.0
    again = f.next()  # no explicit expire(): a dead worker's URL comes back anyway
    assert again is not None and again.entry.url == lost.entry.url


def test_a_completed_lease_expires_without_resting_the_slot_again(make) -> None:
    f = make(PolitenessPolicy(min_delay=1.0), lease_ttl=10)
    f.add_many(entries(1, 2))
    lease = f.next()
    f.complete(lease.token, 0.1)  # the fetch ended at 0, the page was never acknowledged
    make.clock.now = 10.0
    assert f.expire() == 1 and len(f) == 2
    assert f.next().entry.url == lease.entry.url  # due since 1.0, not rested again


def test_renew_pushes_the_deadline(make) -> None:
    f = make(lease_ttl=10)
    f.add_many(entries(2, 1))
    a, b = f.next_many(2)
    make.clock.now = 8.0
    assert f.renew([a.token, "unknown"]) == 1
    make.clock.now = 12.0
    assert f.expire() == 1  # b only
    assert f.in_flight() == 1 and len(f) == 1
    make.clock.now = 13.0  # after the politeness delay: the fetch may have happened
    assert f.next().entry.url == b.entry.url
    make.clock.now = 18.0
    assert f.expire() == 1  # a, renewed at 8 until 18


def test_release_hands_back_without_moving_the_slot_time(make) -> None:
    f = make(PolitenessPolicy(min_delay=5.0))
    f.add_many(entries(1, 3))
    lease = f.next()
    assert f.release([lease.token, "unknown"]) == 1
    assert f.in_flight() == 0 and len(f) == 3
    again = f.next()  # at once: the slot's time did not move
    assert again is not None and again.entry.url == lease.entry.url
    assert f.release([lease.token]) == 0


def test_a_released_first_entry_still_goes_first(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.0, host_concurrency=2))
    f.add_many(entries(1, 2))
    f.add(Entry(url="http://h0.test/robots.txt", host="h0.test"), first=True)
    lease = f.next()
    assert lease.entry.url.endswith("robots.txt")
    f.release([lease.token])
    assert f.next().entry.url.endswith("robots.txt") and f.next() is None


def test_entries_round_trip_as_msgpack_never_pickle(make) -> None:
    f = make()
    payload = b"\x80\x04\x95 not a pickle, just bytes \x00\xff"
    f.add(Entry(url="http://a.test/p", host="a.test", priority=3, depth=4, payload=payload))
    lease = f.next()
    assert lease.entry == Entry(url="http://a.test/p", host="a.test", priority=3, depth=4,
                                payload=payload)  # fmt: skip
    raw = f.client.hget(f.prefix + ":lease", lease.token)
    record = msgpack.unpackb(raw, raw=True)
    assert unpack_entry(record[4]) == lease.entry
    with pytest.raises(TypeError):
        f.add(Entry(url="http://a.test/q", host="a.test", payload=object()))
    root = pathlib.Path(__file__).resolve().parent.parent / "crawler" / "frontier"
    for name in ("redis.py", "redis_lua.py"):
        tree = ast.parse((root / name).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names}  # fmt: skip
        imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and n.module}  # fmt: skip
        assert not imported & {"pickle", "cPickle", "dill", "marshal", "shelve"}


# -- several handles on one key -----------------------------------------------------------------


def test_two_handles_are_one_frontier(make) -> None:
    key = fresh_key()
    a = make(PolitenessPolicy(min_delay=1.0), key=key)
    b = make(PolitenessPolicy(min_delay=1.0), key=key)
    a.add_many(entries(1, 3))
    assert b.add(Entry(url="http://h0.test/0", host="h0.test")).reason == "seen"
    lease = b.next()
    assert lease is not None and a.next() is None  # the host is busy for both
    make.clock.now = 0.5
    a.finish(lease.token, 0.1)  # a worker may finish another's lease (after a handover)
    make.clock.now = 1.4
    assert b.next() is None and a.due_in() == pytest.approx(0.1)
    make.clock.now = 1.5
    assert a.next() is not None and len(b) == 1


def test_tokens_are_unique_across_handles(make) -> None:
    key = fresh_key()
    handles = [make(PolitenessPolicy(min_delay=0.0, host_concurrency=4), key=key)
               for _ in range(3)]  # fmt: skip
    handles[0].add_many(entries(20, 10))
    tokens = []
    for _ in range(10):
        for h in handles:
            leases = h.next_many(7)
            tokens += [x.token for x in leases]
            for x in leases:
                h.finish(x.token, 0.0)
    assert len(tokens) == 200 and len(set(tokens)) == 200


def test_racing_workers_keep_concurrency_and_delay(redis_server: RedisServer) -> None:  # noqa: F811
    """Two workers (threads, each with its own connection) hammer one host on Redis's real
    clock. Each worker counts a fetch as running from after ``next`` returns to before
    ``complete`` is sent, a window inside the frontier's own: if they ever saw more than the
    host's slots at once, the frontier handed out too many."""
    key = fresh_key()
    policy = PolitenessPolicy(min_delay=0.05, delay_factor=0.0, host_concurrency=2)
    setup = RedisFrontier(redis_server.client(), key, policy)
    setup.add_many(entries(1, 24))
    lock = threading.Lock()
    running = 0
    peak = 0
    log: list[tuple[int, float, float]] = []  # (slot, issued_at, time before complete)
    errors: list[BaseException] = []

    def worker() -> None:
        nonlocal running, peak
        client = redis_server.client()
        f = RedisFrontier(client, key, policy)
        try:
            while f.has_work(5.0):
                lease = f.next()
                if lease is None:
                    continue
                with lock:
                    running += 1
                    peak = max(peak, running)
                sec, usec = client.time()
                with lock:
                    running -= 1
                log.append((lease.slot, lease.issued_at, sec + usec / 1e6))
                f.finish(lease.token, None)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(log) == 24 and 1 <= peak <= 2
    by_slot: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for slot, issued, ended in sorted(log, key=lambda r: r[1]):
        by_slot[slot].append((issued, ended))
    assert set(by_slot) <= {0, 1}
    for fetches in by_slot.values():
        for (_, ended), (issued, _) in itertools.pairwise(fetches):
            assert issued >= ended + 0.05 - 1e-6


# -- Redis specifics ---------------------------------------------------------------------------


def _evalsha_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_big_batch_goes_in_chunks(make) -> None:
    f = make(chunk_size=1000)
    f.add(Entry(url="http://warm.test/", host="warm.test"))  # scripts loaded
    before = _evalsha_calls(f.client)
    links = [Entry(url=f"http://h{i % 50}.test/page/{i}", host=f"h{i % 50}.test")
             for i in range(5000)]  # fmt: skip
    links[4000] = Entry(url="http://warm.test/", host="warm.test")
    results = f.add_many(links)
    assert _evalsha_calls(f.client) - before == 5
    assert len(results) == 5000 and sum(r.added for r in results) == 4999
    assert results[4000].reason == "seen"
    assert len(f) == 5000


def test_memory_per_queued_and_per_seen_url(make) -> None:
    """Printed for the record; the bounds are loose sanity checks, several times the target
    (~100-120 B per queued URL of 50 characters, ~64-70 B per seen URL)."""
    f = make(back_queues=64)
    client = f.client
    n = 20_000
    base = client.info("memory")["used_memory"]
    f.add_many(
        [Entry(url=f"https://www.host{i % 500:03d}.example/articles/{i:08d}.html",
               host=f"www.host{i % 500:03d}.example") for i in range(n)]
    )  # fmt: skip
    assert len(f) == n and len(f"https://www.host000.example/articles/{0:08d}.html") == 50
    after_add = client.info("memory")["used_memory"]
    seen_bytes = client.memory_usage(f.prefix + ":seen", samples=0)
    per_seen = seen_bytes / n
    per_queued = (after_add - base - seen_bytes) / n
    print(f"\nRedis frontier: {per_queued:.0f} B per queued URL (incl. hosts), "
          f"{per_seen:.0f} B per seen URL")  # fmt: skip
    assert 40 < per_queued < 400
    assert 8 < per_seen < 200


def test_reset_close_and_compatibility(make, redis_server: RedisServer) -> None:  # noqa: F811
    key = fresh_key()
    f = make(key=key)
    other = make()
    f.add_many(entries(3, 3))
    other.add_many(entries(1, 1))
    f.close()
    assert len(make(key=key)) == 9  # close() keeps the shared state
    assert f.check_compatible({"scope": "a.test"}) == []
    assert make(key=key).check_compatible({"scope": "a.test"}) == []
    strict = make(PolitenessPolicy(min_delay=9.0), key=key)
    problems = strict.check_compatible({"scope": "b.test"})
    assert len(problems) == 2 and any(p.startswith("min_delay") for p in problems)
    assert f.reset() > 5
    assert not [k for k in f.client.scan_iter(match="*" + key + "*")]
    assert len(other) == 1  # another crawl's keys are untouched


def test_an_unknown_layout_is_refused(make) -> None:
    f = make()
    f.client.hset(f.prefix + ":meta", "layout", "99")
    with pytest.raises(RuntimeError, match="layout 99"):
        make(key=f.key)
    with pytest.raises(ValueError):
        make(key="a{b}")
    client = redis.Redis(port=f.client.connection_pool.connection_kwargs["port"],
                         decode_responses=True)  # fmt: skip
    with pytest.raises(ValueError, match="bytes"):
        RedisFrontier(client, fresh_key(), PolitenessPolicy())
    client.close()
