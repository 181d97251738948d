"""Several ``scrapy crawl`` workers on one Redis crawl one multi-host site as one polite crawler.

Real processes, a real ``redis-server`` started by the tests, a real multi-host site on
loopback; every verdict comes from the server's record of requests.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from crawler.frontier.urls import normalize_url
from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import finish_crawl, normalized, per_host, start_crawl
from tests.partition_support import held_urls, holds_work, owned, urls_out
from tests.redis_support import RedisServer, fresh_key, redis_server, start_redis  # noqa: F401

pytestmark = pytest.mark.integration

MIN_DELAY = 0.15
CRAWL_DELAY_HOST, CRAWL_DELAY = "127.0.0.3", 0.4
HOSTS = [f"127.0.0.{i}" for i in range(2, 8)]
# enough hosts that every worker of three owns some: they fill 13 of the 16 partitions, and
# each worker owns at least 5 (6/5/5)
MANY_HOSTS = HOSTS + [f"127.0.1.{i}" for i in range(1, 27)]
JOINED_WITHIN = 30.0  # seconds from a joiner's start to its first fetch, at most (generous)
HELD_AT_MOST = 150.0  # seconds the politeness test holds requests while a worker starts
# seconds a worker may take to finish its crawl: a deadline for a hang, not a speed (at a load
# of 40 on two cores a restart test's crawl took over 3 minutes)
FINISH_WITHIN = 600.0
# seconds a worker may take to start (Python, Scrapy, its checks): at a load of 25-35 on two
# cores, 30 s to write the crawl's layout and over 60 s to open a joiner's spider were seen
STARTUP = 180.0


def robots(ask: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    body = "User-agent: *\nDisallow: /private/\n"
    if ask.address == CRAWL_DELAY_HOST:
        body += f"Crawl-delay: {CRAWL_DELAY}\n"
    return 200, [("Content-Type", "text/plain")], body.encode()


def site(pages: int = 10, hosts: list[str] = HOSTS) -> RoutedSiteServer:
    graph = build_site(
        [HostSpec(h, pages=pages) for h in hosts], links_per_page=4, cross_host_links=1
    )
    server = RoutedSiteServer(graph)
    for host in hosts:
        server.route(host, "/robots.txt", robots)
    return server


def worker_settings(redis: RedisServer, key: str, tmp: Path, **extra: Any) -> dict[str, Any]:
    return {
        "USER_AGENT": f"crawler-bot/0.1 ({tmp.name})",  # the server's record names the worker
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
        "FRONTIER_REDIS_KEY": key,
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": MIN_DELAY,
        "FRONTIER_DELAY_FACTOR": 0,
        "TUNING": {"read_ahead": 2},
        "INDEX_PATH": tmp / "index.sqlite",  # one per worker: SQLite is not shared
        **extra,
    }


def spider_opened(directory: Path) -> bool:
    """Whether the worker logging in ``directory`` is past its start-up checks."""
    log = directory / "crawl.log"
    return log.exists() and "Spider opened" in log.read_text("utf-8", errors="replace")


def fetched_by(server: RoutedSiteServer, directory: Path) -> bool:
    """Whether the worker logging in ``directory`` has fetched a page (its user agent)."""
    agent = f"({directory.name})"
    return any(
        r.path != "/robots.txt" and r.headers.get("User-Agent", "").endswith(agent)
        for r in server.records
    )


def who_fetched(records: list[Any], urls: list[str], down_at: int) -> list[str]:
    """For a failure message: each fetch of ``urls`` as its record's place in the server's
    record (``*`` once Redis was down: at or after ``down_at``), worker and start time."""
    wanted = set(urls)
    return [
        f"{u} #{i}{'*' if i >= down_at else ''} {r.headers.get('User-Agent', '?')} {r.start:.2f}"
        for i, r in enumerate(records)
        for u in normalized([r])
        if u in wanted
    ]


def wait_until(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def start_workers(
    tmp_path: Path,
    server: RoutedSiteServer,
    redis: RedisServer,
    n: int,
    joiners_first: bool = False,
    **extra: Any,
) -> tuple[list[Any], list[Path], str]:
    """The first worker gets the seeds; the others join with none, once the crawl exists (or,
    ``joiners_first``, before it: they wait for it, as workers started together do)."""
    key = fresh_key()
    client = redis.client()
    dirs = [tmp_path / f"w{i}" for i in range(n)]
    for d in dirs:
        d.mkdir()
    joiners = []
    if joiners_first:
        joiners = [
            start_crawl(d, settings=worker_settings(redis, key, d, **extra)) for d in dirs[1:]
        ]
        wait_until(lambda: client.hlen("{" + key + "}:workers") >= n - 1, timeout=STARTUP)
    procs = [
        start_crawl(
            dirs[0], seeds=server.seeds(), settings=worker_settings(redis, key, dirs[0], **extra)
        )
    ]
    if joiners_first:
        return procs + joiners, dirs, key
    wait_until(lambda: client.hexists("{" + key + "}:meta", "layout"), timeout=STARTUP)
    procs += [
        start_crawl(d, settings=worker_settings(redis, key, d, **extra)) for d in dirs[1:]
    ]
    return procs, dirs, key


def finish_all(procs: list[Any], dirs: list[Path]) -> list[Any]:
    """Each worker's result, once it has finished."""
    return [finish_crawl(p, d, timeout=FINISH_WITHIN) for p, d in zip(procs, dirs, strict=True)]


