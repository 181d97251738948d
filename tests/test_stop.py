"""One Ctrl-C stops a crawl within seconds even with a silent server in flight, and the URL it
was fetching is not lost: it goes back to the frontier (JOBDIR on disk, or Redis) for the
resumed crawl or another worker.

Scrapy's own stop waits for every download in flight, up to ``DOWNLOAD_TIMEOUT``; the tests set
a long timeout (120 s) so that a stop which waited for it could not pass.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from tests import hostile as h
from tests.crawling import finish_crawl, run_crawl, start_crawl
from tests.partition_support import owned, partition_keys, queued_urls
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

NORMAL, SILENT = "127.0.0.100", "127.0.0.111"
LONG_TIMEOUT = 120  # a stop that waited for the silent download would take this long
STOP_WITHIN = 30  # seconds: far below LONG_TIMEOUT, with slack for a loaded machine


def silent_server() -> tuple[h.HostileServer, threading.Event]:
    """A normal site and a host whose page never answers; the event is set once the silent
    page's request has arrived (the crawler is then waiting on it)."""
    server = h.HostileServer()
    arrived = threading.Event()
    quiet = h.silent()

    def silent_page(req: h.Req, conn: h.Conn) -> None:
        arrived.set()
        quiet(req, conn)

    server.route(SILENT, "/", silent_page)  # robots.txt: a 404, so the page is allowed
    h.normal_site(server, NORMAL, pages=3)
    return server, arrived


def settings(**extra: Any) -> dict[str, Any]:
    return {
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0,
        "DOWNLOAD_TIMEOUT": LONG_TIMEOUT,
        "DOWNLOAD_MIN_RATE": 0,  # the silent page is cut by the stop, not by a limit
        "FRONTIER_LEASE_TTL": 3 * LONG_TIMEOUT + 10,
        **extra,
    }


def stop_when(arrived: threading.Event, proc: Any) -> float:
    """SIGINT once the silent request is in flight; returns how long the process took to end."""
    assert arrived.wait(60), "the silent page was never requested"
    time.sleep(0.3)  # the crawler is now waiting on it
    assert proc.poll() is None
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(LONG_TIMEOUT + 30)
    return time.monotonic() - sent


def test_ctrl_c_cuts_a_silent_download_and_the_resumed_crawl_fetches_it(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    server, arrived = silent_server()
    with server:
        seeds = [server.url(SILENT), server.url(NORMAL)]
        proc = start_crawl(tmp_path, seeds=seeds, settings=settings(JOBDIR=jobdir))
        took = stop_when(arrived, proc)
        first = finish_crawl(proc, tmp_path, timeout=10)
        assert server.wait_idle(5)
        cut = [hit for hit in server.hits_of(SILENT, "/") if hit.path == "/"]
        # the silent page answers now: the resumed crawl must ask for it again
        server.route(SILENT, "/", h.page(h.links_page([], "answered at last")))
        second = run_crawl(tmp_path, seeds=seeds, settings=settings(JOBDIR=jobdir))
        again = [hit for hit in server.hits_of(SILENT, "/") if hit.path == "/"]
    assert took < STOP_WITHIN, (took, first.log[-3000:])
    assert first.log.count("Received SIGINT") == 1
    assert first.stats["finish_reason"] == "shutdown", first.log[-3000:]
    assert first.stats.get("frontier/leases_released_at_stop", 0) >= 1
    assert not first.stats.get("frontier/fetch/failed")  # the host is not blamed
    assert "downloader/exception_type_count/twisted.internet.defer.CancelledError" not in (
        first.stats
    )
    # the crawler closed the silent connection itself, at the stop
    assert len(cut) == 1 and cut[0].status == 0
    assert second.returncode == 0 and second.stats["finish_reason"] == "finished", second.log[
        -3000:
    ]
    assert len(again) == 2 and again[1].status == 200
    assert any(item["url"] == server.url(SILENT) for item in second.items)


def test_ctrl_c_hands_a_silent_download_back_to_the_shared_frontier(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key = fresh_key()
    server, arrived = silent_server()
    extra = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "FRONTIER_REDIS_KEY": key,
        # the near-duplicate store on Redis is being ported elsewhere: the in-process one here
        "BACKEND_CLASSES": {"neardup_store": "crawler.content.neardup.NearDuplicateDetector"},
    }
    client = redis_server.client()
    with server:
        proc = start_crawl(
            tmp_path, seeds=[server.url(SILENT), server.url(NORMAL)], settings=settings(**extra)
        )
        took = stop_when(arrived, proc)
        result = finish_crawl(proc, tmp_path, timeout=10)
    assert took < STOP_WITHIN, (took, result.log[-3000:])
    assert result.stats["finish_reason"] == "shutdown", result.log[-3000:]
    assert result.stats.get("frontier/leases_released_at_stop", 0) >= 1
    assert owned(client, key, proc) == []  # every partition handed back
    assert server.url(SILENT) in queued_urls(client, key)
    # its host rests the politeness delay, as after a fetch (the server may have seen it):
    # its next fetch time, on Redis's clock, is kept with the host for its next owner
    saved = [
        msgpack.unpackb(record)
        for keys in partition_keys(key)
        if (record := client.hget(keys.hosts, SILENT)) is not None
    ]
    assert saved and saved[0][5] > 0
