"""WARC files an archive can trust after a crash, and the fleet's digest index in Redis.

A real ``scrapy crawl`` writing WARC files is killed with SIGKILL mid-crawl: every renamed file
passes ``warcio check`` and the ``.open`` one reads up to its last whole record."""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crawler.archive.naming import OPEN_SUFFIX
from crawler.archive.records import Capture
from crawler.archive.recovery import recover_open_files
from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.warc_digests import RedisDigestIndex
from crawler.backends.registry import class_path
from tests.crawling import loopback_settings, serve_pages, start_crawl
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_warc import warcio_check
from tests.warc_support import readable_records, warc_files

PAGES = 400


def _pages() -> dict[str, str]:
    rng = random.Random(5)
    pages = {"/robots.txt": "User-agent: *\nAllow: /\n"}
    for i in range(PAGES):
        links = "".join(f'<a href="/p/{j}">{j}</a> ' for j in range(i + 1, min(i + 4, PAGES)))
        words = " ".join(f"{rng.getrandbits(64):x}" for _ in range(1500))  # ~25 KB, unique
        pages["/" if i == 0 else f"/p/{i}"] = f"<html><body>{links}<p>{words}</p></body></html>"
    return pages


def _wait_for(condition, what: str, proc: subprocess.Popen[str]) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``condition()`` holds (the crawl is still running meanwhile)."""
    deadline = time.monotonic() + 120  # a generous guard against a hung crawl, not a bound
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the crawl ended before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after 120 s")
        time.sleep(0.05)


def test_a_crawl_killed_with_sigkill_leaves_valid_warc_files(tmp_path: Path) -> None:
    warc_dir = tmp_path / "warc"
    with serve_pages("127.0.0.1", _pages(), delay=0.01) as port:
        proc = start_crawl(
            tmp_path,
            seeds=[f"http://127.0.0.1:{port}/"],
            settings=loopback_settings(
                WARC_ENABLED=True, WARC_DIR=warc_dir, WARC_MAX_SIZE=100_000, LOG_LEVEL="INFO"
            ),
        )
        try:
            _wait_for(lambda: len(warc_files(warc_dir)) >= 3, "three finished files", proc)
            opened = lambda: [p for p in warc_dir.glob("*" + OPEN_SUFFIX) if p.stat().st_size]  # noqa: E731
            _wait_for(lambda: bool(opened()), "an open file with records", proc)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    finished = warc_files(warc_dir)
    assert len(finished) >= 3
    for path in finished:
        warcio_check(path)
    [left_open] = list(warc_dir.glob("*" + OPEN_SUFFIX))
    records = readable_records(left_open)
    assert records and records[0] == ("warcinfo", True)
    # whole records up to the end, where at most the last one is cut
    assert all(ok for _, ok in records[:-1]), records

    # the next crawl on this host finishes it: cut after its last whole record, renamed
    whole = sum(1 for _, ok in records if ok)
    [recovered] = recover_open_files(warc_dir, socket.gethostname())
    assert recovered.name + OPEN_SUFFIX == left_open.name and not left_open.exists()
    warcio_check(recovered)
    assert readable_records(recovered) == [(kind, True) for kind, _ in records[:whole]]


def test_the_redis_digest_index_is_shared_by_workers_and_crawls(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key = CrawlKeys(fresh_key()).warc_digests
    when = datetime(2026, 11, 27, 10, 0, 0, 250000, UTC)
    first = Capture("http://a.test/x", when, "<urn:uuid:1>")
    worker_a = RedisDigestIndex(redis_server.client(), key)
    worker_b = RedisDigestIndex(redis_server.client(), key)
    assert worker_a.claim("sha1:P", first) is None
    assert worker_b.claim("sha1:P", Capture("http://b.test/", when, "<urn:uuid:2>")) == first
    later_crawl = RedisDigestIndex(redis_server.client(), key)
    assert later_crawl.claim("sha1:P", Capture("http://c.test/", when, "<urn:uuid:3>")) == first
    assert later_crawl.claim("sha1:Q", first) is None


def test_redis_away_means_a_full_copy_never_a_dangling_revisit() -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    index = RedisDigestIndex(client, CrawlKeys("nowhere").warc_digests)
    capture = Capture("http://a.test/", datetime.now(UTC), "<urn:uuid:1>")
    assert index.claim("sha1:P", capture) is None
    assert index.alone.answered == 1
    index.close()


def test_a_claim_redis_refuses_means_a_full_copy_never_a_lost_record(
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Redis answers the claim with an error (here the key holds another type; in a crawl,
    out of memory under ``noeviction``): the payload is written in full, logged once."""
    key = CrawlKeys(fresh_key()).warc_digests
    client = redis_server.client()
    client.set(key, "not a hash")
    index = RedisDigestIndex(client, key)
    capture = Capture("http://a.test/", datetime.now(UTC), "<urn:uuid:1>")
    with caplog.at_level(logging.ERROR):
        assert index.claim("sha1:P", capture) is None
        assert index.claim("sha1:Q", capture) is None
    assert index.refused == 2 and len(caplog.records) == 1
    assert "written in full" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    ("backend", "cls"),
    [
        ("memory", "crawler.backends.sqlite.warc_digests.SqliteDigestIndex"),
        ("redis", "crawler.backends.redis.warc_digests.RedisDigestIndex"),
    ],
)
def test_the_backend_chooses_the_digest_index(backend: str, cls: str) -> None:
    assert class_path({"FRONTIER_BACKEND": backend}, "warc_digest_index") == cls