def hold_until_every_worker_opened(
    server: RoutedSiteServer, tmp_path: Path, workers: int, after: int = 20
) -> threading.Event:
    """Hold page requests past the first ``after`` until every worker's log says its spider
    opened (at most ``HELD_AT_MOST``): on a loaded machine a joining worker takes seconds to
    start, and a crawl of this size may be over before it can take part."""
    opened, lock, seen = threading.Event(), threading.Lock(), [0]
    respond = server.respond
    logs = [tmp_path / f"w{i}" / "crawl.log" for i in range(workers)]

    def all_opened() -> bool:
        return all(p.exists() and "Spider opened" in p.read_text(errors="replace") for p in logs)

    def held(handler: Any, spec: Any, default: Any) -> Any:
        with lock:
            seen[0] += 1
            wait = seen[0] > after and not opened.is_set()
        deadline = time.monotonic() + HELD_AT_MOST
        while wait and not opened.is_set() and time.monotonic() < deadline:
            if all_opened():
                opened.set()
            elif server.stopping.wait(0.1):
                break
        return respond(handler, spec, default)

    server.respond = held  # type: ignore[method-assign]
    return opened


def check_polite(records: list[Any]) -> None:
    for host, recs in per_host(records).items():
        wanted = CRAWL_DELAY if host == CRAWL_DELAY_HOST else MIN_DELAY
        for prev, nxt in pairwise(recs):
            assert nxt.start >= prev.end - 1e-3, f"{host}: two requests at once"
            assert nxt.start - prev.end >= wanted - 0.01, (host, nxt.start - prev.end)


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_crawl_one_site_once_and_politely(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
    workers: int,
) -> None:
    with site(hosts=MANY_HOSTS) as server:
        # three workers started the other way round: the two without seeds come up first, find
        # the shared crawl empty and wait for it (TUNING's join_wait) instead of ending
        opened = hold_until_every_worker_opened(server, tmp_path, workers)
        # a request held that long must not time out and be sent again (a page twice)
        extra = {"DOWNLOAD_TIMEOUT": HELD_AT_MOST + 30}
        procs, dirs, _ = start_workers(
            tmp_path, server, redis_server, workers, workers == 3, **extra
        )
        for d in dirs[1:]:  # each joiner, once started (and the crawl has work), fetches
            wait_until(lambda d=d: spider_opened(d) and fetched_by(server, dirs[0]), STARTUP)
            wait_until(lambda d=d: fetched_by(server, d), timeout=JOINED_WITHIN)
        results = finish_all(procs, dirs)
        records = server.records
        wanted = server.graph.reachable(server.seeds())
    assert opened.is_set(), "a worker never opened its spider"
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
        assert r.stats["finish_reason"] == "finished"
    fetched = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched), sorted(allowed - set(fetched))[:5]
    twice = [u for u, n in Counter(fetched).items() if n > 1]
    assert not twice, twice
    robots_fetches = Counter(r.host for r in records if r.path == "/robots.txt")
    assert robots_fetches == dict.fromkeys(MANY_HOSTS, 1)
    check_polite(records)
    # every worker took part: the ones that joined without seeds got their share of the work
    scraped = [r.stats.get("item_scraped_count", 0) for r in results]
    assert all(n > 0 for n in scraped), scraped
    assert sum(scraped) <= len(set(fetched))  # one item per page, from whichever worker
    for r in results[1:]:  # joining without seeds is how a worker joins: no error for it
        assert "No valid seeds" not in r.log and "No seeds of its own" in r.log
        if workers == 3:  # started before the crawl existed: they wait for it
            assert "holds no URL yet: waiting" in r.log


