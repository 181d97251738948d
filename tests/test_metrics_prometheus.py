"""Debian's Prometheus scraping a real crawl of the test site every second: the values read
back through its HTTP API (``/api/v1/query``) equal the crawl's final stats, and every query of
the shipped dashboard runs on them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.crawling import finish_crawl, loopback_settings, start_crawl
from tests.test_metrics import free_port
from tests.test_metrics_alerts import DASHBOARD
from tests.test_redis_crawl import site, wait_until

pytestmark = pytest.mark.integration


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        message = "prometheus not installed (apt-get install prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": required under CI")
        pytest.skip(message)
    return found


class Prometheus:
    def __init__(self, port: int) -> None:
        self.port = port

    def get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2):
                return True
        except OSError:
            return False


@contextmanager
def prometheus(tmp_path: Path, target_port: int) -> Iterator[Prometheus]:
    binary = prometheus_binary()
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: crawler\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
    )
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"),  # noqa: SIM115
    )
    try:
        server = Prometheus(port)
        wait_until(lambda: proc.poll() is not None or server.ready(), timeout=60)
        assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_prometheus_scraping_a_crawl_reads_back_its_final_stats(tmp_path: Path) -> None:
    port = free_port()
    with prometheus(tmp_path, port) as prom, site(pages=10) as server:
        proc = start_crawl(
            tmp_path, seeds=server.seeds(),
            settings=loopback_settings(METRICS_PORT=port, TUNING={"metrics_interval": 0.2,
                                                                         "metrics_linger": 120}),
        )
        result = finish_crawl(proc, tmp_path, timeout=300)
        assert result.returncode == 0, result.log[-3000:]
        stats = result.stats
        ok = sum(v for k, v in stats.items() if k.startswith("pages/status/2"))

        def last(expr: str) -> float | None:
            return prom.value(f"last_over_time({expr}[10m])")

        # the crawl ended once Prometheus had read its final figures: wait for them to show
        wait_until(lambda: last('crawler_pages_total{status_class="2xx"}') == ok, timeout=60)
        assert last("crawler_response_bytes_total") == stats["downloader/response_bytes"]
        assert last("crawler_items_total") == stats["item_scraped_count"]
        assert last("crawler_fetch_duration_seconds_count") == stats[
            "metrics/fetch_seconds/count"
        ]
        assert last("crawler_frontier_seen_urls") == stats["frontier/seen"]
        assert last("crawler_frontier_queued_urls") == 0
        assert last('crawler_robotstxt_events_total{event="request_count"}') == stats[
            "robotstxt/request_count"
        ]
        assert last("crawler_reactor_stall_seconds_count") > 0
        # a series per scrape: the crawl was watched while it ran, not only at its end
        scrapes = prom.value('count_over_time(crawler_pages_total{status_class="2xx"}[10m])')
        assert scrapes is not None and scrapes >= 2
        # every panel of the dashboard is a query Prometheus runs on these series
        crawl = prom.query("last_over_time(crawler_pages_total[10m])")[0]["metric"]["crawl"]
        dashboard = json.loads(DASHBOARD.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                prom.query(target["expr"].replace("$crawl", crawl))
