"""What a worker of the partition-owned Redis frontier sends Redis per call (issue 37, "Costs"):
the seen-test of a call's links is one round trip however many partitions they touch, and none
for links known to be seen; a page's links and acknowledgement in one partition are one fenced
call; the crawl's seen count is one round trip. Counted on the wire, on a real redis-server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis
from redis.connection import Connection

from crawler.frontier.api import Settlement
from tests.frontier_contract import FakeClock, entries
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned

SEEN_TESTS = (b"SISMEMBER", b"SMISMEMBER", b"BF.MEXISTS")


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    c = redis_server.client()
    yield c
    c.close()


@contextmanager
def round_trips(
    monkeypatch: pytest.MonkeyPatch, carrying: Callable[[bytes], bool]
) -> Iterator[list[bytes]]:
    """The requests (commands sent together) that ``carrying`` picks, while the block runs."""
    sent: list[bytes] = []
    send = Connection.send_packed_command

    def counted(self: Connection, command: bytes | list[bytes], check_health: bool = True):
        data = command if isinstance(command, bytes) else b"".join(command)
        if carrying(data):
            sent.append(data)
        send(self, command, check_health)

    with monkeypatch.context() as m:
        m.setattr(Connection, "send_packed_command", counted)
        yield sent


def seen_test(data: bytes) -> bool:
    return any(name in data for name in SEEN_TESTS)


def test_a_calls_links_are_seen_tested_in_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Links to four partitions, one owner: one seen-test request, not one per partition;
    the same links again: none (the owner knows they are seen)."""
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    assert len(f.parts) == 4
    links = entries(20, 2)  # 20 hosts over the 4 partitions
    assert len({f.shard(e.host) for e in links}) == 4
    with round_trips(monkeypatch, seen_test) as sent:
        assert all(r.added for r in f.add_many(links))
    assert len(sent) == 1
    with round_trips(monkeypatch, seen_test) as sent:
        assert not any(r.added for r in f.add_many(links))
    assert sent == []
    assert len(f) == len(links)


def test_letters_of_several_partitions_are_seen_tested_in_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five pages' letters to each of four partitions: one seen-test request for the 20."""
    key, clock = fresh_key(), FakeClock()
    owner = partitioned(client, key, clock, count=4, worker="owner")
    sender = partitioned(client, key, clock, count=4, worker="sender")
    assert len(owner.parts) == 4 and not sender.parts  # the owner has not beaten since
    links = entries(20, 5)
    for page in range(5):  # each page links to the 20 hosts, over the 4 partitions
        sender.add_many([e for e in links if e.url.endswith(f"/{page}")])
    with round_trips(monkeypatch, seen_test) as sent:
        assert owner.read_mail() == 20
    assert len(sent) == 1
    assert len(owner) == len(links)


def test_a_pages_links_and_acknowledgement_in_one_partition_are_one_fenced_call(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = partitioned(client, fresh_key(), FakeClock(), count=1)
    f.add_many(entries(1, 1))
    lease = f.next()
    assert lease is not None
    links = [e for e in entries(1, 5) if e.url != lease.entry.url]
    keys = f.parts[0].ownership.keys
    writes = (keys.out.encode(), keys.front(0).encode())  # the page's, its links'

    def fenced(data: bytes) -> bool:
        return b"EVALSHA" in data and any(key in data for key in writes)

    with round_trips(monkeypatch, fenced) as sent:
        results, _ = f.apply(links, [Settlement("finish", lease.token, 0.1)])
    assert all(r.added for r in results)
    assert len(sent) == 1
    assert client.hlen(keys.out) == 0  # the page is forgotten ...
    assert client.llen(keys.front(0)) == len(links)  # ... in the call that stored its links


def test_the_crawls_seen_count_is_one_round_trip(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = partitioned(client, fresh_key(), FakeClock(), count=4)
    f.add_many(entries(20, 2))
    counters = b":s:n" if not f.parts[0].store.seen.config.bloom else b"BF.CARD"
    with round_trips(monkeypatch, lambda data: counters in data) as sent:
        assert f.counts().seen == 40
    assert len(sent) == 1
