"""Every Redis user of a crawl rides out Redis going away as the frontier does: one line when it
goes and one when it is back per component, no traceback, no page lost.

Real ``scrapy crawl`` workers, a real ``redis-server`` (AOF ``always``) killed with SIGKILL and
started again on the same port and files, a real multi-host site on loopback whose pages answer
slowly enough that fetches are in flight, and pages analysed, while Redis is away; and a real
Redis Cluster whose master is killed and replaced by its replica. Before this, the shared
near-duplicate store raised on every page of the outage (51-79 tracebacks per worker).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.backends.redis.robots import RedisRobotsCache
from crawler.backends.redis.status import Fleet
from crawler.content.neardup import NearDuplicateDetector
from crawler.robots.rules import RobotsRecord
from devsite import HostSpec, build_site
from devsite.named import NamedSites
from devsite.routed import RoutedSiteServer
from tests.crawling import CrawlResult, finish_crawl, normalized, start_crawl
from tests.dns_support import dns_server
from tests.partition_support import holds_work, owned
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
        [HostSpec(h, pages=pages, delay=delay) for h in HOSTS],
        links_per_page=4,
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
        "TUNING": {"read_ahead": 2, "heartbeat_interval": 0.5},  # beats meet the outage
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
    procs = [
        start_crawl(dirs[0], seeds=server.seeds(), settings=settings(url, key, dirs[0], **extra))
    ]
    wait_until(lambda: client.hexists("{" + key + "}:meta", "layout"), timeout=60)
    procs += [start_crawl(d, settings=settings(url, key, d, **extra)) for d in dirs[1:]]
    return procs, dirs, key


def working(client: Any, key: str, procs: list[Any], judged: int = 3) -> bool:
    """Every worker past its start-up checks and holding leases, and ``judged`` pages judged by
    the shared near-duplicate store already (the workers hold copies of its state)."""
    commits = int(client.hget("{" + key + "}:nd:v", "seq") or 0)
    # every worker's heartbeat has reached Redis: its reactor runs past its start-up (a worker
    # that owns partitions may still be opening its spider, and would sit out an outage then)
    beating = client.hlen("{" + key + "}:workers") >= len(procs)
    return commits >= judged and beating and holds_leases(client, key, procs)


def holds_leases(client: Any, key: str, procs: list[Any]) -> bool:
    """Every worker owns partitions (it is past its start-up) and one holds work (a worker may
    own none of a small site's hosts)."""
    return all(owned(client, key, p) for p in procs) and any(
        holds_work(client, key, p) for p in procs
    )


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
            procs, dirs, key = start_workers(
                tmp_path, server, f"redis://127.0.0.1:{redis.port}/0", client, 3
            )
            wait_until(lambda: working(client, key, procs), timeout=60)
            client.close()
            redis.process.kill()
            redis.process.wait(10)
            down_at = len(server.records)
            time.sleep(4)
            up_at = len(server.records)  # pages fetched while Redis was away: down_at..up_at
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
    # it in some worker if a page arrived while Redis was away (judged after it): on a loaded
    # machine the workers may have had none in hand then
    assert all(s["fleet heartbeat"] == 1 for s in seen), seen
    if up_at > down_at:
        assert any(s["shared near-duplicate store"] == 1 for s in seen), (seen, down_at, up_at)
    assert down_at < len(server.records)
    check_pages(server, results)


def test_a_page_is_judged_alone_once_redis_stays_away_past_the_wait(tmp_path: Path) -> None:
    """``REDIS_OUTAGE_WAIT`` 0.5 s, pages that take 2 s to answer and Redis away until a page
    met the outage and was scraped: the pages analysed past the wait are judged alone
    (``neardup/unjudged``, said when Redis is back), never lost, never a traceback."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    procs: list[Any] = []
    try:
        with slow_site(pages=4, delay=2.0) as server:
            client = redis.client()
            procs, dirs, key = start_workers(
                tmp_path,
                server,
                f"redis://127.0.0.1:{redis.port}/0",
                client,
                1,
                REDIS_OUTAGE_WAIT=0.5,
                TUNING={"read_ahead": 8, "heartbeat_interval": 0.5},
            )
            wait_until(lambda: working(client, key, procs), timeout=60)
            client.close()
            redis.process.kill()
            redis.process.wait(10)
            # Redis stays away until a page was judged alone (not for a time: a loaded
            # machine may analyse no page in it)
            wait_until(lambda: judged_alone_meanwhile(server, dirs[0]), timeout=120)
            redis = start_redis(root, port=redis.port, aof="always")
            results = [finish_crawl(p, d, timeout=240) for p, d in zip(procs, dirs, strict=True)]
    finally:
        for proc in procs:  # a failed wait leaves its worker waiting for Redis: not for long
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        redis.stop()
    (r,) = results
    assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
    check_lines(r)
    unjudged = r.stats.get("neardup/unjudged", 0)
    assert unjudged > 0, r.log[-3000:]
    said = re.search(
        r"Redis back for the shared near-duplicate store after [\d.]+s; (\d+) pages "
        r"judged alone",
        r.log,
    )
    assert said is not None and 0 < int(said.group(1)) <= unjudged
    check_pages(server, results)


def judged_alone_meanwhile(server: RoutedSiteServer, worker: Path) -> bool:
    """The near-duplicate store met the outage (a page's check found Redis gone: the line),
    and every page the site answered so far is scraped (each gives one item): that page's
    check is over, and with Redis away all along it gave up, so the page was judged alone."""
    log = (worker / "crawl.log").read_text(encoding="utf-8", errors="replace")
    if "Redis unreachable for the shared near-duplicate store" not in log:
        return False
    pages = sum(1 for r in list(server.records) if r.path != "/robots.txt")
    return log.count("Scraped from <") >= pages


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


# -- each component alone, against a real Redis killed and started again ---------------------

TEXT = "\n".join(f"line {i} of a page about harvesting saffron by hand, slowly" for i in range(40))


def lines(caplog: pytest.LogCaptureFixture, component: str) -> tuple[int, int]:
    text = caplog.text
    return (
        text.count(f"Redis unreachable for the {component}"),
        text.count(f"Redis back for the {component}"),
    )


def test_the_robots_cache_never_waits_and_sends_its_records_when_redis_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On the reactor: while Redis is away every call answers at once (a claim granted, no
    copy), a record fetched meanwhile is kept and sent once the probe finds Redis back."""
    caplog.set_level(logging.WARNING)
    redis = start_redis(tmp_path, aof="always")
    s = Settings({"REDIS_URL": f"redis://127.0.0.1:{redis.port}/0"})
    key = fresh_key()
    cache = RedisRobotsCache(redis_client(s, fail_fast=True), key)
    try:
        assert cache.claim("http://a.test", 60).claimed
        redis.process.kill()
        redis.process.wait(10)
        for i in range(50):
            assert cache.claim(f"http://b{i}.test", 60).claimed  # acting alone
            assert cache.get(f"http://b{i}.test") is None
            # the reactor never waits: answered while Redis is still away (the first call
            # met the refused connection and started the probe's thread; the others touch no
            # socket), every one of them counted in the "answered alone" line below
            assert cache.alone.outage.away
        record = RobotsRecord("http://b1.test", "rules", 200, 1.0, 2.0, "User-agent: *\n")
        cache.put(record)
        assert cache.get("http://b1.test") == record  # this worker's copy meanwhile
        redis = start_redis(tmp_path, port=redis.port, aof="always")
        wait_until(lambda: not cache.alone.outage.away, timeout=15)
        with redis.client() as c:  # sent by the probe, for every worker
            assert c.hexists("{" + key + "}:robots", "http://b1.test")
        assert cache.peek("http://a.test") is not None  # the claim made before is still there
    finally:
        cache.close()
        redis.stop()
    assert lines(caplog, "robots.txt cache") == (1, 1)
    assert "102 robots.txt look-ups answered alone" in caplog.text  # 50 claims, 51 gets, a put
    assert "Traceback" not in caplog.text


def test_a_check_waits_within_the_bound_then_judges_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A page checked while Redis restarts waits for it and gets the shared verdict; once Redis
    has been away longer than the wait, pages are judged alone at once (``unjudged``), and the
    next page after it is back is judged by the store again."""
    caplog.set_level(logging.WARNING)
    redis = start_redis(tmp_path, aof="always")
    key = fresh_key()
    client = redis_client(Settings({"REDIS_URL": f"redis://127.0.0.1:{redis.port}/0"}))
    detector = RedisNearDuplicateDetector(client, key, outage_wait=10)  # a crawl's client
    try:
        assert detector.check("http://a.test/1", TEXT).kind == "new"
        redis.process.kill()
        redis.process.wait(10)
        port = redis.port

        def restart() -> None:
            time.sleep(1.0)
            began.set()
            restarted.append(start_redis(tmp_path, port=port, aof="always"))

        began = threading.Event()

        restarted: list[Any] = []
        thread = threading.Thread(target=restart)
        thread.start()
        copy = detector.check("http://b.test/1", TEXT)  # waits out the restart
        assert began.is_set(), "the check returned only once Redis was being restarted"
        thread.join()
        redis = restarted[0]
        assert copy.kind == "exact" and copy.duplicate_of == "http://a.test/1"
        # away for longer than the wait: judged alone, at once
        detector.outage.wait = 0.3
        redis.process.kill()
        redis.process.wait(10)
        alone = [detector.check(f"http://c.test/{i}", TEXT) for i in range(5)]
        assert {d.kind for d in alone} == {"unjudged"} and detector.unjudged == 5
        assert all(d.fingerprint == copy.fingerprint and not d.is_duplicate for d in alone)
        # past the wait: no more waiting, the next page too is judged alone while Redis is away
        assert detector.check("http://c.test/5", TEXT).kind == "unjudged"
        assert detector.outage.away
        redis = start_redis(tmp_path, port=port, aof="always")
        wait_until(lambda: not detector.outage.away, timeout=15)
        again = detector.check("http://d.test/1", TEXT)
        assert again.kind == "exact" and again.duplicate_of == "http://a.test/1"
    finally:
        detector.close()
        redis.stop()
    assert lines(caplog, "shared near-duplicate store") == (2, 2)
    assert "6 pages judged alone so far (neardup/unjudged)" in caplog.text
    assert "Traceback" not in caplog.text


def test_a_store_that_lost_its_state_is_read_again(tmp_path: Path) -> None:
    """Redis restarted without persistence between two checks (nothing failed: redis-py
    reconnected at once): the worker's copies are ahead of the store; they are dropped and the
    decisions are those of a fresh detector, not an error per page."""
    redis = start_redis(tmp_path)
    key = fresh_key()
    detector = RedisNearDuplicateDetector(redis.client(), key)
    local = NearDuplicateDetector()
    try:
        texts = [TEXT.replace("saffron", f"crop{i}") for i in range(6)]
        for i, text in enumerate(texts):
            assert detector.check(f"http://a.test/{i}", text) == local.check(
                f"http://a.test/{i}", text
            )
        with redis.client() as c:
            c.flushall()
        local = NearDuplicateDetector()
        for i, text in enumerate(texts):
            assert detector.check(f"http://b.test/{i}", text) == local.check(
                f"http://b.test/{i}", text
            )
    finally:
        detector.close()
        redis.stop()


def test_components_ride_out_a_cluster_failover(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The master serving a crawl's slot killed, its replica promoted: the robots.txt cache
    answers alone meanwhile without waiting, a near-duplicate check waits and gets the shared
    verdict, a heartbeat that failed is sent in full after; one line going and one back each."""
    caplog.set_level(logging.WARNING)
    (tmp_path / "cluster").mkdir()
    cluster = start_cluster(tmp_path / "cluster", aof="always")
    s = Settings({"REDIS_URL": cluster.url})
    key = fresh_key()
    robots_cache = RedisRobotsCache(redis_client(s, fail_fast=True), key)
    detector = RedisNearDuplicateDetector(redis_client(s), key, outage_wait=30)
    fleet_client = redis_client(s, fail_fast=True)  # as the heartbeat makes its own
    fleet = Fleet(fleet_client, key, "w1")
    from crawler.backends.redis.outage import RedisOutage, RedisUnavailable

    beats = RedisOutage("fleet heartbeat", lambda: fleet_client.exists(fleet.keys.totals))
    try:
        assert detector.check("http://a.test/1", TEXT).kind == "new"
        beats.call(lambda: fleet.beat({"pages/ok": 1}, {"state": "running"}), wait=0)
        master = fleet_client.get_node_from_key("{" + key + "}:totals")
        node = next(n for n in cluster.live() if n.port == master.port)
        # replication is asynchronous: the test waits until the replica has what was written
        # (what a failover loses otherwise is the frontier's business: its WAIT setting)
        node_id = cluster.node_id(node)
        replica = next(
            n
            for n in cluster.live()
            for r in cluster.cluster_nodes()
            if r["master"] == node_id and r["address"] == n.address
        )
        with replica.client() as c:
            c.execute_command("READONLY")
            wait_until(
                lambda: (
                    c.exists("{" + key + "}:totals") and c.hget("{" + key + "}:nd:v", "seq") == b"1"
                ),
                timeout=10,
            )
        node.process.kill()  # as kill_master does, but the clients meet the dead master
        node.process.wait()
        assert robots_cache.claim("http://r.test", 60).claimed
        assert robots_cache.alone.outage.away  # answered alone, while the failover is under way
        with pytest.raises(RedisUnavailable):
            beats.call(lambda: fleet.beat({"pages/ok": 2}, {"state": "running"}), wait=0)
        copy = detector.check("http://b.test/1", TEXT)  # waits for the promotion
        assert copy.kind == "exact" and copy.duplicate_of == "http://a.test/1"
        cluster.wait_ok()
        wait_until(lambda: not (beats.away or robots_cache.alone.outage.away), timeout=30)
        beats.call(lambda: fleet.beat({"pages/ok": 3}, {"state": "running"}), wait=0)
        assert fleet.totals()["pages/ok"] == 3  # the failed beat's counts went with this one
    finally:
        beats.close()
        robots_cache.close()
        detector.close()
        fleet_client.close()
        cluster.stop()
    for component in ("robots.txt cache", "shared near-duplicate store", "fleet heartbeat"):
        assert lines(caplog, component) == (1, 1), component
    assert "Traceback" not in caplog.text


def test_the_dns_cache_and_the_address_budget_ride_out_a_restart(tmp_path: Path) -> None:
    """Host names on two addresses, resolved by a real DNS server, crawled by two workers
    while Redis (AOF ``always``) is killed with fetches in flight and started again 4 s later:
    the shared DNS cache and the per-address budget each say at most once that Redis went and
    once that it came back, no traceback, every page fetched once, and a fetch whose end could
    not be told to Redis does not hold its address past the outage (the crawl ends long before
    the lease TTL)."""
    names = [f"s{i}.farm.test" for i in range(8)]
    addresses = ["127.0.0.2", "127.0.0.3"]
    zone = {"names": {n: {"a": addresses[i % 2], "ttl": 300} for i, n in enumerate(names)}}
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    try:
        with (
            NamedSites(names, addresses, pages=6, latency=0.3) as sites,
            dns_server(tmp_path / "dns", zone) as dns,
        ):
            client = redis.client()
            url = f"redis://127.0.0.1:{redis.port}/0"
            key = fresh_key()
            dirs = [tmp_path / f"w{i}" for i in range(2)]
            extra = {"DNS_SERVERS": dns.address, "CLOSESPIDER_TIMEOUT": 200}
            procs = []
            for i, d in enumerate(dirs):
                d.mkdir()
                seeds = [sites.url(n) for n in names] if i == 0 else None
                procs.append(start_crawl(d, seeds=seeds, settings=settings(url, key, d, **extra)))
                if i == 0:
                    wait_until(lambda: client.hexists("{" + key + "}:meta", "layout"), timeout=60)
            # both workers past their start-up and holding leases (a worker still opening its
            # frontier when Redis goes is another case), both addresses fetching, some pages
            # behind them: fetches are in flight now
            wait_until(
                lambda: (
                    len({v.address for v in sites.visits[10:]}) == 2
                    and holds_leases(client, key, procs)
                ),
                timeout=60,
            )
            client.close()
            redis.process.kill()
            redis.process.wait(10)
            down_at = len(sites.visits)
            time.sleep(4)
            redis = start_redis(root, port=redis.port, aof="always")
            back = time.monotonic()
            results = [finish_crawl(p, d, timeout=240) for p, d in zip(procs, dirs, strict=True)]
    finally:
        redis.stop()
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
        assert r.stats["finish_reason"] == "finished", r.stats
        assert "Traceback" not in r.log, r.log[r.log.index("Traceback") - 2000 :][:6000]
        for component in ("address politeness", "DNS cache"):
            gone = r.log.count(f"Redis unreachable for the {component}")
            assert gone <= 1 and r.log.count(f"Redis back for the {component}") == gone
    assert down_at < len(sites.visits)
    pages = Counter((v.name, v.path) for v in sites.visits if v.path != "/robots.txt")
    assert set(pages) == {(n, p) for n in names for p in ["/", *(f"/p/{i}.html" for i in range(6))]}
    assert all(n == 1 for n in pages.values()), [k for k, n in pages.items() if n > 1]
    # once Redis is back (and the workers have met it again), one fetch at a time per address
    for address in addresses:
        later = sorted((v.start, v.end) for v in sites.visits if v.address == address
                       and v.start > back + 2)  # fmt: skip
        for (_, end), (start, _) in itertools.pairwise(later):
            assert start >= end - 0.01, address
