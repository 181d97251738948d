"""The Redis frontier against a real redis-server: the shared frontier contract (on a fake
clock), then what only a shared frontier has to show: several handles on one key acting as one
polite frontier, leases that expire and renew, chunked link batches, memory per URL."""

from __future__ import annotations

import ast
import itertools
import pathlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pytest
import redis

from crawler.backends.redis.addresses import RedisAddressBudget
from crawler.backends.redis.frontier import RedisFrontier, unpack_entry
from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.seen import seen_key, seen_memory
from crawler.frontier import Entry, Outcome, PolitenessPolicy
from crawler.frontier.addresses import AddressBudget, AddressPolicy
from crawler.frontier.store import url_key
from tests.frontier_contract import FakeClock, FrontierContract, entries, simulate
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


class TestRedisFrontierContract(FrontierContract):
    """The shared contract, each test on a fresh key of the module's server."""

    frontier_options: dict[str, Any] = {}

    @pytest.fixture(autouse=True)
    def _server(self, redis_server: RedisServer) -> Iterator[None]:  # noqa: F811
        self.server = redis_server
        self.clients: list[redis.Redis] = []
        yield
        for client in self.clients:
            client.close()

    def make_frontier(
        self, policy: PolitenessPolicy | None = None, *, clock: FakeClock, **kwargs: Any
    ) -> RedisFrontier:
        client = self.server.client()
        self.clients.append(client)
        return RedisFrontier(
            client, fresh_key(), policy or PolitenessPolicy(), clock=clock,
            **self.frontier_options, **kwargs,
        )

    def make_address_budget(self, policy: AddressPolicy, clock: FakeClock) -> AddressBudget:
        """The fleet's budgets, in Redis, on the test's clock."""
        client = self.server.client()
        self.clients.append(client)
        return RedisAddressBudget(client, CrawlKeys(fresh_key(), "web", 1), policy, clock)

    def reopened(self, frontier: Any, clock: FakeClock, **kwargs: Any) -> RedisFrontier:
        """Another worker's handle on the same crawl (what it finds is what the first left)."""
        client = self.server.client()
        self.clients.append(client)
        return RedisFrontier(
            client, frontier.key, frontier.policy, clock=clock,
            **self.frontier_options, **kwargs,
        )


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


# -- admission -------------------------------------------------------------------------------


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


def test_host_asking_too_long_a_crawl_delay_is_skipped(make) -> None:
    f = make(PolitenessPolicy(max_crawl_delay=10))
    f.add_many(entries(2, 3))
    assert not f.set_crawl_delay("h1.test", 60)
    sim = simulate(f, make.clock)
    assert {x.host for x in sim.fetches} == {"h0.test"}
    assert f.add(Entry(url="http://h1.test/new", host="h1.test")).reason == "host_skipped"
    assert len(f) == 0 and f.counts().extra == {"host_skipped": 3}


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


def test_next_expires_leases_itself(make) -> None:
    f = make(PolitenessPolicy(min_delay=0.0), lease_ttl=10)
    f.add_many(entries(1, 1))
    lost = f.next()
    make.clock.now = 11.0
    again = f.next()  # no explicit expire(): a dead worker's URL comes back anyway
    assert again is not None and again.entry.url == lost.entry.url


def test_release_hands_back_without_moving_the_slot_time(make) -> None:
    f = make(PolitenessPolicy(min_delay=5.0))
    f.add_many(entries(1, 3))
    lease = f.next()
    assert f.release([lease.token, "unknown"]) == 1
    assert f.in_flight() == 0 and len(f) == 3
    again = f.next()  # at once: the slot's time did not move
    assert again is not None and again.entry.url == lease.entry.url
    assert f.release([lease.token]) == 0


def test_entries_round_trip_as_msgpack_never_pickle(make) -> None:
    f = make()
    payload = b"\x80\x04\x95 not a pickle, just bytes \x00\xff"
    f.add(Entry(url="http://a.test/p", host="a.test", priority=3, depth=4, payload=payload))
    lease = f.next()
    assert lease.entry == Entry(url="http://a.test/p", host="a.test", priority=3, depth=4,
                                payload=payload)
    raw = f.client.hget(f.prefix + ":lease", lease.token)
    record = msgpack.unpackb(raw, raw=True)
    assert unpack_entry(record[4], "a.test") == lease.entry
    with pytest.raises(TypeError):
        f.add(Entry(url="http://a.test/q", host="a.test", payload=object()))
    root = pathlib.Path(__file__).resolve().parent.parent / "crawler" / "backends" / "redis"
    for path in sorted(root.glob("*.py")):  # the frontier and every module beside it
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and n.module}
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


