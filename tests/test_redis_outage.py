"""Every Redis user of a crawl rides out Redis going away as the frontier does: one line when it
goes and one when it is back per component, no traceback, no page lost.

Real ``scrapy crawl`` workers, a real ``redis-server`` (AOF ``always``) killed with SIGKILL and
started again on the same port and files, a real multi-host site on loopback whose pages answer
slowly enough that fetches are in flight, and pages analysed, while Redis is away; and a real
Redis Cluster whose master is killed and replaced by its replica. Before this, the shared
near-duplicate store raised on every page of the outage (51-79 tracebacks per worker).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import CrawlResult, finish_crawl, normalized, start_crawl
from tests.redis_cluster_support import RedisClusterServers, start_cluster
from tests.redis_support import fresh_key, start_redis
from tests.test_redis_crawl import robots, wait_until

pytestmark = pytest.mark.integration

HOSTS = [f"127.0.0.{i}" for i in range(2, 8)]
# What each component says, going and back (crawler/backends/redis/outage.py; the frontier's
# own lines are crawler/frontier/buffered.py's).
COMPONENTS = ("shared near-duplicate store", "fleet heartbeat", "robots.txt cache", "crawl's scope")


def slow_site(pages: int, delay: float) -> RoutedSiteServer:
    """A multi-host site whose pages each take ``delay`` seconds to answer: fetches are in
    flight whenever Redis is killed, and their pages are analysed while it is away."""
    graph = build_site(
        [HostSpec(h, pages=pages, delay=delay) for h in HOSTS], links_per_page=4,
        cross_host_links=1,
    )
    server = RoutedSiteServer(graph)
    for host in HOSTS:
        server.route(host, "/robots.txt", robots)
    return server


def settings(url: str, key: str, tmp: Path, **extra: Any) -> dict[str, Any]:
    return {
        "FRONTIER_BACKEND": "redis",  # the near-duplicate store, robots.txt cache: Redis's too
        "REDIS_URL": url,
        "FRONTIER_REDIS_KEY": key,
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.1,
        "FRONTIER_DELAY_FACTOR": 0,
        "FRONTIER_READ_AHEAD": 2,
        "FLEET_HEARTBEAT_INTERVAL": 0.5,  # beats meet the outage
        "INDEX_PATH": tmp / "index.sqlite",
        **extra,
    }


def start_workers(
    tmp_path: Path, server: RoutedSiteServer, url: str, client: Any, n: int, **extra: Any
) -> tuple[list[Any], list[Path], str]:
    key = fresh_key()
    dirs = [tmp_path / f"w{i}" for i in range(n)]
    for d in dirs:
        d.mkdir()
    procs = [start_crawl(dirs[0], seeds=server.seeds(), settings=settings(url, key, dirs[0],
                                                                           **extra))]
    wait_until(lambda: client.scard("{" + key + "}:seen") > 0, timeout=60)
    procs += [start_crawl(d, settings=settings(url, key, d, **extra)) for d in dirs[1:]]
    return procs, dirs, key


def working(client: Any, key: str, procs: list[Any], judged: int = 3) -> bool:
    """Every worker past its start-up checks and holding leases, and ``judged`` pages judged by
    the shared near-duplicate store already (the workers hold copies of its state)."""
    held = client.hvals("{" + key + "}:lease")
    commits = int(client.hget("{" + key + "}:nd:v", "seq") or 0)
    return commits >= judged and all(any(f":{p.pid}".encode() in r for r in held) for p in procs)


def check_lines(result: CrawlResult) -> dict[str, int]:
    """No traceback; per component at most one line going, and as many back: returns how many
    outages each component saw."""
    log = result.log
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    assert "Error downloading" not in log  # no page failed for want of Redis
    seen = {}
    for component in COMPONENTS:
        gone = log.count(f"Redis unreachable for the {component}")
        back = log.count(f"Redis back for the {component}")
        assert gone <= 1 and back == gone, (component, gone, back)
        seen[component] = gone
    gone, back = log.count("Shared frontier unreachable"), log.count("Shared frontier back after")
    assert gone <= 1 and back == gone, ("frontier", gone, back)
    seen["frontier"] = gone
    return seen


def check_pages(server: RoutedSiteServer, results: list[CrawlResult]) -> None:
    """Every allowed page fetched once, and one item each."""
    fetched = normalized(server.records)
    wanted = {u for u in server.graph.reachable(server.seeds()) if "/private/" not in u}
    assert wanted <= set(fetched), sorted(wanted - set(fetched))[:5]
    twice = [u for u, n in Counter(fetched).items() if n > 1]
    assert not twice, twice
    items = [i for r in results for i in r.items]
    assert len(items) == len(fetched)
    pages = [i for i in items if i.get("content_type", "").startswith("text/html")]
    assert pages and all(i.get("content_fingerprint") for i in pages)  # each judged


def totals_match(client: Any, key: str, results: list[CrawlResult]) -> None:
    """The crawl's totals in Redis are the sum of the workers' own stats: the beats that
    failed during the outage were sent in full after it."""
    totals = {k.decode(): v.decode() for k, v in client.hgetall("{" + key + "}:totals").items()}
    for name in ("item_scraped_count", "pages/ok"):
        assert int(totals[name]) == sum(r.stats.get(name, 0) for r in results), name


def test_every_redis_user_rides_out_a_restart_and_loses_nothing(tmp_path: Path) -> None:
    """3 workers, Redis (AOF always) killed mid-crawl and started again 4 s later: each
    component of each worker that met the outage says so once and once back, no traceback,
    every page fetched once and judged by the shared near-duplicate store (none unjudged: the
    outage is shorter than ``REDIS_OUTAGE_WAIT``), the totals complete."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    try:
        with slow_site(pages=10, delay=0.3) as server:
            client = redis.client()
            procs, dirs, key = start_workers(tmp_path, server, f"redis://127.0.0.1:{redis.port}/0",
                                             client, 3)
            wait_until(lambda: working(client, key, procs), timeout=60)
            client.close()
            redis.process.kill()
            redis.process.wait(10)
            down_at = len(server.records)
            time.sleep(4)
            redis = start_redis(root, port=redis.port, aof="always")
            results = [finish_crawl(p, d, timeout=240) for p, d in zip(procs, dirs, strict=True)]
            client = redis.client()
            totals_match(client, key, results)
            client.close()
    finally:
        redis.stop()
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
        assert r.stats["finish_reason"] == "finished"
        assert not r.stats.get("neardup/unjudged")
    seen = [check_lines(r) for r in results]
    # every worker's heartbeat met the outage (a beat each 0.5 s); the near-duplicate store met
    # it in some worker (pages arriving while Redis was away were judged after it)
    assert all(s["fleet heartbeat"] == 1 for s in seen), seen
    assert any(s["shared near-duplicate store"] == 1 for s in seen), seen
    assert down_at < len(server.records)
    check_pages(server, results)


