"""A worker whose Redis is away keeps its reactor running (issue 37).

Scrapy's scheduler runs on the reactor thread: a call there that waits for the shared frontier
waits as long as Redis is away, and meanwhile nothing runs (no SIGINT, no download, no progress
line). Real ``scrapy crawl`` workers and a real ``redis-server`` killed with SIGKILL (and
started again on its files): a site whose pages embed requisites (each claimed in the shared
seen-set when its page is parsed) and answer slowly, so that a page is in flight when Redis goes
and is parsed while it is away. And the frontier opened while Redis is away, in-process.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.frontier import Entry
from tests.crawling import finish_crawl, start_crawl, write_site
from tests.redis_support import RedisServer, fresh_key, start_redis
from tests.test_redis_crawl import wait_until

pytestmark = pytest.mark.integration

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
PAGES = 4  # per host, each with a stylesheet of the host's and an image of its own
PAGE_DELAY = 2.0  # seconds a page takes to answer: one is in flight when Redis goes
OUTAGE_WAIT = 1.0  # REDIS_OUTAGE_WAIT: the other Redis users give up waiting soon
CLOSE_WAIT = 10.0  # BufferedFrontier.close's wait for its worker
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


@contextmanager
def slow_pages() -> Iterator[tuple[list[int], list[tuple[str, str]]]]:
    """One server per host on one port each; yields the ports and the (host, path) asked, in
    order of arrival (a page is recorded when asked, answered ``PAGE_DELAY`` later)."""
    asked: list[tuple[str, str]] = []
    servers = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            host = self.server.server_address[0]
            asked.append((host, self.path))
            if self.path == "/robots.txt":
                kind, body = "text/plain", b"User-agent: *\nAllow: /\n"
            elif self.path == "/s.css":
                kind, body = "text/css", b"body { color: black }"
            elif self.path.startswith("/img-"):
                kind, body = "image/png", PNG
            elif re.fullmatch(r"/(p\d+)?", self.path):
                n = int(self.path[2:] or 0)
                link = f'<a href="/p{n + 1}">next</a>' if n + 1 < PAGES else ""
                kind = "text/html; charset=utf-8"
                body = (
                    f'<html><head><title>Page {n} of {host}</title><link rel="stylesheet" '
                    f'href="/s.css"></head><body><p>Page {n} of {host}, with words enough to '
                    f'be a page of its own.</p><img src="/img-{n}.png">{link}</body></html>'
                ).encode()
                threading.Event().wait(PAGE_DELAY)
            else:
                kind, body = "", b""
            self.send_response(200 if kind else 404)
            self.send_header("Content-Type", kind or "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    for host in HOSTS:
        server = ThreadingHTTPServer((host, 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield [s.server_address[1] for s in servers], asked
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def is_page(path: str) -> bool:
    return path == "/" or re.fullmatch(r"/p\d+", path) is not None


def start_worker(tmp_path: Path, redis: RedisServer, ports: list[int], login: str = "") -> Any:
    sites = tmp_path / "sites"
    write_site(sites, "archive", "[requisites]\nfetch = true\n")
    settings = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://{login}127.0.0.1:{redis.port}/0",
        "FRONTIER_REDIS_KEY": fresh_key(),
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.1,
        "FRONTIER_DELAY_FACTOR": 0,
        "REDIS_OUTAGE_WAIT": OUTAGE_WAIT,
        "TUNING": {"read_ahead": 4, "heartbeat_interval": 0.5, "progress_interval": 1},
    }
    seeds = [f"http://{h}:{p}/" for h, p in zip(HOSTS, ports, strict=True)]
    return start_crawl(tmp_path, "archive", seeds=seeds, sites_dir=sites, settings=settings)


def kill_once_a_page_is_in_flight(redis: RedisServer, asked: list[tuple[str, str]]) -> None:
    wait_until(lambda: any(is_page(path) for _, path in list(asked)), timeout=60)
    redis.process.kill()
    redis.process.wait(10)


def reactor_runs_without_redis(log: Path) -> bool:
    """Since the frontier found Redis away, the page in flight then was scraped (its
    requisites were claimed) and the progress line came three times (once a second): the
    reactor runs. A reactor waiting for Redis logs neither."""
    text = log.read_text("utf-8", errors="replace") if log.exists() else ""
    at = text.find("Shared frontier unreachable")
    if at < 0:
        return False
    after = text[at:]
    return "Scraped from <200 http://" in after and after.count("] INFO: Crawled ") >= 3


def test_sigint_while_redis_is_away_ends_the_worker_cleanly(tmp_path: Path) -> None:
    """Redis killed while a page is in flight and never started again: the worker says so
    once, goes on (the page is parsed, its requisites claimed, the progress line logged), and
    a SIGINT then ends it, cleanly (no traceback, "shutdown", stats written), within what its
    settings allow: the last heartbeat waits REDIS_OUTAGE_WAIT from the outage's start, the
    frontier's worker CLOSE_WAIT, a download in flight is cut."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    try:
        with slow_pages() as (ports, asked):
            proc = start_worker(tmp_path, redis, ports)
            kill_once_a_page_is_in_flight(redis, asked)
            wait_until(lambda: reactor_runs_without_redis(tmp_path / "crawl.log"), timeout=90)
            proc.send_signal(signal.SIGINT)
            # generous: the bound is OUTAGE_WAIT + CLOSE_WAIT + a page's PAGE_DELAY
            result = finish_crawl(proc, tmp_path, timeout=10 * (OUTAGE_WAIT + CLOSE_WAIT))
    finally:
        redis.stop()
    log = result.log
    assert result.returncode == 0, log[-3000:]
    assert result.stats["finish_reason"] == "shutdown"
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    assert log.count("Received SIGINT") == 1
    assert log.count("Shared frontier unreachable") == 1
    assert log.count("Shared frontier still away at close") <= 1
    assert "Shared frontier back" not in log
    assert result.stats["requisites/found"] > 0


