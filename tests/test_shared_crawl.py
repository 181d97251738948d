"""Two Redis workers crawl one site with a mirror host: near-duplicates are caught across
workers with the in-process detector's verdicts, and the index and crawl database are shared
(PostgreSQL) or kept per worker and merged by ``scrapy search`` (SQLite in one directory).

Real ``scrapy crawl`` processes, a real ``redis-server``, a real PostgreSQL database, and the
loopback site of ``tests/test_content_crawl.py`` (hosts A and B serve the same pages).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crawler.content.neardup import NearDuplicateDetector
from tests.crawling import PROJECT, CrawlResult, finish_crawl, start_crawl
from tests.pg_support import pg_url  # noqa: F401
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_content_crawl import HOST_A, HOST_B, _bind_both, _Site

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def site_port() -> Iterator[int]:
    site = _Site()
    first, second = _bind_both(site)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (first, second)]
    for t in threads:
        t.start()
    yield first.server_address[1]
    for s in (first, second):
        s.shutdown()
        s.server_close()


def two_workers(
    tmp: Path, port: int, redis: RedisServer, *, one_after_the_other: bool = False, **extra: Any
) -> tuple[list[CrawlResult], str]:
    """Run two workers of one crawl to the end.

    Together (the default): both start at once with both seeds and share both hosts. One
    after the other: the first crawls host A alone, then
    the second crawls its mirror B, so every mirrored page is fetched by the other worker.
    """
    key = fresh_key()
    settings = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
        "FRONTIER_REDIS_KEY": key,
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.1,
        "FRONTIER_DELAY_FACTOR": 0,
        "TUNING": {"read_ahead": 1, "idle_horizon": 2},
        "CLOSESPIDER_TIMEOUT": 90,
        **extra,
    }
    dirs = [tmp / "w0", tmp / "w1"]
    for d in dirs:
        d.mkdir(parents=True)
    a, b = f"http://{HOST_A}:{port}/", f"http://{HOST_B}:{port}/"
    if one_after_the_other:
        first = finish_crawl(start_crawl(dirs[0], seeds=[a], settings=settings), dirs[0], 150)
        second = finish_crawl(start_crawl(dirs[1], seeds=[b], settings=settings), dirs[1], 150)
        results = [first, second]
    else:
        # both started at once with the seeds (the shared seen-set takes each once), so both
        # are crawling from the start even on a loaded machine
        procs = [start_crawl(d, seeds=[a, b], settings=settings) for d in dirs]
        results = [finish_crawl(p, d, timeout=150) for p, d in zip(procs, dirs, strict=True)]
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
    return results, key


def pages(results: list[CrawlResult]) -> dict[str, tuple[int, dict[str, Any]]]:
    """URL -> (worker, item) of every page item."""
    return {i["url"]: (n, i) for n, r in enumerate(results) for i in r.items if i.get("url")}


def check_mirrors_flagged(results: list[CrawlResult], port: int) -> int:
    """Each page and its mirror: exactly one is flagged, as a duplicate of the other, whichever
    worker fetched which. Returns how many pairs two different workers fetched."""
    found = pages(results)
    split = 0
    for path in [f"/page/{i}.html" for i in range(8)]:
        a, b = f"http://{HOST_A}:{port}{path}", f"http://{HOST_B}:{port}{path}"
        assert a in found and b in found, path
        (wa, ia), (wb, ib) = found[a], found[b]
        flagged = [i for i in (ia, ib) if i.get("duplicate_of")]
        assert len(flagged) == 1, (path, ia.get("duplicate_of"), ib.get("duplicate_of"))
        assert flagged[0]["duplicate_of"] == (b if flagged[0] is ia else a)
        split += wa != wb
    return split


def check_same_as_one_detector(results: list[CrawlResult]) -> None:
    """The pages in the order they were judged (the first worker's, then the second's, each
    crawling one host with one request at a time) through one in-process detector: the same
    verdict on every item as the shared index gave, as the pipeline asks it (main text and
    title)."""
    local = NearDuplicateDetector()
    judged = 0
    for r in results:
        for item in r.items:
            if item.get("content_fingerprint") is None:
                continue
            url = item.get("final_url") or item["url"]
            d = local.check(url, item.get("main_text") or "", add=not item.get("noindex"),
                            title=item.get("title") or None)
            verdict = (item["content_fingerprint"], item.get("duplicate_of"),
                       item.get("similarity"))
            assert verdict == (d.fingerprint, d.duplicate_of, d.similarity), url
            judged += 1
    assert judged >= 20


def search(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "search", "--json", "-n", "50", *args],
        cwd=PROJECT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def a_page_of_each_worker(results: list[CrawlResult]) -> list[dict[str, Any]]:
    chosen = []
    for r in results:
        articles = [
            i for i in r.items if i.get("title") and '"' not in i["title"]
        ]
        assert articles, "a worker fetched no page"
        chosen.append(articles[0])
    return chosen


def found(item: dict[str, Any], hits: list[dict[str, Any]]) -> bool:
    """The page is a result, or the alias (a duplicate) of one."""
    return any(item["url"] == h["url"] or item["url"] in h["aliases"] for h in hits)


def test_two_workers_in_one_directory_without_postgres(
    tmp_path: Path,
    site_port: int,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Two crawl processes at once in one directory, same index and crawl database paths:
    each writes its own SQLite files beside the other's (no waiting on a lock), and
    ``scrapy search`` reads both. (Each crawls its own host, so both surely write pages.)"""
    shared = tmp_path / "shared"
    dirs = [tmp_path / "w0", tmp_path / "w1"]
    procs = []
    for d, host in zip(dirs, (HOST_A, HOST_B), strict=True):
        d.mkdir()
        settings = {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
            "FRONTIER_REDIS_KEY": fresh_key(),
            "ALLOW_PRIVATE_ADDRESSES": True,
            "FRONTIER_MIN_DELAY": 0.3,  # a few seconds each: the two overlap
            "FRONTIER_DELAY_FACTOR": 0,
            "TUNING": {"idle_horizon": 2},
            "INDEX_PATH": shared / "index.sqlite",
            "CRAWLDB_PATH": shared / "crawldb.sqlite",
            "RECRAWL_INTERVAL": 3600,
        }
        procs.append(start_crawl(d, seeds=[f"http://{host}:{site_port}/"], settings=settings))
    results = [finish_crawl(p, d, timeout=150) for p, d in zip(procs, dirs, strict=True)]
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
    assert (shared / "index.w1.sqlite").exists() and (shared / "crawldb.w1.sqlite").exists()
    assert not [r for r in results if "database is locked" in r.log]
    for item in a_page_of_each_worker(results):
        hits = search("--index", str(shared / "index.sqlite"), f'"{item["title"]}"')
        assert item["url"] in [h["url"] for h in hits], item["title"]


