"""Operator controls and the one view of a shared crawl, on the Redis frontier itself (a real
redis-server; two handles on one key act as two workers): blocks, pause, deadline and byte
budget are obeyed inside the scripts and survive new handles (a worker restart). The report
of the partitioned frontier is tested in test_controls.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from crawler.backends.redis.frontier import RedisFrontier
from crawler.commands.frontier import parse_deadline, parse_size
from crawler.frontier import Entry, PolitenessPolicy
from crawler.frontier.buffered import BufferedFrontier
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

FAST = PolitenessPolicy(min_delay=0, delay_factor=0, max_delay=1)


@pytest.fixture
def make(redis_server: RedisServer) -> Iterator[Callable[..., RedisFrontier]]:  # noqa: F811
    clock = FakeClock()
    clients: list[redis.Redis] = []

    def factory(key: str, **kwargs: Any) -> RedisFrontier:
        client = redis_server.client()
        clients.append(client)
        kwargs.setdefault("clock", clock)
        return RedisFrontier(client, key, kwargs.pop("policy", FAST), **kwargs)

    factory.clock = clock  # type: ignore[attr-defined]
    yield factory
    for client in clients:
        client.close()


def urls(host: str, n: int) -> list[Entry]:
    return [Entry(f"http://{host}/p{i}", host) for i in range(n)]


def test_a_blocked_host_is_dropped_for_every_worker_and_stays_blocked(make) -> None:
    key = fresh_key()
    a, b = make(key), make(key)
    a.add_many(urls("bad.example", 5) + urls("good.example", 3))
    lease = b.next()  # one of either host is in flight on the other worker
    assert lease is not None
    operator = make(key)
    dropped = operator.block("bad.example")
    assert dropped == (5 if lease.entry.host == "good.example" else 4)
    assert operator.counts().extra["host_blocked"] == dropped
    assert operator.controls()["blocked_hosts"] == ["bad.example"]
    # no worker hands out or admits a URL of it again, whoever asks, after a restart too
    restarted = make(key)
    got = [x.entry.host for x in restarted.next_many(20) + a.next_many(20)]
    assert "bad.example" not in got and "good.example" in got
    assert restarted.add(Entry("http://bad.example/new", "bad.example")).reason == "host_blocked"
    # the lease in flight when it was blocked goes nowhere when it comes back
    b.release([lease.token])
    assert "bad.example" not in [x.entry.host for x in a.next_many(20)]
    # unblocked: new URLs are admitted again (the dropped ones stay seen)
    assert operator.unblock("bad.example") == 1
    assert a.add(Entry("http://bad.example/later", "bad.example")).added
    assert a.add(Entry("http://bad.example/p1", "bad.example")).reason == "seen"
    assert [x.entry.url for x in a.next_many(5)] == ["http://bad.example/later"]


def test_a_blocked_domain_takes_its_known_and_future_hosts(make) -> None:
    key = fresh_key()
    f = make(key)
    f.add_many(urls("a.spam.example", 2) + urls("spam.example", 2) + urls("nospam.example", 2))
    assert f.block("spam.example", domain=True) == 4
    assert {x.entry.host for x in f.next_many(10)} == {"nospam.example"}
    later = f.add(Entry("http://new.a.spam.example/", "new.a.spam.example"))
    assert later.reason == "host_blocked"  # met after the block: blocked as it comes
    assert f.controls()["blocked_domains"] == ["spam.example"]
    f.block("a.spam.example")  # also blocked by name: the domain's unblock keeps it
    assert f.unblock("spam.example", domain=True) == 2  # spam.example, new.a.spam.example
    assert f.add(Entry("http://spam.example/x", "spam.example")).added
    assert f.add(Entry("http://a.spam.example/x", "a.spam.example")).reason == "host_blocked"


def test_pause_holds_every_worker_and_resume_releases_them(make) -> None:
    key = fresh_key()
    a, b = make(key), make(key)
    a.add_many(urls("one.example", 3) + urls("two.example", 3))
    assert b.set_control("paused", 1) == "paused"
    for worker in (a, make(key)):  # a worker started while paused holds too
        leases, (due, _, queued) = worker.lease_with_status(4)
        assert leases == [] and due is None and queued == 6  # nothing due: it waits
        assert worker.halted() == "paused"
    assert a.set_control("paused", None) == ""
    assert len(a.next_many(4)) == 2 and a.halted() == ""


def test_deadline_and_byte_budget_end_the_crawl(make) -> None:
    key = fresh_key()
    f = make(key)
    f.add_many(urls("h1.example", 2) + urls("h2.example", 2) + urls("h3.example", 2))
    assert f.set_control("deadline", 10, relative=True) == ""
    lease = f.next()
    assert lease is not None
    f.complete(lease.token, 0.1, size=600)
    make.clock.now += 10.0
    assert f.next() is None and f.halted() == "deadline"
    assert f.set_control("deadline", None) == ""
    assert f.set_control("budget", 1000) == ""
    second = f.next()
    assert second is not None
    f.finish(second.token, 0.1, size=500)  # 1,100 bytes: over the budget
    assert f.next() is None and f.halted() == "byte_budget"
    assert f.controls()["bytes"] == 1100 and f.controls()["byte_budget"] == 1000


def test_a_buffered_worker_hands_back_its_read_ahead_when_the_operator_acts(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key = fresh_key()
    client = redis_server.client()
    inner = RedisFrontier(client, key, FAST)
    inner.add_many(urls("x.example", 1) + urls("y.example", 1))
    woken: list[int] = []
    buffered = BufferedFrontier(inner, read_ahead=4, max_wait=30, notify=lambda: woken.append(1))
    try:
        buffered.next()  # the caller asks: the worker reads ahead
        deadline = time.monotonic() + 5
        while not woken and time.monotonic() < deadline:
            time.sleep(0.01)
        assert woken and inner.in_flight() == 2
        operator = RedisFrontier(redis_server.client(), key, FAST)
        operator.set_control("paused", 1)
        assert buffered.flush(5)
        deadline = time.monotonic() + 5
        while (operator.in_flight() or not buffered.halted()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert operator.in_flight() == 0  # the read-ahead went back
        assert buffered.has_work(0) and buffered.halted() == "paused"
    finally:
        buffered.close()
        client.close()


def test_sizes_and_deadlines_parse() -> None:
    assert parse_size("500MB") == 500 << 20 and parse_size("2g") == 2 << 30
    assert parse_size("1234") == 1234
    assert parse_deadline("+90m", 0.0) == 5400 and parse_deadline("+2h", 0.0) == 7200
    with pytest.raises(ValueError):
        parse_size("lots")
    with pytest.raises(ValueError):
        parse_deadline("2000-01-01T00:00", 1e10)


def test_a_silent_worker_is_claimed_once_and_its_leases_expire_now(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The reaper on a real Redis: nothing on a worker's first beat, nor when its own last beat
    is old (Redis was away for everyone); then a worker silent past the bound is claimed lost
    once, and only its open leases get deadline 0 (the frontier's next call requeues them)."""
    import json

    import msgpack

    from crawler.backends.redis.keys import CrawlKeys
    from crawler.backends.redis.reaper import LostWorkers

    client = redis_server.client()
    keys = CrawlKeys("reap")
    now = 1_000_000.0
    beats = {"dead": {"state": "running", "beat": now - 100}, "alive": {"state": "running",
             "beat": now - 1}, "done": {"state": "ended", "beat": now - 100}}  # fmt: skip
    client.hset(keys.workers, mapping={w: json.dumps(b) for w, b in beats.items()})
    shard = keys.frontier()
    for token, worker in (("t1", "dead"), ("t2", "dead"), ("t3", "alive")):
        record = ["h.test", 0, 0, 0, b"", now - 50, worker]
        client.hset(shard.lease, token, msgpack.packb(record, use_bin_type=False))  # as Lua packs
        client.zadd(shard.leases, {token: now + 500})
    lost = LostWorkers(client, keys, "me", lost_after=30)
    assert lost.after_beat(now, 5) == {}  # its first beat: it may have been cut off itself
    assert lost.after_beat(now + 100, 5) == {}  # its own last beat 100 s old: Redis was away
    client.hset(keys.workers, "alive", json.dumps({"state": "running", "beat": now + 101}))
    assert lost.after_beat(now + 105, 5) == {"dead": 2}
    assert lost.after_beat(now + 110, 5) == {}  # claimed once
    assert json.loads(client.hget(keys.workers, "dead"))["state"] == "lost"
    assert json.loads(client.hget(keys.workers, "done"))["state"] == "ended"
    scores = dict(client.zrange(shard.leases, 0, -1, withscores=True))
    assert scores == {b"t1": 0.0, b"t2": 0.0, b"t3": now + 500}
    assert LostWorkers(client, keys, "me", lost_after=0).after_beat(now + 200, 5) == {}
