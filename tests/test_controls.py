"""The operator's controls on the partition-owned frontier, against a real redis-server (two
frontiers on one crawl act as two workers, each owning its share of the partitions): a block
drops the host's queued URLs at its owner, which says how many, and no worker admits, mails or
hands out a URL of it again, after a restart too; a domain block takes the hosts met later;
pause holds every worker and resume releases them; a deadline on Redis's clock and a byte
budget every worker spends halt the crawl; a buffered worker hears an act on the wake channel
and hands its read-ahead back. The status report reads the partitions and the heartbeats. No
script runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from crawler.backends.redis.controls import CrawlControls, redis_time
from crawler.backends.redis.partitioned import PartitionedFrontier
from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy
from crawler.frontier.buffered import BufferedFrontier
from tests.frontier_contract import FakeClock
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned

FAST = PolitenessPolicy(min_delay=0, delay_factor=0, max_delay=1)


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    c = redis_server.client()
    yield c
    c.close()


def urls(host: str, n: int) -> list[Entry]:
    return [Entry(f"http://{host}/p{i}", host) for i in range(n)]


def hosts_of(leases: list[Any]) -> set[str]:
    return {lease.entry.host for lease in leases}


def two_workers(
    client: redis.Redis, key: str, clock: FakeClock, count: int = 4
) -> tuple[PartitionedFrontier, PartitionedFrontier]:
    a = partitioned(client, key, clock, count=count, worker="a", policy=FAST)
    b = partitioned(client, key, clock, count=count, worker="b", policy=FAST)
    for _ in range(3):  # a hands partitions over to b at its beats
        a.beat()
        b.beat()
    assert len(a.parts) == len(b.parts) == count // 2
    return a, b


def owner_of(host: str, *workers: PartitionedFrontier) -> PartitionedFrontier:
    return next(w for w in workers if w.shard(host) in w.parts)


def test_a_blocked_host_is_dropped_by_its_owner_and_refused_by_every_worker(
    client: redis.Redis,
) -> None:
    key, clock = fresh_key(), FakeClock()
    a, b = two_workers(client, key, clock)
    bad = "bad.example"
    owner = owner_of(bad, a, b)
    other = b if owner is a else a
    other.add_many(urls(bad, 5) + urls("good.example", 3))  # mailed to the owner
    owner.read_mail()
    lease = owner.next()  # one URL of it in flight when the block lands
    while lease is not None and lease.entry.host != bad:
        lease = owner.next()
    assert lease is not None
    operator = CrawlControls(client, key)
    # the owner obeys at its next beat (here: as soon as the operator has written the block)
    threading.Timer(0.2, owner.beat).start()
    assert operator.block(bad) == 4  # its queued URLs, said by its owner
    assert operator.controls()["blocked_hosts"] == [bad]
    other.beat()
    assert owner.counts().extra["host_blocked"] == 4
    # no worker admits it, nor mails it to its owner
    assert other.add(Entry(f"http://{bad}/new", bad)).reason == "host_blocked"
    assert owner.add_many([Entry(f"http://{bad}/x", bad)])[0].reason == "host_blocked"
    assert client.xlen(owner.keys(owner.shard(bad)).inbox) == 0
    got = hosts_of(owner.next_many(20) + other.next_many(20))
    assert bad not in got
    # the lease in flight when it was blocked goes nowhere when it comes back
    owner.release([lease.token])
    assert bad not in hosts_of(owner.next_many(20))
    # a restarted owner obeys the block too (blocks are not in the partitions' state)
    owner.close()
    heir = partitioned(client, key, clock, count=4, worker="heir", policy=FAST)
    assert bad not in hosts_of(heir.next_many(20))
    assert heir.add(Entry(f"http://{bad}/new", bad)).reason == "host_blocked"
    # unblocked: new URLs are admitted again, the dropped ones stay seen
    assert operator.unblock(bad) == 1 and operator.unblock(bad) == 0
    heir.beat()
    assert heir.add(Entry(f"http://{bad}/later", bad)).added
    assert heir.add(Entry(f"http://{bad}/p1", bad)).reason == "seen"
    leases = [x for x in heir.next_many(20) if x.entry.host == bad]
    assert [x.entry.url for x in leases] == [f"http://{bad}/later"]


def test_a_block_nobody_owns_now_is_said_so_and_obeyed_by_the_next_owner(
    client: redis.Redis,
) -> None:
    key, clock = fresh_key(), FakeClock()
    f = partitioned(client, key, clock, policy=FAST)
    f.add_many(urls("bad.example", 3) + urls("good.example", 1))
    f.close()  # the crawl stopped: no worker runs
    operator = CrawlControls(client, key)
    assert operator.block("http://Bad.example:8080/a", wait=0.2) is None
    g = partitioned(client, key, clock, worker="w2", policy=FAST)
    assert hosts_of(g.next_many(10)) == {"good.example"}
    assert g.counts().extra["host_blocked"] == 3  # as its refill met them in the front queues
    assert "h:bad.example" in operator.controls()["dropped"]  # the owner said it obeys


def test_a_blocked_domain_takes_its_known_and_future_hosts(client: redis.Redis) -> None:
    key, clock = fresh_key(), FakeClock()
    f = partitioned(client, key, clock, policy=FAST)
    f.add_many(urls("a.spam.example", 2) + urls("spam.example", 2) + urls("nospam.example", 2))
    operator = CrawlControls(client, key)
    operator.block("spam.example", domain=True, wait=0)
    f.beat()
    assert operator.controls()["dropped"] == {"d:spam.example": 4}
    assert hosts_of(f.next_many(10)) == {"nospam.example"}
    later = f.add(Entry("http://new.a.spam.example/", "new.a.spam.example"))
    assert later.reason == "host_blocked"  # met after the block: blocked as it comes
    assert operator.controls()["blocked_domains"] == ["spam.example"]
    operator.block("a.spam.example", wait=0)  # also blocked by name: the domain's unblock
    assert operator.unblock("spam.example", domain=True) == 1  # keeps it
    f.beat()
    assert f.add(Entry("http://spam.example/x", "spam.example")).added
    assert f.add(Entry("http://a.spam.example/x", "a.spam.example")).reason == "host_blocked"


def test_pause_holds_every_worker_and_resume_releases_them(client: redis.Redis) -> None:
    key, clock = fresh_key(), FakeClock()
    a, b = two_workers(client, key, clock)
    a.add_many(urls("one.example", 3) + urls("two.example", 3) + urls("three.example", 3))
    b.read_mail()
    operator = CrawlControls(client, key)
    assert operator.set_control("paused", 1) == "paused"
    late = partitioned(client, key, clock, count=4, worker="late", policy=FAST)
    for worker in (a, b, late):  # a worker started while paused holds too
        worker.beat()
        assert worker.next_many(4) == [] and worker.due_in() is None
        assert worker.halted() == "paused"
    assert len(a) + len(b) + len(late) == 9
    assert operator.set_control("paused", None) == ""
    for worker in (a, b, late):
        worker.beat()
    got = a.next_many(9) + b.next_many(9) + late.next_many(9)
    assert len(got) == 3 and a.halted() == ""  # a URL of each host


def test_deadline_on_redis_clock_and_byte_budget_end_the_crawl(client: redis.Redis) -> None:
    key, clock = fresh_key(), FakeClock()
    a, b = two_workers(client, key, clock)
    a.add_many([e for h in range(6) for e in urls(f"h{h}.example", 2)])
    b.read_mail()
    operator = CrawlControls(client, key)
    assert operator.set_control("deadline", 0.3, relative=True) == ""
    a.beat()
    b.beat()
    assert a.halted() == b.halted() == ""
    time.sleep(0.4)  # past the deadline on Redis's clock: every worker sees it from memory
    assert a.halted() == b.halted() == "deadline" and a.next_many(5) == []
    assert operator.set_control("deadline", None) == ""
    assert operator.set_control("budget", 1000) == ""
    a.beat()
    b.beat()
    first, second = a.next_many(1) + b.next_many(1)
    a.complete(first.token, 0.1, size=600)
    assert a.halted() == ""  # 600 of 1,000 bytes
    b.finish(second.token, 0.1, size=500)
    assert b.halted() == ""  # this worker's 500: not over the crawl's budget by itself
    a.beat()
    b.beat()  # both sent their bytes: 1,100
    assert b.halted() == "byte_budget" and b.next_many(5) == []
    a.beat()
    assert a.halted() == "byte_budget"
    controls = operator.controls()
    assert controls["bytes"] == 1100 and controls["byte_budget"] == 1000
    with pytest.raises(ValueError):
        operator.set_control("speed", 1)


def test_a_buffered_worker_hears_the_operator_and_hands_back_its_read_ahead(
    client: redis.Redis,
) -> None:
    key = fresh_key()
    inner = partitioned(client, key, time.monotonic, policy=FAST)
    inner.add_many(urls("x.example", 1) + urls("y.example", 1))
    woken: list[int] = []
    buffered = BufferedFrontier(inner, read_ahead=4, max_wait=30, notify=lambda: woken.append(1))
    try:
        buffered.next()  # the caller asks: the worker reads ahead
        deadline = time.monotonic() + 5
        while not woken and time.monotonic() < deadline:
            time.sleep(0.01)
        assert woken and inner.in_flight() == 2
        CrawlControls(client, key).set_control("paused", 1)
        deadline = time.monotonic() + 5
        while (inner.in_flight() or not buffered.halted()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert inner.in_flight() == 0  # the read-ahead went back
        assert buffered.has_work(0) and buffered.halted() == "paused"
    finally:
        buffered.close()


def test_redis_time_asks_the_node_of_a_key_on_a_cluster(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    """Each node of a cluster keeps its own clock: with a key, the one that serves it."""

    def times_asked(node: Any) -> int:
        stats = node.redis_connection.info("commandstats").get("cmdstat_time", {})
        return int(stats.get("calls", 0))

    client = redis_cluster.client()
    try:
        key = next(k for k in iter(fresh_key, None)  # a node other than keyless calls'
                   if client.get_node_from_key(k).name != client.get_default_node().name)
        node = client.get_node_from_key(key)
        before = {n.name: times_asked(n) for n in client.get_primaries()}
        assert redis_time(client, key) > 1e9
        after = {n.name: times_asked(n) for n in client.get_primaries()}
        assert {name: after[name] - before[name] for name in after} == {
            name: int(name == node.name) for name in after
        }
    finally:
        client.close()


def test_the_mercator_frontier_obeys_blocks_it_is_given() -> None:
    clock = FakeClock()
    f = MercatorFrontier(FAST, clock=clock)
    f.add_many(urls("bad.test", 3) + urls("good.test", 2))
    lease = f.next()
    assert lease is not None
    blocked = {"bad.test", "later.test"}
    assert f.obey_blocks(blocked.__contains__) == {
        "bad.test": 3 if lease.entry.host == "good.test" else 2
    }
    assert f.add(Entry("http://later.test/", "later.test")).reason == "host_blocked"
    f.release([lease.token])
    assert hosts_of(f.next_many(10)) <= {"good.test"}  # the lease of bad.test was dropped
    assert f.counts().extra["host_blocked"] == 3
    assert f.obey_blocks(lambda host: False) == {}
    assert f.add(Entry("http://bad.test/new", "bad.test")).added


def test_the_status_report_reads_the_partitions(client: redis.Redis) -> None:
    """What ``scrapy frontier`` shows, read from the partitions as their owners left them and
    from the workers' heartbeats: no script, no walk of a queue."""
    from crawler.backends.redis.status import Fleet, SharedCrawl, crawl_report
    from crawler.commands.frontier_report import format_partition_loads, format_report
    from crawler.report.tally import HostTally

    key, clock = fresh_key(), FakeClock()
    a, b = two_workers(client, key, clock)
    crawl = SharedCrawl(client, key, 4, front_queues=4, max_delay=1.0)
    assert not crawl.is_empty()
    assert SharedCrawl(client, fresh_key(), 4, front_queues=4).is_empty()
    a.add_many(urls("busy.example", 4) + urls("held.example", 2))
    b.read_mail()
    owner_of("held.example", a, b).hold_host("held.example", 600)
    busy = owner_of("busy.example", a, b)
    lease = busy.next()
    assert lease is not None and lease.entry.host == "busy.example"
    busy.complete(lease.token, 0.1)  # the host rests: its next fetch time is saved
    CrawlControls(client, key).block("gone.example", wait=0)
    tally = HostTally(fetches=7, pages=6, gaps=2, gap_sum=3.0)
    Fleet(client, key, "a").beat({"pages/status/200": 5, "downloader/response_bytes": 2500},
                                 {"state": "running", "pages": 5, "rate": 2.0,
                                  "hosts": {"busy.example": tally.counts()}})
    Fleet(client, key, "b").beat({"pages/status/200": 1}, {"state": "ended", "pages": 1,
                                                           "rate": 0.0})
    report = crawl_report(crawl)
    assert report["queued"] == 6  # the one leased included: it is not acknowledged
    assert report["seen"] == 6 and report["hosts_total"] == 2 and report["inbox"] == 0
    assert report["hosts"]["held"] == 1 and report["held_hosts"][0]["host"] == "held.example"
    assert report["controls"]["blocked_hosts"] == ["gone.example"]
    owners = {row["owner"].partition("/")[0] for row in report["partitions"]}
    assert owners == {"a", "b"}
    assert sum(row["queued"] for row in report["partitions"]) == 6
    assert report["totals"] == {"pages/status/200": 6, "downloader/response_bytes": 2500}
    assert report["busiest_hosts"][0]["host"] == "busy.example"
    assert report["busiest_hosts"][0]["fetches"] == 7 and report["busiest_hosts"][0]["gap"] == 1.5
    beats = {w["worker"]: w for w in report["workers"]}
    assert beats["a"]["pages"] == 5 and beats["a"]["partitions"] == 2
    assert beats["b"]["state"] == "ended"
    text = format_report(report)
    assert "1 held" in text and "a: running, 5 pages, 2.0 pages/s, 2 partitions" in text
    assert "blocked: gone.example" in text
    assert "partitions (4):" in format_partition_loads(report["partitions"])
    # a letter its owner has not read yet is the partition's inbox backlog
    sender = b if owner_of("late.example", a, b) is a else a
    assert sender.add(Entry("http://late.example/", "late.example")).reason == "mailed"
    assert crawl_report(crawl)["inbox"] == 1


def test_the_controls_and_the_partition_loads_on_a_cluster(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    """Every call names its keys (a cluster routes it) and none is refused in a cluster's
    pipeline (``TIME`` is read apart)."""
    from crawler.backends.redis.keys import PartitionKeys
    from crawler.backends.redis.status import partition_loads

    client = redis_cluster.client()
    try:
        key = fresh_key()
        operator, worker = CrawlControls(client, key), CrawlControls(client, key)
        assert operator.set_control("deadline", 3600, relative=True) == ""
        operator.set_control("budget", 100)
        operator.block("spam.example", domain=True, wait=0)
        worker.spend(150)
        worker.refresh()
        assert worker.blocked("a.spam.example") and not worker.blocked("example.org")
        assert worker.halted() == "byte_budget" and operator.controls()["bytes"] == 150
        rows = partition_loads(client, [PartitionKeys(key, i, 4) for i in range(4)], 4)
        assert [row["queued"] for row in rows] == [0] * 4 and len({r["node"] for r in rows}) > 1
    finally:
        client.close()