def test_two_workers_share_postgres_and_recrawl_together(
    tmp_path: Path,
    site_port: int,
    redis_server: RedisServer,  # noqa: F811
    pg_url: str,  # noqa: F811
) -> None:
    results, _ = two_workers(
        tmp_path / "run1", site_port, redis_server, one_after_the_other=True,
        DATABASE_URL=pg_url, RECRAWL_INTERVAL=3600,
    )
    assert check_mirrors_flagged(results, site_port) == 8  # B's pages: the second worker
    check_same_as_one_detector(results)
    for item in a_page_of_each_worker(results):  # the second worker's are all aliases
        hits = search("-s", f"DATABASE_URL={pg_url}", f'"{item["title"]}"')
        assert found(item, hits), item["title"]
    fetched = sum(r.stats.get("item_scraped_count", 0) for r in results)
    with psycopg.connect(pg_url) as conn:
        known = conn.execute("SELECT count(*) FROM crawldb WHERE crawl = 'web'").fetchone()[0]
        assert known >= fetched
        # the mirror's copy is an alias of its original, whichever worker indexed either
        aliases = conn.execute("SELECT count(*) FROM pages WHERE alias_of IS NOT NULL")
        assert aliases.fetchone()[0] >= 8  # one per mirrored page, at least
        # a day later for host A only: its pages are due, B's are not
        conn.execute(
            "UPDATE crawldb SET next_fetch = 0 WHERE crawl = 'web' AND url LIKE %s",
            (f"http://{HOST_A}:%",),
        )
    again, _ = two_workers(
        tmp_path / "run2", site_port, redis_server, DATABASE_URL=pg_url, RECRAWL_INTERVAL=3600
    )
    refetched = [u for r in again for u in (i["url"] for i in r.items)]
    assert refetched, "nothing due was fetched"
    assert all(u.startswith(f"http://{HOST_A}:") for u in refetched), refetched
    assert len(refetched) == len(set(refetched))  # each due page by one worker, once
    # both workers read the shared database: the same known and due counts at the start
    starts = [(r.stats.get("crawldb/known_at_start"), r.stats.get("crawldb/due_at_start"))
              for r in again]
    assert starts[0][0] == starts[1][0] == known
