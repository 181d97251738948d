"""A Redis Cluster gone whole mid-crawl (every node restarted at once, a worker cut off from
them all): the frontier's calls meanwhile fail with the cluster client's "cannot be
connected" (``RedisClusterException``, no ``ConnectionError``), which is Redis away all the
same: the frontier's worker keeps each call and sends it once the cluster is back, in order,
never dropping one (a page's completion and its links would be lost with it).

A real cluster (3 masters, no replica, AOF fsynced at each write) whose nodes are killed with
SIGKILL and started again on their files, and the frontier the Redis backend builds, in
process: leases taken before, pages finished and links added while the cluster is away.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.frontier import Entry
from tests.redis_cluster_support import start_cluster
from tests.redis_support import fresh_key
from tests.test_redis_crawl import wait_until

pytestmark = pytest.mark.integration

BEFORE = 12  # URLs queued before the cluster goes (one host each: none waits for its host)
HELD = 4  # of them leased when it goes, finished while it is away
LINKS = 3  # links each of those pages gives, added while it is away


def entries(first: int, n: int) -> list[Entry]:
    return [Entry(f"http://h{i}.test/", f"h{i}.test") for i in range(first, first + n)]


def take(frontier: Any, n: int) -> list[Any]:
    """``n`` leases, as the buffer gets them."""
    leases: list[Any] = []

    def more() -> bool:
        lease = frontier.next()
        if lease is not None:
            leases.append(lease)
        return len(leases) >= n

    wait_until(more, timeout=60)
    return leases


def test_a_cluster_gone_whole_mid_crawl_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cluster = start_cluster(tmp_path, masters=3, replicas=0, aof="always")
    settings = Settings({"REDIS_URL": cluster.url, "REDIS_CLUSTER": "yes",
                         "REDIS_OUTAGE_WAIT": 1.0})  # fmt: skip
    frontier: Any = RedisFrontierStore(settings, fresh_key()).open_frontier(lease_ttl=300.0)
    fetched: Counter[str] = Counter()
    wanted = {e.url for e in entries(0, BEFORE)}
    try:
        frontier.add_many(entries(0, BEFORE))
        held = take(frontier, HELD)
        assert frontier.flush(60)  # (everything so far is in Redis)
        cluster.kill_all()
        for i, lease in enumerate(held):  # pages fetched while the cluster is away
            links = entries(1000 + LINKS * i, LINKS)
            wanted |= {e.url for e in links}
            fetched[lease.entry.url] += 1
            frontier.add_many(links)
            frontier.finish(lease.token, 0.1)
        # the worker found the cluster away (or, failing that, dropped what was queued)
        wait_until(lambda: "Shared frontier unreachable" in caplog.text or frontier.flush(1),
                   timeout=60)
        cluster.start_again()

        def crawled() -> bool:
            lease = frontier.next()
            if lease is not None:
                fetched[lease.entry.url] += 1
                frontier.finish(lease.token, 0.1)
            return set(fetched) >= wanted

        deadline = time.monotonic() + 120
        while not crawled() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert frontier.flush(60)
        # nothing left (a lease of a page finished while away, its finish dropped, would be
        # handed out again once it expired)
        left = frontier._call(lambda: frontier.inner.counts())
    finally:
        frontier.close()
        cluster.stop()
    assert set(fetched) == wanted, sorted(wanted - set(fetched))
    assert all(n == 1 for n in fetched.values()), fetched
    assert (left.queued, left.in_flight) == (0, 0), left
    assert caplog.text.count("Shared frontier unreachable") == 1, caplog.text
    assert caplog.text.count("Shared frontier back after") == 1, caplog.text
