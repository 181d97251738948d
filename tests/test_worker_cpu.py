"""What a worker of the partition-owned Redis frontier spends per page in Python (issue 37,
"worker CPU per page no worse"): work that needs no doing is not done. Counted on a real
redis-server."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator

import pytest
import redis

from crawler.backends.redis import partitioned as partitioned_module
from crawler.backends.redis import wire
from crawler.frontier import store as store_module
from crawler.frontier.api import Settlement
from crawler.frontier.hoststate import HostState
from crawler.frontier.mercator import MercatorFrontier
from tests.frontier_contract import FakeClock, entries
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned


@pytest.fixture
def client(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:  # noqa: F811
    monkeypatch.setattr(partitioned_module, "BEAT", 3600.0)
    c = redis_server.client()
    yield c
    c.close()


def test_links_seen_before_are_answered_without_an_add_each(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's links mostly lead to URLs seen before, on hosts the owner knows: those are
    answered "seen" by the batch's own pass (no ``add`` call a link), and each host of the
    batch is asked once whether it takes URLs."""
    f = partitioned(client, fresh_key(), FakeClock(), count=1)
    f.add_many(entries(1, 1))
    lease = f.next()
    assert lease is not None
    links = [e for e in entries(3, 5) if e.url != lease.entry.url]
    assert all(r.added for r in f.add_many(links))
    adds: list[str] = []
    asked: list[str] = []
    add, refusal = MercatorFrontier.add, HostState.refusal

    def counted_add(self: MercatorFrontier, entry, **kwargs):  # type: ignore[no-untyped-def]
        adds.append(entry.url)
        return add(self, entry, **kwargs)

    def counted_refusal(self: HostState) -> str:
        asked.append(self.name)
        return refusal(self)

    monkeypatch.setattr(MercatorFrontier, "add", counted_add)
    monkeypatch.setattr(HostState, "refusal", counted_refusal)
    again = [e for e in entries(3, 5) if e.url != lease.entry.url]
    results, _ = f.apply(again, [Settlement("finish", lease.token, 0.1)])
    assert [r.reason for r in results] == ["seen"] * len(again)
    assert adds == []
    assert sorted(asked) == sorted({e.host for e in again})


def test_a_batch_on_the_wire_asks_no_process_id(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch sent on the pool's spare connection checks that the spare is this process's
    without a system call (``os.getpid``: two a batch, two batches a page); a fork's child
    still knows its own."""
    ping = b"*1\r\n$4\r\nPING\r\n"
    assert wire.execute_packed(client, ping, 1, lambda: [client.ping()]) == [b"PONG"]
    calls: list[int] = []
    getpid = os.getpid

    def counted() -> int:
        calls.append(1)
        return getpid()

    monkeypatch.setattr(os, "getpid", counted)
    for _ in range(3):
        assert wire.execute_packed(client, ping, 1, lambda: [client.ping()]) == [b"PONG"]
    assert calls == []
    monkeypatch.setattr(os, "getpid", getpid)
    child = os.fork()
    if child == 0:  # the child's batch may not take the parent's spare connection
        os._exit(0 if wire._pid == os.getpid() else 1)
    assert os.waitpid(child, 0)[1] == 0


def test_a_urls_seen_key_is_hashed_once_while_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page links to the same URLs more than once, a site's pages to the same menus: the
    last ``KEYS_CACHED`` URLs' keys are kept, each hashed once, the same key as ever; when
    full, the keys kept are forgotten (the memory stays bounded)."""
    hashed: list[int] = []
    real = store_module._KEY_HASH

    class Counting:
        def copy(self) -> object:
            hashed.append(1)
            return real.copy()

    expected = {u: store_module.url_key(u) for u in ("https://a.test/", "https://b.test/x")}
    monkeypatch.setattr(store_module, "_KEY_HASH", Counting())
    monkeypatch.setattr(store_module, "_KEYS", {})
    monkeypatch.setattr(store_module, "KEYS_CACHED", 2)
    a, b, c = "https://a.test/", "https://b.test/x", "https://c.test/"
    order = (a, a, b, a, b)
    assert [store_module.url_key(u) for u in order] == [expected[u] for u in order]
    assert len(hashed) == 2
    store_module.url_key(c)  # the third: the two kept are forgotten
    assert len(store_module._KEYS) == 1
    store_module.url_key(a)
    assert len(hashed) == 4


def test_a_host_holds_no_empty_queues(client: redis.Redis) -> None:
    """A worker holds every host of its partitions, most with no first request waiting and no
    lease handed back: those hold no empty list or deque (760 B a deque, and the collector
    walks each), and the hosts its store read at a takeover are not kept once read."""
    key = fresh_key()
    f = partitioned(client, key, FakeClock(), count=1)
    f.add_many(entries(30, 2))
    f.close()
    g = partitioned(client, key, FakeClock(), count=1)  # takes the partition over
    part = g.parts[0]
    hosts = list(part.frontier._hosts.values())
    assert len(hosts) == 30
    assert all(not isinstance(q, (list, deque)) for h in hosts for q in (h.firsts, h.returned))
    assert part.store.load_hosts() == []
    lease = g.next()  # one handed back goes out again
    assert lease is not None
    g.release([lease.token])
    assert len(part.frontier._hosts[lease.entry.host].returned) == 1
    assert lease.entry.url in {x.entry.url for x in g.next_many(100)}
    g.close()
