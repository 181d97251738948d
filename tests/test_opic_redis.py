"""OPIC in the shared frontiers: the OPIC contract (``tests/frontier_contract.py``, also run for
memory and SQLite in ``test_opic.py``) on one Redis and on a crawl in three shards, then what
only the Redis layout has to show: cash kept beside the queues, not in their entries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from crawler.backends.redis.cash import credit_items
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


def _cash_buckets(client: redis.Redis, f: RedisFrontier, host: str) -> list[str]:
    count = int(client.hget(f.keys.host(host), "cb") or 1)
    return [f.keys.cash(host, b) for b in range(count)]


def test_a_hosts_cash_records_stay_compact_past_128(redis_server: RedisServer) -> None:  # noqa: F811
    """A host's records are bucketed so that each bucket stays a listpack under the stock
    ``hash-max-listpack-entries`` (128), whether its URLs come in one call or one by one;
    every URL comes out once with its cash, and a host left with nothing queued starts again
    from one bucket."""
    client = redis_server.client()
    stock = client.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"]
    client.config_set("hash-max-listpack-entries", 128)  # Redis's own default (Debian: 512)
    try:
        _compact_past_128(client)
    finally:
        client.config_set("hash-max-listpack-entries", stock)
        client.close()


def _compact_past_128(client: redis.Redis) -> None:
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(min_delay=0, delay_factor=0),
                      clock=FakeClock(), opic=True, back_queues=1, lease_ttl=1e9)
    urls = [f"http://a.test/p/{i}.html" for i in range(3000)]
    f.add_many([Entry(u, "a.test", cash=1.0 + i % 5) for i, u in enumerate(urls[:1000])])
    for i, u in enumerate(urls[1000:]):  # one by one: splits between calls too
        f.add(Entry(u, "a.test", cash=1.0 + (1000 + i) % 5))
    buckets = _cash_buckets(client, f, "a.test")
    assert len(buckets) > 3000 // 128
    assert sum(client.hlen(k) for k in buckets) == 3000
    assert {client.object("encoding", k) for k in buckets} == {b"listpack"}
    assert max(client.hlen(k) for k in buckets) < 128
    assert f.ledger.total == pytest.approx(sum(1.0 + i % 5 for i in range(3000)))
    f.credit([(urls[7], 0.5, "", "a.test")])  # found in its bucket
    cash: dict[str, float] = {}
    while leases := f.next_many(100):
        for lease in leases:
            assert lease.entry.url not in cash
            cash[lease.entry.url] = lease.entry.cash
            f.finish(lease.token, 0.0)
    assert sorted(cash) == sorted(urls)
    assert cash[urls[7]] == pytest.approx(1.0 + 7 % 5 + 0.5)
    assert all(cash[u] == pytest.approx(1.0 + i % 5) for i, u in enumerate(urls) if i != 7)
    assert client.hget(f.keys.host("a.test"), "cb") is None
    assert not list(client.scan_iter(match=f.keys.cash_prefix.replace("{", "[{]") + "*"))
    assert f.ledger.total == pytest.approx(0.0, abs=1e-6) and len(f.ledger) == 0


def test_a_host_given_up_drops_every_bucket(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(min_delay=0), clock=FakeClock(),
                      opic=True, back_queues=1)
    f.add_many([Entry(f"http://a.test/{i}", "a.test", cash=0.5) for i in range(500)])
    f.add(Entry("http://b.test/", "b.test", cash=0.5))
    assert len(_cash_buckets(client, f, "a.test")) > 1
    f.block("a.test")
    assert not list(client.scan_iter(match=f.keys.cash_prefix.replace("{", "[{]") + "*a.test"))
    totals = f.ledger
    assert len(totals) == 1 and totals.total == pytest.approx(0.5)
    assert totals.spent == pytest.approx(250.0)
    client.close()


def test_credits_are_summed_per_url_in_the_worker() -> None:
    """A page's links to one URL go to Redis as one credit: their cash added up, the policy
    of the largest share (the first of a tie), as the links one by one would leave it."""
    links = [
        ("http://a.test/x", 0.1, "p1", "a.test"),
        ("http://a.test/y", 0.2, "", "a.test"),
        ("http://a.test/x", 0.3, "p2", "a.test"),
        ("http://a.test/x", 0.3, "p3", "a.test"),
        ("http://a.test/z", 0.0, "p4", "a.test"),  # no cash: nothing to send
        ("http://b.test/w", 0.4, "p5"),  # the host from the URL
    ]
    items = {item[0]: item for item in credit_items(links)}
    assert sorted(items) == ["http://a.test/x", "http://a.test/y", "http://b.test/w"]
    _, cash, policy, host, share = items["http://a.test/x"]
    assert (cash, policy, host, share) == (pytest.approx(0.7), "p2", "a.test", 0.3)
    assert items["http://b.test/w"][3] == "b.test"


def test_summed_credits_leave_the_record_as_one_by_one(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    made = []
    for summed in (False, True):
        f = RedisFrontier(client, fresh_key(), PolitenessPolicy(min_delay=0), clock=FakeClock(),
                          opic=True)
        f.add(Entry("http://a.test/x", "a.test", cash=0.25, policy="seed"))
        links = [("http://a.test/x", c, p, "a.test") for c, p in
                 ((0.1, "p1"), (0.3, "p2"), (0.3, "p3"), (0.2, "p4"))]
        if summed:
            f.credit(links)
        else:
            for link in links:
                f.credit([link])
        lease = f.next()
        assert lease is not None
        made.append((round(lease.entry.cash, 9), lease.entry.policy, round(f.ledger.credited, 9)))
    assert made[0] == made[1] == (1.15, "p2", 0.9)
    client.close()


def test_long_entries_keep_the_buckets_compact(redis_server: RedisServer) -> None:  # noqa: F811
    """A record past 64 bytes (the stock ``hash-max-listpack-value``) goes on in one more field
    of its bucket, or, longer still, in the host's hash of long tails: the buckets stay
    listpacks, the entries come back whole, with a policy changed by a credit and after a
    forced re-add that shortens one."""
    client = redis_server.client()
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(min_delay=0, delay_factor=0),
                      clock=FakeClock(), opic=True, back_queues=1, lease_ttl=1e9)
    host = "a.test"
    ref = "http://a.test/index.html"
    def url(i: int) -> str:  # a short, a medium (one more field) and a long URL (long tails)
        return f"http://a.test/{i}" + ["", f"/section/page-{i}.html?q=x" * 3, "/z" * 150][i % 3]
    entries = [Entry(url(i), host, cash=1.0, policy="p", referrer=ref) for i in range(300)]
    f.add_many(entries)
    buckets = _cash_buckets(client, f, host)
    assert len(buckets) > 1
    assert {client.object("encoding", k) for k in buckets} == {b"listpack"}
    fields = {k: v for b in buckets for k, v in client.hgetall(b).items()}
    goes_on = [v[13] for k, v in fields.items() if len(k) == 8]  # where each record goes on
    assert len(goes_on) == 300 and goes_on.count(1) == goes_on.count(2) == 100
    assert sum(len(k) == 9 for k in fields) == goes_on.count(1)
    assert client.hlen(f.keys.cash(host).replace(":cr:0:", ":cr:x:")) == 100  # the long ones
    f.credit([(url(2), 5.0, "q", host), (url(4), 5.0, "q", host)])  # a larger share: policy q
    f.add(Entry(url(5), host, cash=1.0, policy="p"), force=True)  # long, now without referrer
    got = {}
    while leases := f.next_many(50):
        for lease in leases:
            got[lease.entry.url] = lease.entry
            f.finish(lease.token, 0.0)
    assert sorted(got) == sorted(url(i) for i in range(300))
    assert got[url(2)].policy == got[url(4)].policy == "q" and got[url(7)].policy == "p"
    assert got[url(2)].cash == pytest.approx(6.0) and got[url(5)].cash == pytest.approx(2.0)
    assert got[url(7)].referrer == ref and not got[url(5)].referrer
    assert not list(client.scan_iter(match=f.keys.cash_prefix.replace("{", "[{]") + "*"))
    client.close()
