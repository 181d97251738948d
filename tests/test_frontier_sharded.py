"""The frontier contract on a crawl split into shards (``FRONTIER_SHARDS``), on one Redis and on
a real Redis Cluster, plus what sharding itself promises: each shard owns a stable partition of
the hosts (by registered domain), tokens find their shard, and a page's links land on the
shards of their hosts in one batch each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.keys import CrawlKeys, key_slot
from crawler.backends.redis.sharded import ShardedFrontier
from crawler.backends.redis.shards import ShardMap
from crawler.frontier import Entry, PolitenessPolicy
from tests.frontier_contract import FakeClock, FrontierContract
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


def sharded(client: Any, key: str, count: int, **kwargs: Any) -> ShardedFrontier:
    clock = kwargs.get("clock")
    policy = kwargs.pop("policy", None) or PolitenessPolicy()
    shards = [
        RedisFrontier(client, key, policy, shard=i, shards=count, **kwargs)
        for i in range(count)
    ]
    options = {"clock": clock} if clock is not None else {}
    return ShardedFrontier(shards, **options)


class _ShardedContract(FrontierContract):
    """The shared contract on ``count`` shards; each test's frontier on a fresh key of the
    client ``new_client`` gives (closed at the end)."""

    count = 3

    def new_client(self) -> Any:
        raise NotImplementedError

    @pytest.fixture(autouse=True)
    def _clients(self) -> Iterator[None]:
        self.clients: list[Any] = []
        yield
        for client in self.clients:
            client.close()

    def make_frontier(
        self, policy: PolitenessPolicy | None = None, *, clock: FakeClock, **kwargs: Any
    ) -> ShardedFrontier:
        client = self.new_client()
        self.clients.append(client)
        return sharded(client, fresh_key(), self.count, policy=policy, clock=clock, **kwargs)


class TestShardedFrontierContract(_ShardedContract):
    """Three shards on the module's Redis."""

    @pytest.fixture(autouse=True)
    def _server(self, redis_server: RedisServer) -> None:  # noqa: F811
        self.new_client = redis_server.client  # type: ignore[method-assign]


class TestShardedFrontierOnACluster(_ShardedContract):
    """Six shards on a real 3-master Redis Cluster."""

    count = 6

    @pytest.fixture(autouse=True)
    def _cluster(self, redis_cluster: RedisClusterServers) -> None:  # noqa: F811
        self.new_client = redis_cluster.client  # type: ignore[method-assign]


def test_shard_tags_spread_over_equal_slot_ranges() -> None:
    for count in (2, 3, 6, 12):
        keys = CrawlKeys("docs", shards=count)
        slots = [key_slot(k.tag.encode()) for k in keys.shards()]
        assert [s * count // 16384 for s in slots] == list(range(count))
        assert len({k.prefix for k in keys.shards()}) == count
    assert CrawlKeys("docs").frontier().prefix == "{docs}"  # one shard: the layout of old


def test_hosts_of_one_registered_domain_share_a_shard() -> None:
    shard_of = ShardMap(6)
    family = ("example.co.uk", "a.example.co.uk", "b.a.example.co.uk")
    assert len({shard_of(h) for h in family}) == 1
    spread = {shard_of(f"host{i}.test{i}.org") for i in range(200)}
    assert spread == set(range(6))
    # under no public suffix a host is its own key: not every *.test host in one shard
    assert {shard_of(f"www.site{i}.test") for i in range(100)} == set(range(6))
    assert {shard_of(f"127.0.0.{i}") for i in range(1, 100)} == set(range(6))
    assert ShardMap(6)("docs.python.org") == shard_of("docs.python.org")  # stable


def test_links_land_on_the_shards_of_their_hosts(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    key = fresh_key()
    frontier = sharded(client, key, 3)
    entries = [Entry(f"http://h{i}.test{i}.org/p", f"h{i}.test{i}.org") for i in range(60)]
    assert all(r.added for r in frontier.add_many(entries))
    for shard in frontier.shards:
        hosts = {m.decode() for m in client.smembers(shard.keys.hosts)}
        assert hosts == {e.host for e in entries if frontier.shard_map(e.host) == shard.keys.index}
    assert not any(r.added for r in frontier.add_many(entries))  # seen, on their own shards
    leases = frontier.next_many(100)
    assert sorted(lease.entry.url for lease in leases) == sorted(e.url for e in entries)
    for lease in leases:
        frontier.finish(lease.token, 0.1)
    assert frontier.in_flight() == 0 and len(frontier) == 0


def test_the_operators_controls_reach_every_shard(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    key = fresh_key()
    frontier = sharded(client, key, 3)
    worker = sharded(redis_server.client(), key, 3)  # another worker of the crawl
    hosts = [f"www.site{i}.test" for i in range(12)]
    frontier.add_many([Entry(f"http://{h}/{p}", h) for h in hosts for p in range(3)])
    assert {frontier.shard_map(h) for h in hosts} == {0, 1, 2}
    # a host block on its shard; a domain block (here the .test hosts' parent) on every shard
    assert frontier.block("www.site0.test") == 3
    assert frontier.block("test", domain=True) == 33
    assert worker.next_many(50) == []
    assert sorted(frontier.controls()["blocked_hosts"]) == ["www.site0.test"]
    assert frontier.controls()["blocked_domains"] == ["test"]
    assert frontier.unblock("test", domain=True) == 11
    worker.add_many([Entry(f"http://{h}/new", h) for h in hosts])
    # pause: every shard's copy, so no worker gets a lease from any shard
    assert frontier.set_control("paused", 1) == "paused"
    worker.refresh()
    assert worker.next_many(50) == [] and worker.halted() == "paused"
    frontier.set_control("paused", None)
    worker.refresh()
    leases = worker.next_many(50)
    assert len(leases) == 11  # one per host not blocked by name (host concurrency 1)
    # the byte budget counts the bytes of all shards together
    frontier.set_control("budget", 2500)
    for lease in leases[:3]:  # 3 x 1000 bytes, spread over shards: no shard alone is over
        worker.finish(lease.token, 0.1, size=1000)
    assert frontier.status() and frontier._check_budget() == "byte_budget"
    worker.refresh()
    assert worker.next_many(50) == [] and worker.halted() == "byte_budget"
    assert frontier.controls()["bytes"] == 3000
