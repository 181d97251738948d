"""Three ``scrapy crawl`` workers crawl a real multi-host site through a real Redis Cluster with
the frontier in three shards (issue 23): the sharded crawl is the same polite crawler as one on
a single Redis. Every page fetched once, robots.txt once per host, no two requests of one host
at once nor closer than the delay, and ``scrapy frontier <site>`` showing the shards.

Every verdict comes from the site server's own record of requests; the larger version of this
crawl, on real documentation trees served by nginx and compared with a single-Redis crawl, is
``bench/cluster_crawl.py``.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler.backends.redis.shards import ShardMap
from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import finish_crawl, normalized, scrapy_frontier, start_crawl
from tests.partition_support import PARTITIONS
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key
from tests.test_redis_crawl import check_polite, robots, wait_until

pytestmark = pytest.mark.integration

SHARDS = 3
HOSTS = [f"127.0.0.{i}" for i in range(2, 6)]
MIN_DELAY = 0.15  # what check_polite holds the hosts to (127.0.0.3 asks 0.4 s in robots.txt)


def site(pages: int = 20) -> RoutedSiteServer:
    graph = build_site(
        [HostSpec(h, pages=pages) for h in HOSTS], links_per_page=4, cross_host_links=1
    )
    server = RoutedSiteServer(graph)
    for host in HOSTS:
        server.route(host, "/robots.txt", robots)
    return server


def settings(url: str, key: str, tmp: Path) -> dict[str, Any]:
    return {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": url,
        "FRONTIER_REDIS_KEY": key,
        "FRONTIER_SHARDS": SHARDS,
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": MIN_DELAY,
        "FRONTIER_DELAY_FACTOR": 0,
        "FRONTIER_HOST_CONCURRENCY": 1,
        "TUNING": {"read_ahead": 2, "heartbeat_interval": 0.5},
        "LOG_LEVEL": "INFO",
        "INDEX_PATH": tmp / "index.sqlite",  # one per worker: SQLite is not shared
    }


def frontier_status(url: str, key: str) -> subprocess.CompletedProcess[str]:
    return scrapy_frontier(
        {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": url,
            "FRONTIER_REDIS_KEY": key,
            "FRONTIER_SHARDS": SHARDS,
        }
    )


def test_three_workers_crawl_through_a_cluster_in_shards_once_and_politely(
    tmp_path: Path,
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    # the hosts fall on more than one shard, so the crawl really is split
    assert len({ShardMap(SHARDS)(h) for h in HOSTS}) > 1
    url, key = redis_cluster.url, fresh_key()
    dirs = [tmp_path / f"w{i}" for i in range(3)]
    for d in dirs:
        d.mkdir()
    client = redis_cluster.client()
    try:
        with site() as server:
            procs = [
                start_crawl(dirs[0], seeds=server.seeds(), settings=settings(url, key, dirs[0]))
            ]
            # the crawl exists once the first worker has stored its seeds on their shards
            wait_until(lambda: len(server.records) > 0, timeout=60)
            procs += [start_crawl(d, settings=settings(url, key, d)) for d in dirs[1:]]
            results = [finish_crawl(p, d, timeout=150) for p, d in zip(procs, dirs, strict=True)]
            records = server.records
            wanted = server.graph.reachable(server.seeds())
        status = frontier_status(url, key)
    finally:
        client.close()
    for r in results:
        assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
        assert "Traceback" not in r.log, r.log[-3000:]
    fetched = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched), sorted(allowed - set(fetched))[:5]
    twice = [u for u, n in Counter(fetched).items() if n > 1]
    assert not twice, twice
    assert Counter(r.host for r in records if r.path == "/robots.txt") == dict.fromkeys(HOSTS, 1)
    check_polite(records)  # no overlap per host, no gap below the delay
    pages = [r.stats.get("pages/ok", 0) for r in results]
    assert sum(1 for n in pages if n > 0) >= 2, pages  # the joiners got work from the shards
    assert status.returncode == 0, status.stderr
    assert f"partitions ({PARTITIONS}):" in status.stdout, status.stdout
    # one line per partition: its owner, its load, its master (at the end: nothing queued,
    # the hosts it owns)
    after = status.stdout.split(f"partitions ({PARTITIONS}):", 1)[1].strip().splitlines()
    row = re.compile(r"queued\s+([\d,]+)\s+hosts\s+([\d,]+)\s+seen\s+[\d,]+\s+inbox\s+\d+\s+(\S+)")
    rows = [row.search(line) for line in after]
    assert all(rows) and len(rows) == PARTITIONS, status.stdout
    assert len({m.group(3) for m in rows if m}) == SHARDS  # the partitions on three masters
    assert [int(m.group(1)) for m in rows if m] == [0] * PARTITIONS
    assert sum(int(m.group(2)) for m in rows if m) == len(HOSTS)
