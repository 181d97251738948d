"""Every Redis user of a crawl other than the frontier works through a real Redis Cluster (3
masters with a replica each): the robots.txt cache, the DNS cache, the shared near-duplicate
store, the heartbeats and merged totals, the seeds inbox and the scope; and real ``scrapy crawl``
workers whose ``REDIS_URL`` names one node of the cluster (a replica) crawl a multi-host site as
one polite crawler, with ``scrapy frontier`` reading the crawl through the cluster.

Until the frontier is sharded by host, a crawl's keys share one hash tag, ``{<crawl>}``: one
slot, one master; the seeds list (scrapy-redis's ``<site>:start_urls``, no tag) may be on
another, which the inbox tests on purpose.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.cluster import RedisCluster
from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.dns import RedisDnsCache
from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.backends.redis.inbox import SEED_BATCH, RedisScopeRegistry, SharedInbox
from crawler.backends.redis.keys import CrawlKeys, glob_escape
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.backends.redis.robots import RedisRobotsCache
from crawler.backends.redis.status import Fleet
from crawler.content.neardup import NearDuplicateDetector
from crawler.net.dns import DnsAnswer
from crawler.robots.rules import RobotsRecord
from devsite.testset import build_labelled_set, page_item
from tests.crawling import finish_crawl, normalized, scrapy_frontier, start_crawl
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key
from tests.test_redis_crawl import HOSTS, check_polite, site, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster_settings(redis_cluster: RedisClusterServers) -> Settings:  # noqa: F811
    return Settings({"REDIS_URL": redis_cluster.url})


@pytest.fixture
def client(cluster_settings: Settings) -> Iterator[RedisCluster]:
    c = redis_client(cluster_settings)
    assert isinstance(c, RedisCluster)
    try:
        yield c
    finally:
        c.close()


def master_of(client: RedisCluster, key: str) -> int:
    return int(client.get_node_from_key(key).port)


def test_the_robots_txt_cache_is_shared_through_a_cluster(cluster_settings: Settings) -> None:
    """Two workers' caches (the reactor's fail-fast clients): a claim is seen by the other, a
    failure holds the origin for both, an unclaim drops only a claim, a stored record (a
    transaction on the crawl's slot) clears the state and is read by the other."""
    key = fresh_key()
    a, b = (RedisRobotsCache(redis_client(cluster_settings, fail_fast=True), key) for _ in range(2))
    try:
        origin = "http://a.test"
        assert a.claim(origin, 60).claimed
        other = b.claim(origin, 60)
        assert not other.claimed and other.fetching_for > 0
        a.failed(origin, 30.0, 1)
        held = b.peek(origin)
        assert held is not None and held.retry_in is not None and held.failures == 1
        assert not b.claim(origin, 60).claimed  # waiting out its retry, for every worker
        a.unclaim(origin)  # a failure is no claim: it stays (WATCH on the crawl's slot)
        assert not b.claim(origin, 60).claimed
        assert a.claim("http://b.test", 60).claimed
        a.unclaim("http://b.test")
        assert b.claim("http://b.test", 60).claimed
        record = RobotsRecord(origin, "rules", 200, 1.0, 2.0, "User-agent: *\nDisallow: /x\n")
        a.put(record)
        assert b.get(origin) == record
        assert b.peek(origin) is None  # fetched: no claim, no failure left
        assert len(b) == 1 and a.alone.answered == b.alone.answered == 0 and not a.alone.outage.away
    finally:
        a.close()
        b.close()


def test_the_dns_cache_is_shared_through_a_cluster(cluster_settings: Settings) -> None:
    """Two workers' caches: a claim holds the other off while renewed, the answer put is what
    the other's claim finds (``lua/dns_claim.lua``, both keys on the crawl's slot)."""
    key = fresh_key()
    a, b = (RedisDnsCache(redis_client(cluster_settings, fail_fast=True), key) for _ in range(2))
    try:
        assert a.claim("x.test", 1.0) is True
        a.renew(["x.test"], 600.0)  # the claim outlives its first term of a second
        claim = CrawlKeys(key).dns + "x.test:claim"
        assert a.client.pttl(claim) > 1000
        assert b.claim("x.test", 1.0) is False
        a.put("x.test", DnsAnswer("127.0.0.1", 300.0), 300.0)
        found = b.claim("x.test", 1.0)
        assert isinstance(found, tuple) and found[0] == DnsAnswer("127.0.0.1", 300.0)
        assert not a.client.exists(claim)
        assert a.alone.answered == b.alone.answered == 0
    finally:
        a.close()
        b.close()


def test_the_near_duplicate_store_decides_through_a_cluster_as_in_process(
    client: RedisCluster,
) -> None:
    """Two workers on the cluster make the in-process detector's decisions over a labelled set
    of originals and their variants; the host penalty and the counts (a SCAN of every master)
    are shared."""
    labelled = build_labelled_set(pages=12, variants_per_page=4, seed=11)
    pages = []
    for p in [*labelled.originals, *labelled.variants]:
        item = page_item(p.url, p.html)
        pages.append((p.url, str(item["main_text"]), item.get("title") or None))
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(client, key) for _ in range(2)]
    local = NearDuplicateDetector()
    kinds: Counter[str] = Counter()
    for n, (url, text, title) in enumerate(pages):
        decision = workers[n % 2].check(url, text, title=title)
        assert decision == local.check(url, text, title=title), url
        kinds[decision.kind] += 1
    assert kinds["new"] and (kinds["exact"] + kinds["near"])
    assert len(workers[1]) == len(local) and workers[1].originals == local.originals
    reader = RedisNearDuplicateDetector(client, key)
    for host in {u.split("/")[2].split(":")[0] for u, _, _ in pages}:
        assert reader.host_duplicate_ratio(host, 1) == local.host_duplicate_ratio(host, 1)
    assert sum(reader.memory().values()) > 0
    assert workers[0].unjudged == workers[1].unjudged == 0