def test_a_dead_workers_lease_comes_back_to_another(make) -> None:
    key = fresh_key()
    dead = make(PolitenessPolicy(min_delay=1.0), key=key, lease_ttl=30)
    alive = make(PolitenessPolicy(min_delay=1.0), key=key, lease_ttl=30)
    dead.add_many(entries(1, 2))
    lost = dead.next()  # and the worker is killed
    make.clock.now = 29.0
    assert alive.next() is None and alive.has_work(0)
    make.clock.now = 30.0
    assert alive.next() is None  # expired now, but the slot rests: the fetch may have happened
    make.clock.now = 31.0
    again = alive.next()
    assert again is not None and again.entry.url == lost.entry.url


def test_waiting_hosts_reads_the_host_table_in_batches(make) -> None:
    f = make(PolitenessPolicy(min_delay=10.0), back_queues=4)
    f.add_many(entries(1200, 1))
    f.due_in()  # URLs are routed to back queues when work is handed out or asked about
    f.hold_host("h1.test", 100.0)
    reports = f.waiting_hosts()
    assert len(reports) == 1200 - 3  # B = 4 hosts hold a back queue; three of them are due now
    assert reports[0].host == "h1.test" and reports[0].due_in == pytest.approx(100.0)
    assert Counter(r.reason for r in reports) == {
        "waiting for a back queue": 1196,
        "politeness delay": 1,
    }


def test_tokens_are_unique_across_handles(make) -> None:
    key = fresh_key()
    handles = [make(PolitenessPolicy(min_delay=0.0, host_concurrency=4), key=key)
               for _ in range(3)]
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
             for i in range(5000)]
    links[4000] = Entry(url="http://warm.test/", host="warm.test")
    results = f.add_many(links)
    assert _evalsha_calls(f.client) - before == 5
    assert len(results) == 5000 and sum(r.added for r in results) == 4999
    assert results[4000].reason == "seen"
    assert len(f) == 5000


def test_finish_is_one_script_call(make) -> None:
    f = make(PolitenessPolicy(min_delay=1.0))
    f.add_many(entries(1, 2))
    lease = f.next()
    before = _evalsha_calls(f.client)
    f.finish(lease.token, 0.1)
    assert _evalsha_calls(f.client) - before == 1
    assert f.in_flight() == 0 and f.due_in() == pytest.approx(1.0)


def test_memory_per_queued_and_per_seen_url(make) -> None:
    """Printed for the record; the bounds are loose sanity checks, several times the target
    (~40 B per queued URL of 50 characters with the compact entries, ~5-10 B per seen URL in
    the bucketed exact set; at 20,000 URLs the buckets are still sparse)."""
    f = make(back_queues=64)
    client = f.client
    n = 20_000
    base = client.info("memory")["used_memory"]
    f.add_many(
        [Entry(url=f"https://www.host{i % 500:03d}.example/articles/{i:08d}.html",
               host=f"www.host{i % 500:03d}.example") for i in range(n)]
    )
    assert len(f) == n and len(f"https://www.host000.example/articles/{0:08d}.html") == 50
    after_add = client.info("memory")["used_memory"]
    seen_bytes = seen_memory(client, f.keys)
    per_seen = seen_bytes / n
    per_queued = (after_add - base - seen_bytes) / n
    print(f"\nRedis frontier: {per_queued:.0f} B per queued URL (incl. hosts), "
          f"{per_seen:.0f} B per seen URL")
    assert 10 < per_queued < 400
    assert 2 < per_seen < 200


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
                         decode_responses=True)
    with pytest.raises(ValueError, match="bytes"):
        RedisFrontier(client, fresh_key(), PolitenessPolicy())
    client.close()


def test_robots_fetch_state_is_one_for_all_workers(redis_server: RedisServer) -> None:  # noqa: F811
    """Two workers' robots books on one Redis: one claim at a time, a failure holds the origin
    for both until its retry is due, a record read ends it all, and the failure count goes
    on across workers (the retry delay doubles whoever retries)."""
    from crawler.backends.redis.robots import RedisRobotsCache
    from crawler.robots.book import ELSEWHERE, RobotsBook, Verdict

    key, origin = fresh_key(), "http://a.test"
    a_client, b_client = redis_server.client(), redis_server.client()
    a = RobotsBook(RedisRobotsCache(a_client, key), "bot", retry_delay=0.3, retry_times=2)
    b = RobotsBook(RedisRobotsCache(b_client, key), "bot", retry_delay=0.3, retry_times=2)
    assert a.start_fetch(origin, now=0.0)
    assert not b.start_fetch(origin, now=0.0)  # a holds the claim
    assert b.state(origin).fetching == ELSEWHERE and b.verdict(origin, "/x") is Verdict.WAIT
    assert a.failed(origin, 0.0) == pytest.approx(0.3)
    st = b.sync(origin, 0.0)
    assert st.unreachable and st.fetching == "" and 0.2 < st.retry_at <= 0.3
    assert b.verdict(origin, origin + "/x") is Verdict.UNAVAILABLE
    assert not b.start_fetch(origin, now=0.0)  # the retry is not due yet, for anyone
    threading.Event().wait(0.35)
    assert b.start_fetch(origin, now=1.0)  # due: b retries, and knows it is the second try
    assert b.failed(origin, 1.0) == pytest.approx(0.6)
    assert a.sync(origin, 1.0).failures == 2
    threading.Event().wait(0.65)
    assert a.start_fetch(origin, now=2.0)
    assert a.fetched(origin, 200, b"User-agent: *\nDisallow: /no\n", 2.0) is not None
    st = b.sync(origin, 2.0)
    assert st.rules is not None and not st.unreachable
    assert b.verdict(origin, origin + "/no") is Verdict.DENY
    assert a_client.hlen("{" + key + "}:robots_state") == 0  # nothing left to hold anyone
    # a claim whose fetch is abandoned (refused) is handed back, not left to lapse
    assert a.start_fetch("http://c.test", now=3.0)
    a.refused("http://c.test")
    assert b.start_fetch("http://c.test", now=3.0)
    for client in (a_client, b_client):
        client.close()


