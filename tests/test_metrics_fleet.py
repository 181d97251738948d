"""The crawl as one for Prometheus: ``scrapy frontier web --metrics-port`` serving a two-worker
Redis crawl's merged totals, equal to the sum of the workers' own final stats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crawling import PROJECT, finish_crawl, setting_text
from tests.redis_support import RedisServer, redis_server  # noqa: F401
from tests.test_metrics import free_port, samples, scrape
from tests.test_redis_crawl import site, start_workers, wait_until

pytestmark = pytest.mark.integration

EXTRA = {
    "BACKEND_CLASSES": {"neardup_store": "crawler.content.neardup.NearDuplicateDetector"},
    "TUNING": {"heartbeat_interval": 0.5},
}


def start_exporter(redis: RedisServer, key: str, port: int) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "scrapy", "frontier", "web", "--metrics-port", str(port)]
    for name, value in {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
        "FRONTIER_REDIS_KEY": key,
        "TUNING": {"metrics_interval": 0.2},
    }.items():
        cmd += ["-s", f"{name}={setting_text(value)}"]
    return subprocess.Popen(
        cmd, cwd=PROJECT, env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_the_crawl_wide_exporter_serves_the_merged_totals_of_every_worker(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    port = free_port()
    with site(pages=8) as server:
        procs, dirs, key = start_workers(tmp_path, server, redis_server, 2, **EXTRA)
        exporter = start_exporter(redis_server, key, port)
        try:
            assert exporter.stdout is not None
            line = exporter.stdout.readline()
            assert f"http://127.0.0.1:{port}/metrics" in line, exporter.stderr.read()
            results = [finish_crawl(p, d) for p, d in zip(procs, dirs, strict=True)]
            ended = ("crawler_workers", (("state", "ended"),))
            scraped: list[dict] = [{}]

            def both_ended() -> bool:
                scraped[0] = samples(scrape(port))
                return scraped[0].get(ended) == 2

            wait_until(both_ended, timeout=60)
            last = scraped[0]
        finally:
            exporter.terminate()
            _, errors = exporter.communicate(timeout=30)
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
    ok = sum(v for r in results for k, v in r.stats.items() if k.startswith("pages/status/2"))
    assert ok > 0
    assert last[("crawler_pages_total", (("status_class", "2xx"),))] == ok
    assert last[("crawler_response_bytes_total", ())] == sum(
        r.stats["downloader/response_bytes"] for r in results
    )
    assert last[("crawler_redis_up", ())] == 1
    assert last[("crawler_frontier_queued_urls", ())] == 0
    assert last[("crawler_frontier_seen_urls", ())] == max(
        r.stats["frontier/seen"] for r in results
    )
    assert last[("crawler_crawl_paused", ())] == 0
    assert exporter.returncode == 0, errors
