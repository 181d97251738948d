"""OPIC in the shared frontiers: the OPIC contract (``tests/frontier_contract.py``, also run for
memory and SQLite in ``test_opic.py``) on one Redis and on a crawl in three shards, then what
only the Redis layout has to show: cash kept beside the queues, not in their entries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.shards import ShardMap
from crawler.frontier import Entry, PolitenessPolicy
from tests.frontier_contract import FakeClock, OpicContract
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_sharded import sharded


class _OnRedis(OpicContract):
    @pytest.fixture(autouse=True)
    def _server(self, redis_server: RedisServer) -> Iterator[None]:  # noqa: F811
        self.server = redis_server
        self.clients: list[redis.Redis] = []
        yield
        for client in self.clients:
            client.close()

    def client(self) -> redis.Redis:
        client = self.server.client()
        self.clients.append(client)
        return client


class TestRedisOpic(_OnRedis):
    def make_opic_frontier(self, policy=None, *, clock: FakeClock, front_queues=8, **kwargs):
        return RedisFrontier(
            self.client(), fresh_key(), policy or PolitenessPolicy(), clock=clock,
            front_queues=front_queues, opic=True, **kwargs,
        )


class _OneShard(ShardMap):
    """Every host on shard 1 of 3: Mercator's B is each shard's, and which shard serves next
    is the most overdue one's choice, so a test that needs the crawl's one B runs there."""

    def __call__(self, host: str) -> int:
        return 1


class TestShardedOpic(_OnRedis):
    """Three shards: hosts spread over them (cash conservation, politeness: each URL's cash
    on its host's shard), or, for a test of value against one B, on one of them."""

    one_shard = False

    def make_opic_frontier(self, policy=None, *, clock: FakeClock, front_queues=8, **kwargs):
        f = sharded(
            self.client(), fresh_key(), 3, policy=policy or PolitenessPolicy(), clock=clock,
            front_queues=front_queues, opic=True, **kwargs,
        )
        if self.one_shard:
            f.shard_map = _OneShard(3)
        return f

    def test_cash_arriving_for_a_queued_url_raises_it(self) -> None:
        self.one_shard = True
        super().test_cash_arriving_for_a_queued_url_raises_it()

    def test_robots_txt_waits_until_its_host_has_a_back_queue(self) -> None:
        self.one_shard = True
        super().test_robots_txt_waits_until_its_host_has_a_back_queue()

    def test_a_low_value_host_gives_its_back_queue_up(self) -> None:
        self.one_shard = True
        super().test_a_low_value_host_gives_its_back_queue_up()


class TestOpicOnACluster(TestShardedOpic):
    """Three shards over a real 3-master Redis Cluster: each shard's scripts (cash with its
    links) run on the node that owns the shard's slot."""

    @pytest.fixture(autouse=True)
    def _cluster(self, redis_cluster: RedisClusterServers) -> None:  # noqa: F811
        self.cluster = redis_cluster

    def client(self) -> Any:
        client = self.cluster.client()
        self.clients.append(client)
        return client


def test_cash_goes_to_the_shard_of_its_host(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    f = sharded(client, fresh_key(), 3, policy=PolitenessPolicy(min_delay=0), clock=FakeClock(),
                opic=True)
    hosts = [f"h{i}.test" for i in range(12)]
    assert len({f.shard_map(h) for h in hosts}) == 3
    f.add_many([Entry(f"http://{h}/", h, cash=0.1) for h in hosts])
    f.apply([], [], [(f"http://{h}/", 0.2, "", h) for h in hosts])  # one call per shard
    per_shard = [s.cash_totals() for s in f.shards]
    assert all(t.credited > 0 for t in per_shard)
    assert f.ledger.total == pytest.approx(12 * 0.3)
    leases = []
    while batch := f.next_many(12):
        leases += batch
    assert sorted(x.entry.host for x in leases) == sorted(hosts)
    assert all(x.entry.cash == pytest.approx(0.3) for x in leases)
    client.close()


def test_a_lease_carries_its_cash_and_policy(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(min_delay=0), clock=FakeClock(),
                      opic=True)
    f.add(Entry("http://a.test/x", "a.test", depth=2, cash=0.25, policy="favor@1"))
    f.credit([("http://a.test/x", 0.5, "distrust@1", "a.test")])  # the larger share decides
    lease = f.next()
    assert lease is not None
    assert (lease.entry.url, lease.entry.depth) == ("http://a.test/x", 2)
    assert lease.entry.cash == pytest.approx(0.75) and lease.entry.policy == "distrust@1"
    totals = f.ledger
    assert totals.seeded == pytest.approx(0.25) and totals.credited == pytest.approx(0.5)
    assert totals.spent == pytest.approx(0.75) and len(totals) == 0
    client.close()


def test_released_lease_gets_its_cash_back(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(min_delay=0), clock=FakeClock(),
                      opic=True)
    f.add(Entry("http://a.test/x", "a.test", cash=0.5, policy="p"))
    lease = f.next()
    assert lease is not None and f.release([lease.token]) == 1
    assert f.ledger.total == pytest.approx(0.5) and len(f) == 1
    again = f.next()
    assert again is not None and again.entry.cash == pytest.approx(0.5)
    assert again.entry.policy == "p"
    client.close()