def test_a_worker_rides_out_redis_going_away_and_loses_nothing(tmp_path: Path) -> None:
    """Redis killed while a page is in flight, started again on its files once the worker went
    on without it: one line going and one back, the crawl completes, every page and requisite
    fetched once."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    try:
        with slow_pages() as (ports, asked):
            proc = start_worker(tmp_path, redis, ports)
            kill_once_a_page_is_in_flight(redis, asked)
            wait_until(lambda: reactor_runs_without_redis(tmp_path / "crawl.log"), timeout=90)
            redis = start_redis(root, port=redis.port, aof="always")
            result = finish_crawl(proc, tmp_path, timeout=240)
    finally:
        redis.stop()
    log = result.log
    assert result.returncode == 0, log[-3000:]
    assert result.stats["finish_reason"] == "finished"
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    assert log.count("Shared frontier unreachable") == 1
    assert log.count("Shared frontier back after") == 1
    fetched = Counter((host, path) for host, path in asked if path != "/robots.txt")
    wanted = {(h, p) for h in HOSTS for n in range(PAGES)
              for p in ("/" if n == 0 else f"/p{n}", f"/img-{n}.png")}
    wanted |= {(h, "/s.css") for h in HOSTS}
    assert set(fetched) == wanted, sorted(set(fetched) ^ wanted)
    assert all(n == 1 for n in fetched.values()), fetched
    assert result.stats["pages/ok"] == len(HOSTS) * PAGES
    assert result.stats["requisites/fetched"] == len(HOSTS) * (PAGES + 1)


def logged(tmp_path: Path, text: str) -> bool:
    log = tmp_path / "crawl.log"
    return log.exists() and text in log.read_text("utf-8", errors="replace")


def test_a_worker_started_while_redis_is_down_waits_and_crawls_once_it_is_up(
    tmp_path: Path,
) -> None:
    """Started while Redis is down (before the crawl, no reactor yet): one line, and the
    worker waits; Redis started: the checks run, the crawl completes, every page once."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root, aof="always")
    redis.process.kill()
    redis.process.wait(10)
    try:
        with slow_pages() as (ports, asked):
            proc = start_worker(tmp_path, redis, ports)
            wait_until(lambda: logged(tmp_path, "waiting for it"), timeout=60)
            assert not asked and proc.poll() is None
            redis = start_redis(root, port=redis.port, aof="always")
            result = finish_crawl(proc, tmp_path, timeout=240)
    finally:
        redis.stop()
    log = result.log
    assert result.returncode == 0, log[-3000:]
    assert result.stats["finish_reason"] == "finished"
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    assert log.count("is not reachable") == 1 and log.count("is there after") == 1
    pages = Counter((h, p) for h, p in asked if is_page(p))
    assert len(pages) == len(HOSTS) * PAGES and set(pages.values()) == {1}, pages