def test_heartbeats_merge_into_the_totals_through_a_cluster(client: RedisCluster) -> None:
    key = fresh_key()
    one, two = Fleet(client, key, "w1"), Fleet(client, key, "w2")
    one.beat({"pages/ok": 3, "downloader/response_bytes": 1500}, {"state": "running", "pages": 3})
    two.beat({"pages/ok": 2, "elapsed": 0.5}, {"state": "running", "pages": 2})
    now = one.beat(
        {"pages/ok": 7, "downloader/response_bytes": 2500}, {"state": "ended", "pages": 7}
    )
    assert one.totals() == {"pages/ok": 9, "downloader/response_bytes": 2500, "elapsed": 0.5}
    beats = two.workers()
    assert set(beats) == {"w1", "w2"} and beats["w1"]["state"] == "ended"
    assert beats["w1"]["beat"] == pytest.approx(now) and beats["w2"]["started"] <= now


def test_the_seeds_inbox_and_the_scope_through_a_cluster(client: RedisCluster) -> None:
    """The seeds list (no hash tag) on another master than the crawl's slot: seeds pushed by an
    operator reach one worker, in batches, and a scope host added by one worker reaches the
    others."""
    key = fresh_key()
    site = next(
        f"site{i}"
        for i in range(1000)
        if master_of(client, f"site{i}:start_urls") != master_of(client, "{" + key + "}:scope")
    )
    keys = CrawlKeys(key, site)
    seeds: list[list[str]] = []
    scopes: list[set[str]] = []
    worker = SharedInbox(
        client,
        keys.seeds,
        RedisScopeRegistry(client, keys.scope),
        on_seeds=seeds.append,
        on_scope=scopes.append,
    )
    other = RedisScopeRegistry(client, keys.scope)
    total = SEED_BATCH + 50
    client.rpush(keys.seeds, *[f"https://s{i}.test/" for i in range(total)])
    other.add("s0.test")
    assert worker.poll() is True  # 50 still waiting
    assert worker.poll() is False
    assert [len(batch) for batch in seeds] == [SEED_BATCH, 50]
    assert seeds[0][0] == "https://s0.test/" and seeds[1][-1] == f"https://s{total - 1}.test/"
    assert scopes == [{"s0.test"}]
    other.add("s1.test")
    assert worker.poll() is False and scopes[-1] == {"s0.test", "s1.test"}
    assert other.load() == {"s0.test", "s1.test"}