def test_a_silent_workers_leases_come_back_long_before_their_ttl(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A worker killed while holding leases, with a lease TTL of 10 minutes: its partitions'
    leases (``PARTITION_TTL``, 10 s) run out, the other worker takes them over with the URLs
    the dead one held and finishes the crawl with every page fetched, minutes before the
    leases' TTL could have brought them back."""
    extra = {"DOWNLOAD_TIMEOUT": 2, "RETRY_TIMES": 0, "FRONTIER_LEASE_TTL": 600,
             "TUNING": {"read_ahead": 2, "heartbeat_interval": 0.5}}  # fmt: skip
    with site(pages=30) as server:
        procs, dirs, key = start_workers(tmp_path, server, redis_server, 2, **extra)
        client = redis_server.client()
        wait_until(lambda: holds_work(client, key, procs[1]), timeout=STARTUP)
        procs[1].send_signal(signal.SIGKILL)  # dies holding its leases
        procs[1].wait(10)
        # well inside the TTL (600 s): only the takeover can let the crawl end by then
        survivor = finish_crawl(procs[0], dirs[0], timeout=FINISH_WITHIN)
        records = server.records
        wanted = server.graph.reachable(server.seeds())
        leases_left = urls_out(client, key)
    assert survivor.returncode == 0, survivor.log[-3000:]
    assert survivor.stats["finish_reason"] == "finished"
    assert "taken over from its last owner" in survivor.log
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(normalized(records)), sorted(allowed - set(normalized(records)))[:5]
    assert leases_left == 0
    check_polite(records)


def test_a_killed_worker_loses_nothing_and_a_stopped_one_hands_back_at_once(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # no retry: a fetch the server saw is never sent again by the worker that made it. The
    # dead worker's URLs come back with its partitions (their leases' TTL), whatever the
    # frontier's lease TTL: left at its default, so a live worker stalled a few seconds on a
    # loaded machine does not see its own leases expire and fetch their URLs again
    extra = {"DOWNLOAD_TIMEOUT": 20, "RETRY_TIMES": 0}
    # long enough that the two joining workers hold work before it ends, even when they
    # start slowly on a loaded machine
    with site(pages=14, hosts=MANY_HOSTS) as server:
        procs, dirs, key = start_workers(tmp_path, server, redis_server, 3, **extra)
        client = redis_server.client()
        # mid-crawl, both joiners holding work: one is killed, the other stopped
        victim, other = 1, 2
        wait_until(lambda: all(holds_work(client, key, procs[i]) for i in (victim, other)), STARTUP)
        procs[victim].send_signal(signal.SIGKILL)  # dies holding whatever it held
        procs[victim].wait(10)
        dead_held = {normalize_url(u)[0] for u in held_urls(client, key, procs[victim])}
        # a request the dead worker sent just before dying can still have its request line
        # read by the server's thread a little later, on a loaded machine
        killed_at = time.monotonic() + 1.0
        # a clean stop: its downloads cut short go back (the server may have seen them)
        cut = {normalize_url(u)[0] for u in held_urls(client, key, procs[other])}
        procs[other].send_signal(signal.SIGINT)
        stopped = finish_crawl(procs[other], dirs[other], timeout=FINISH_WITHIN)
        held_after_stop = owned(client, key, procs[other])
        first = finish_crawl(procs[0], dirs[0], timeout=FINISH_WITHIN)
        records = server.records
        wanted = server.graph.reachable(server.seeds())
        leases_left = urls_out(client, key)
    assert first.returncode == 0 and first.stats["finish_reason"] == "finished", first.log[-3000:]
    assert stopped.returncode == 0, stopped.log[-3000:]
    assert stopped.stats["finish_reason"] == "shutdown"
    fetched = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched), sorted(allowed - set(fetched))[:5]
    # only what the dead worker held may have been fetched twice: a fetch in flight (one per
    # host) or a page fetched whose item and links had not yet left its pipelines (the URL is
    # forgotten only then: at least once, never lost), and each was first fetched before the
    # kill
    twice = {u for u, n in Counter(fetched).items() if n > 1}
    assert twice <= dead_held | cut, sorted(twice - dead_held - cut)
    first_fetch = {}
    for r in sorted(records, key=lambda r: r.start):
        first_fetch.setdefault(normalized([r])[0] if r.path != "/robots.txt" else "", r.start)
    assert all(first_fetch[u] < killed_at for u in twice)
    # the stopped worker held nothing once it had stopped; the crawl ended with none open
    assert held_after_stop == []
    assert leases_left == 0
    check_polite(records)


def test_an_unreachable_robots_txt_is_held_for_every_worker(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A robots.txt answering 503 is fetched once per retry period for the whole crawl, not
    once per worker: the origin's state (fetching, unreachable until T, failures) is shared."""
    retry = 1.0
    flaky, down = "127.0.0.4", "127.0.0.5"
    # TUNING replaces worker_settings' table: its read_ahead kept
    extra = {"TUNING": {"read_ahead": 2, "robots_retry_delay": retry, "robots_retry_times": 2}}
    asked: Counter[str] = Counter()

    def failing(ask: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        asked[ask.address] += 1
        if ask.address == down or asked[ask.address] <= 2:  # flaky: 503 twice, then the file
            return 503, [("Content-Type", "text/plain")], b"busy"
        return robots(ask)

    with site() as server:
        for host in (flaky, down):
            server.route(host, "/robots.txt", failing)
        procs, dirs, _ = start_workers(tmp_path, server, redis_server, 2, **extra)
        results = finish_all(procs, dirs)
        records = server.records
        wanted = server.graph.reachable(server.seeds())
    for r in results:
        # a worker whose partitions held only the unreachable host (a loaded machine can
        # leave it so) asked for pages that all failed; the crawl did not: 0 for every worker
        assert r.returncode == 0, r.log[-3000:]
        assert r.stats["finish_reason"] == "finished"
        assert r.stats["fleet/pages"] > 0
    for host in (flaky, down):
        fetches = sorted(r.start for r in records if r.host == host and r.path == "/robots.txt")
        # the first try and two retries, 1 s then 2 s apart, whichever worker made them
        assert len(fetches) == 3, (host, fetches)
        gaps = [b - a for a, b in pairwise(fetches)]
        assert gaps[0] >= retry - 0.05 and gaps[1] >= 2 * retry - 0.05, (host, gaps)
    fetched = normalized(records)
    twice = [u for u, n in Counter(fetched).items() if n > 1]
    assert not twice, twice
    assert not [r for r in records if r.host == down and r.path != "/robots.txt"]
    # the flaky host's pages all came, once its third try read the file
    flaky_pages = {u for u in wanted if f"//{flaky}:" in u and "/private/" not in u}
    assert flaky_pages and flaky_pages <= set(fetched), sorted(flaky_pages - set(fetched))[:5]
    third = max(r.start for r in records if r.host == flaky and r.path == "/robots.txt")
    assert all(r.start > third for r in records if r.host == flaky and r.path != "/robots.txt")
    # each worker counts only the fetches it made: 1 per good host, 3 per failing one
    robots_sent = sum(r.stats.get("robotstxt/request_count", 0) for r in results)
    assert robots_sent == len(HOSTS) - 2 + 6


def test_a_stop_while_the_crawl_starts_waits_for_it_and_writes_its_stats(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """SIGINT while the spider and the Redis frontier are opening: Scrapy's own stop would
    stop the reactor under them (no stats, read-ahead leases left to expire); ours waits for
    the engine, then closes the crawl as "shutdown" with every lease handed back."""
    key = fresh_key()
    with site() as server:
        proc = start_crawl(
            tmp_path, seeds=server.seeds(), settings=worker_settings(redis_server, key, tmp_path)
        )
        log = tmp_path / "crawl.log"

        def logged(text: str) -> bool:
            return log.exists() and text in log.read_text(errors="replace")

        # Redis stops answering while the worker opens its spider and frontier, so the SIGINT
        # surely comes after Scrapy's handlers are in place and before the engine runs
        wait_until(lambda: logged("Enabled item pipelines"), timeout=STARTUP)
        pauser = redis_server.client()
        pauser.execute_command("CLIENT", "PAUSE", "2500", "ALL")
        wait_until(lambda: logged("Spider opened"), timeout=STARTUP)
        proc.send_signal(signal.SIGINT)
        result = finish_crawl(proc, tmp_path, timeout=FINISH_WITHIN)
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["finish_reason"] == "shutdown"
    assert owned(redis_server.client(), key, proc) == []  # every partition handed back


@pytest.mark.parametrize("down", [4.0, 30.0])
def test_workers_ride_out_a_redis_restart_and_lose_nothing(tmp_path: Path, down: float) -> None:
    """Redis (AOF on, ``appendfsync always``) is killed with SIGKILL mid-crawl and started
    again on the same files ``down`` seconds later (a restart; an outage of 30 s): the workers
    say so once, keep the leases and the work in hand, go on when it is back, and the crawl
    completes with every page fetched once."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    try:
        with site(pages=8, hosts=MANY_HOSTS) as server:
            procs, dirs, key = start_workers(tmp_path, server, redis, 2)
            client = redis.client()
            # every worker past its start-up checks, holding work
            wait_until(lambda: all(holds_work(client, key, p) for p in procs), timeout=STARTUP)
            client.close()
            redis.process.kill()
            redis.process.wait(10)
            down_at = len(server.records)
            time.sleep(down)
            redis = start_redis(root, port=redis.port, aof="always")
            results = finish_all(procs, dirs)
            records = server.records
            wanted = server.graph.reachable(server.seeds())
    finally:
        redis.stop()
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
        assert r.stats["finish_reason"] == "finished"
        assert r.log.count("Shared frontier unreachable") <= 1, r.log[-3000:]
        assert "Error downloading" not in r.log  # no page failed for want of Redis
    assert any("Shared frontier back after" in r.log for r in results)
    assert down_at < len(records)  # the crawl went on after the restart
    scraped = [r.stats.get("item_scraped_count", 0) for r in results]
    assert all(n > 0 for n in scraped), scraped  # every worker took part
    fetched = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched), sorted(allowed - set(fetched))[:5]
    twice = [u for u, n in Counter(fetched).items() if n > 1]
    assert not twice, who_fetched(records, twice, down_at)
    # Known gap: a worker that meets a new origin while Redis is away cannot read the shared
    # robots.txt state and fetches robots.txt itself, directly, just before the page that
    # asked (as stock Scrapy does); the pages themselves keep the politeness delay.
    check_polite([r for r in records if r.path != "/robots.txt"])