def test_sigint_while_waiting_for_redis_at_start_ends_the_worker_in_one_line(
    tmp_path: Path,
) -> None:
    """SIGINT while the worker waits for Redis before its crawl: it ends at once, one line,
    no traceback, the password nowhere."""
    root = tmp_path / "redis"
    root.mkdir()
    redis = start_redis(root)
    redis.stop()
    with slow_pages() as (ports, asked):
        proc = start_worker(tmp_path, redis, ports, login=":s3cret-pw@")
        wait_until(lambda: logged(tmp_path, "waiting for it"), timeout=60)
        proc.send_signal(signal.SIGINT)
        result = finish_crawl(proc, tmp_path, timeout=60)
    log = result.log
    assert result.returncode == 2, log[-3000:]
    assert "Traceback" not in log and "s3cret-pw" not in log, log[-3000:]
    assert "refused: stopped while waiting for Redis at redis://***@127.0.0.1:" in log
    assert not asked


# -- the frontier opened while Redis is away, in-process ---------------------------------------


def test_the_frontier_opens_at_once_and_once_redis_is_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Opening the Redis frontier while Redis is away returns at once (no round trip on the
    caller's thread): the crawl has work meanwhile (it waits), what it queues is kept, and
    once Redis is started the frontier opens by itself and serves it."""
    caplog.set_level(logging.INFO)
    redis = start_redis(tmp_path, aof="always")
    port = redis.port
    redis.process.kill()
    redis.process.wait(10)
    settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{port}/0", "REDIS_CLUSTER": "no"})
    frontier: Any = RedisFrontierStore(settings, fresh_key()).open_frontier()
    try:
        entry = Entry("http://h0.test/a", "h0.test")
        frontier.add(entry)
        assert frontier.next() is None
        assert frontier.has_work(0) and not frontier.refused
        wait_until(lambda: "Shared frontier unreachable" in caplog.text, timeout=30)
        redis = start_redis(tmp_path, port=port, aof="always")
        wait_until(lambda: lease_of(frontier) is not None, timeout=60)
    finally:
        frontier.close()
        redis.stop()
    assert caplog.text.count("Shared frontier unreachable") == 1
    assert caplog.text.count("Shared frontier back after") == 1
    assert "Frontier: Redis at" in caplog.text


def lease_of(frontier: Any) -> Any:
    lease = frontier.next()
    if lease is not None:
        assert lease.entry.url == "http://h0.test/a"
    return lease


def test_a_crawl_stored_by_another_layout_is_refused_at_opening(tmp_path: Path) -> None:
    """A check that fails at opening (not Redis away): said in ``refused``, no work."""
    redis = start_redis(tmp_path)
    key = fresh_key()
    try:
        with redis.client() as client:
            client.hset("{" + key + "}:meta", "layout", "0")
        settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{redis.port}/0"})
        frontier: Any = RedisFrontierStore(settings, key).open_frontier()
        try:
            wait_until(lambda: bool(frontier.refused), timeout=30)
            assert "stored by another version" in frontier.refused
            assert not frontier.has_work(300)
        finally:
            frontier.close()
    finally:
        redis.stop()


def test_a_call_redis_refuses_is_logged_from_the_frontiers_worker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A call Redis refuses (not Redis away: here a write refused for want of memory) is
    logged by the frontier's worker itself, so it is said even with no reactor running (a
    frontier closed after the crawl's reactor stopped, a tool, a test)."""
    caplog.set_level(logging.INFO)
    redis = start_redis(tmp_path)
    settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{redis.port}/0"})
    frontier: Any = RedisFrontierStore(settings, fresh_key()).open_frontier()
    try:
        frontier.add(Entry("http://h0.test/a", "h0.test"))
        assert frontier.flush(30)
        with redis.client() as client:
            client.config_set("maxmemory", "1")  # (noeviction: every write refused)
        frontier.add_many([Entry(f"http://h{i}.test/b", f"h{i}.test") for i in range(1, 9)])
        wait_until(lambda: "Redis frontier call failed" in caplog.text, timeout=30)
        with redis.client() as client:
            client.config_set("maxmemory", "0")
    finally:
        frontier.close()
        redis.stop()
    assert "maxmemory" in caplog.text
    assert "Shared frontier unreachable" not in caplog.text