def test_workers_crawl_through_a_cluster_once_and_politely(
    tmp_path: Path,
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    """Two ``scrapy crawl`` workers given a replica's address: every page fetched once,
    robots.txt once per host, politeness across workers, the shared near-duplicate store and
    the merged totals in the cluster, ``scrapy frontier`` reading them; then the crawl's keys
    reset, a SCAN of every master finding none left."""
    replica = next(
        n
        for n in redis_cluster.live()
        if any(
            r["address"] == n.address and "slave" in r["flags"]
            for r in redis_cluster.cluster_nodes()
        )
    )
    url = f"redis://{replica.address}/0"
    key = fresh_key()
    common = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": url,
        "FRONTIER_REDIS_KEY": key,
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.15,
        "FRONTIER_DELAY_FACTOR": 0,
        "TUNING": {"read_ahead": 2, "heartbeat_interval": 0.5},
    }
    dirs = [tmp_path / "w0", tmp_path / "w1"]
    for d in dirs:
        d.mkdir()
    client = redis_cluster.client()
    try:
        with site(pages=8) as server:
            procs = [
                start_crawl(
                    dirs[0],
                    seeds=server.seeds(),
                    settings={**common, "INDEX_PATH": dirs[0] / "index.sqlite"},
                )
            ]
            wait_until(lambda: client.hexists("{" + key + "}:meta", "layout"), timeout=60)
            procs.append(
                start_crawl(dirs[1], settings={**common, "INDEX_PATH": dirs[1] / "index.sqlite"})
            )
            results = [finish_crawl(p, d, timeout=180) for p, d in zip(procs, dirs, strict=True)]
            records = server.records
            wanted = server.graph.reachable(server.seeds())
        status = scrapy_frontier(
            {"FRONTIER_BACKEND": "redis", "REDIS_URL": url, "FRONTIER_REDIS_KEY": key}, "--json"
        )
        judged = int(client.hget("{" + key + "}:nd:v", "seq") or 0)
    finally:
        client.close()
    for r in results:
        assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
        assert "Traceback" not in r.log
    assert all(r.stats.get("pages/ok", 0) > 0 for r in results)  # both took part
    fetched = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched), sorted(allowed - set(fetched))[:5]
    assert not [u for u, n in Counter(fetched).items() if n > 1]
    robots = Counter(r.host for r in records if r.path == "/robots.txt")
    assert robots == dict.fromkeys(HOSTS, 1)
    check_polite(records)
    html = sum(
        1 for r in results for i in r.items if i.get("content_type", "").startswith("text/html")
    )
    assert judged == html  # every page judged by the one shared store
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["totals"]["pages/ok"] == sum(r.stats["pages/ok"] for r in results)
    assert report["totals"]["robotstxt/request_count"] == len(HOSTS)
    assert {w["state"] for w in report["workers"]} == {"ended"} and len(report["workers"]) == 2
    assert report["queued"] == 0 and report["inbox"] == 0
    assert any("Whole crawl" in r.log for r in results)
    # FRONTIER_RESET's path: every key of the crawl, wherever it is, found and removed
    store = RedisFrontierStore(Settings({**common}), "web")
    client = redis_client(Settings({**common}))
    assert store.reset(client) > 0
    client.close()
    pattern = glob_escape("{" + key) + "[:}]*"  # its own tag and its partitions' tags
    for master in redis_cluster.masters():
        with master.client() as c:
            assert not list(c.scan_iter(match=pattern, count=1000)), master.address