def test_a_page_is_judged_alone_once_redis_stays_away_past_the_wait(tmp_path: Path) -> None:
    """``REDIS_OUTAGE_WAIT`` 0.5 s, pages that take 2 s to answer and Redis away 5 s: the pages
    analysed past the wait are judged alone (``neardup/unjudged``, said when Redis is back),
    never lost, never a traceback."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    try:
        with slow_site(pages=4, delay=2.0) as server:
            client = redis.client()
            procs, dirs, key = start_workers(
                tmp_path, server, f"redis://127.0.0.1:{redis.port}/0", client, 1,
                REDIS_OUTAGE_WAIT=0.5, FRONTIER_READ_AHEAD=8,
            )
            wait_until(lambda: working(client, key, procs), timeout=60)
            client.close()
            redis.process.kill()
            redis.process.wait(10)
            time.sleep(5)
            redis = start_redis(root, port=redis.port, aof="always")
            results = [finish_crawl(p, d, timeout=240) for p, d in zip(procs, dirs, strict=True)]
    finally:
        redis.stop()
    (r,) = results
    assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
    check_lines(r)
    unjudged = r.stats.get("neardup/unjudged", 0)
    assert unjudged > 0, r.log[-3000:]
    said = re.search(r"Redis back for the shared near-duplicate store after [\d.]+s; (\d+) pages "
                     r"judged alone", r.log)
    assert said is not None and 0 < int(said.group(1)) <= unjudged
    check_pages(server, results)


def test_every_redis_user_rides_out_a_cluster_failover(tmp_path: Path) -> None:
    """2 workers on a Redis Cluster; the master serving the crawl's slot is killed with SIGKILL
    mid-crawl and its replica takes over: one line going and one back per component, no
    traceback, the crawl completes with every page fetched (replication is asynchronous: the
    last writes before the kill may be lost, so a page may be fetched twice; counted, not
    asserted away)."""
    (tmp_path / "cluster").mkdir()
    cluster: RedisClusterServers = start_cluster(tmp_path / "cluster", aof="always")
    try:
        with slow_site(pages=8, delay=0.3) as server:
            client = cluster.client()
            procs, dirs, key = start_workers(tmp_path, server, cluster.url, client, 2)
            wait_until(lambda: working(client, key, procs), timeout=60)
            slot = client.keyslot("{" + key + "}:seen")
            master = client.nodes_manager.get_node_from_slot(slot)
            node = next(n for n in cluster.live() if n.port == master.port)
            client.close()
            down_at = len(server.records)
            cluster.kill_master(node)
            results = [finish_crawl(p, d, timeout=240) for p, d in zip(procs, dirs, strict=True)]
    finally:
        cluster.stop()
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
        assert r.stats["finish_reason"] == "finished"
        check_lines(r)
    assert down_at < len(server.records)
    fetched = normalized(server.records)
    wanted = {u for u in server.graph.reachable(server.seeds()) if "/private/" not in u}
    assert wanted <= set(fetched), sorted(wanted - set(fetched))[:5]