def _script_calls(client: redis.Redis) -> int:
    """Script calls the server has run (every frontier operation is one)."""
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def test_an_idle_worker_is_woken_by_redis_not_by_polling(redis_server: RedisServer) -> None:  # noqa: F811
    """An idle worker makes a script call only every FRONTIER_REFRESH_INTERVAL (the fallback),
    yet takes a URL another worker pushed within a fraction of a second (pub/sub), and one
    whose host is held as soon as the hold ends (it sleeps until the earliest host is due)."""
    from crawler.frontier.buffered import BufferedFrontier

    key, policy = fresh_key(), PolitenessPolicy(min_delay=0.0, delay_factor=0.0, max_delay=0.0)
    clients = [redis_server.client() for _ in range(3)]
    other = RedisFrontier(clients[0], key, policy)
    idle = BufferedFrontier(RedisFrontier(clients[1], key, policy))  # the shipped fallback
    assert idle.next() is None  # the engine asked, got nothing, and waits to be told
    threading.Event().wait(0.5)
    before = _script_calls(clients[2])
    threading.Event().wait(4.0)
    idle_calls = _script_calls(clients[2]) - before
    assert idle_calls <= 3, idle_calls  # ~2: once per 2 s, none in between
    idle.close()

    arrived = threading.Event()
    woken = BufferedFrontier(RedisFrontier(clients[1], key, policy), refresh=60.0,
                             notify=arrived.set)
    assert woken.next() is None
    threading.Event().wait(0.3)
    other.add(Entry("http://pushed.test/1", "pushed.test"))
    # told by Redis: the only other way it could learn is the 60 s fallback, so any wait far
    # below that (slack for a loaded machine) shows the notification
    assert arrived.wait(20.0)
    lease = woken.next()
    assert lease is not None and lease.entry.url == "http://pushed.test/1"
    woken.finish(lease.token, 0.01)
    assert woken.next() is None
    arrived.clear()
    other.hold_host("held.test", 1.5)
    other.add(Entry("http://held.test/1", "held.test"))
    started = time.monotonic()
    assert arrived.wait(20.0)
    waited = time.monotonic() - started
    assert waited > 1.3, waited  # due at 1.5 s: not earlier; and well before the 60 s fallback
    woken.close()
    for client in clients:
        client.close()


def test_leases_the_engine_does_not_take_go_back_for_other_workers(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Read-ahead must not hoard host slots: leases left in a busy worker's buffer for
    FRONTIER_LEASE_MAX_WAIT are handed back (slot time unchanged), and its read-ahead shrinks,
    so an idle worker gets the host."""
    from crawler.frontier.buffered import BufferedFrontier

    key = fresh_key()
    policy = PolitenessPolicy(min_delay=0.0, delay_factor=0.0, max_delay=0.0, host_concurrency=2)
    clients = [redis_server.client() for _ in range(2)]
    other = RedisFrontier(clients[0], key, policy)
    other.add_many([Entry(f"http://last.test/{i}", "last.test") for i in range(4)])
    arrived = threading.Event()
    busy = BufferedFrontier(RedisFrontier(clients[1], key, policy), read_ahead=8,
                            max_wait=0.2, notify=arrived.set)
    assert busy.next() is None  # asked once, then the engine is busy and asks no more
    assert arrived.wait(5.0)
    assert len(busy._buffer) == 2  # both slots of the host, read ahead
    assert other.next_many(2) == []  # ... so the other worker gets nothing for now
    deadline = time.monotonic() + 5.0
    got: list[Any] = []
    while len(got) < 2 and time.monotonic() < deadline:
        got += other.next_many(2 - len(got))
        threading.Event().wait(0.05)
    assert len(got) == 2 and busy.returned == 2 and not busy._buffer
    assert busy._target == 2  # doubled to 4 by the miss, halved by the hand-back
    busy.close()
    for client in clients:
        client.close()
