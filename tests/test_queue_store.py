"""A partition's queues in Redis as the next owner reads them
(``crawler.backends.redis.queue_store``): what was out of the front queues goes back to the
front queue of its priority, and the takeover says how many URLs that was."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import pytest
import redis

from crawler.backends.redis import queue_store
from crawler.backends.redis.entries import pack_entry, unpack_entry
from crawler.backends.redis.keys import PartitionKeys
from crawler.frontier import Entry, PolitenessPolicy
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    c = redis_server.client()
    yield c
    c.close()


def test_an_entry_out_of_the_front_queues_keeps_its_priority() -> None:
    """In a front queue an entry stores no priority (the queue is it); elsewhere (a back
    queue's list, a lease) it does, so a recovery may move it to any front queue as it is."""
    entry = Entry("https://d.test/a/b.html", "d.test", 5, 9, cash=0.25, policy="docs")
    hosts = {3: "d.test"}
    front, out = pack_entry(entry, 3, queue=5), pack_entry(entry, 3)
    assert len(front) < len(out)
    assert unpack_entry(front, hosts, 5) == entry
    assert unpack_entry(out, hosts, 0) == entry and unpack_entry(out, hosts, 2) == entry


def test_the_next_owner_counts_the_urls_it_queues_again(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Routed and leased URLs of a dead worker go back to the front queues of their
    priorities; each partition's takeover logs how many (all of them, not one queue's)."""
    key, clock = fresh_key(), FakeClock()
    policy = PolitenessPolicy(min_delay=30.0)
    dead = partitioned(client, key, clock, count=2, worker="dead", ttl=1.0, policy=policy)
    links = [
        Entry(f"http://h{h}.test/p{i}", f"h{h}.test", priority=i % 4, depth=i)
        for h in range(3) for i in range(12)
    ]  # fmt: skip
    dead.add_many(links)
    assert len(dead.next_many(3)) == 3  # routes a back queue per host, leases its head
    parts = [PartitionKeys(key, i, 2) for i in range(2)]
    out = sum(client.hlen(k.out) for k in parts)
    listed = sum(
        client.llen(k.back(h.decode())) for k in parts for h in client.smembers(k.back_hosts)
    )
    assert out >= 3
    lease_keys = [part.ownership.keys.lease for part in dead.parts.values()]
    deadline = time.monotonic() + 60
    while client.exists(*lease_keys) and time.monotonic() < deadline:
        time.sleep(0.05)
    caplog.set_level(logging.INFO, logger="crawler.backends.redis.partitioned")
    heir = partitioned(client, key, clock, count=2, worker="heir", ttl=1.0, policy=policy)
    assert len(heir.parts) == 2 and len(heir) == len(links)
    said = [
        int(m.group(1))
        for r in caplog.records
        if (m := re.search(r"(\d+) URLs it had out of the queues", r.getMessage()))
    ]
    assert len(said) == 2 and sum(said) == out + listed
    got: list[tuple[str, int, int]] = []
    for _ in range(10 * len(links)):
        if len(got) == len(links):
            break
        lease = heir.next()
        if lease is None:
            clock.now += 31.0
            continue
        got.append((lease.entry.url, lease.entry.priority, lease.entry.depth))
        heir.complete(lease.token, 0.1)
        heir.ack(lease.token)
    assert sorted(got) == sorted((e.url, e.priority, e.depth) for e in links)


def test_the_owner_remembers_two_generations_of_keys_it_knows_are_seen(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys the owner added, or that Redis said were seen, are not asked about again while
    they are in the newer or the older generation of its memory; a generation is
    ``SEEN_MEMORY`` keys (a batch past it starts the next), so the oldest are forgotten
    and asked about again (still seen)."""
    monkeypatch.setattr(queue_store, "SEEN_MEMORY", 4)
    f = partitioned(client, fresh_key(), FakeClock(), count=1)
    store = f.parts[0].store
    keys = list(range(1, 13))
    store.seen_add_many(keys[:3])
    store.flush()  # (3 added: remembered)
    assert store.unknown(keys) == keys[3:]
    store.prime(keys[3:6], [True, False, True])  # Redis says 4 and 6 are seen
    assert store.unknown(keys) == [5, *keys[6:]]
    # (1-3 the older generation, 4 and 6 the newer:) 4 more go past SEEN_MEMORY: 4 and 6
    # become the older generation, 1-3 are forgotten
    store.prime(keys[6:10], [True] * 4)
    assert store.unknown(keys) == [1, 2, 3, 5, 11, 12]
    store.prime(keys[10:], [True, True])  # 7-10 the older, 11-12 the newer
    assert store.unknown(keys) == [1, 2, 3, 4, 5, 6]
    assert store.seen_add_many([1, 5]) == [False, True]  # (1 is still seen in Redis)


def test_a_front_queue_read_ahead_is_decoded_as_it_is_popped(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new owner reads each front queue 256 entries ahead; an entry is decoded when it is
    popped, not the 256 at once (a takeover reads ahead in every front queue of every
    partition, for the few URLs the next moments pop). Every URL still comes out whole."""
    key, clock = fresh_key(), FakeClock()
    links = [Entry(f"http://h{i}.test/p/{i}", f"h{i}.test", priority=i % 3) for i in range(600)]
    first = partitioned(client, key, clock, count=1, worker="first")
    first.add_many(links)
    first.close()  # (its partition goes to the next owner at once)
    decoded: list[bytes] = []
    decode = queue_store.unpack_entry
    monkeypatch.setattr(
        queue_store, "unpack_entry", lambda b, *a: decoded.append(b) or decode(b, *a)
    )
    heir = partitioned(client, key, clock, count=1, worker="heir")
    leases = heir.next_many(4)
    assert len(leases) == 4 and 4 <= len(decoded) < 64
    while len(leases) < len(links):
        got = heir.next_many(100)
        assert got
        leases += got
    assert sorted(lease.entry.url for lease in leases) == sorted(e.url for e in links)
    assert len(decoded) == len(links)
