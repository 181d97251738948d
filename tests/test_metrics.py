"""A worker's ``/metrics``: the families' names and values (unit), and a real crawl of the test
site scraped over HTTP while it runs, its last figures equal to the crawl's final stats."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from crawler.frontier import FrontierCounts
from crawler.metrics import families as fam
from crawler.metrics.exporter import MetricsServer
from crawler.metrics.redis_calls import install
from tests.crawling import finish_crawl, loopback_settings, start_crawl
from tests.redis_support import RedisServer, redis_server  # noqa: F401
from tests.test_redis_crawl import site

LABELS = {"crawl": "web", "worker": "w1"}


class Stats(dict):
    def inc_value(self, key: str, count: float = 1, start: float = 0) -> None:
        self[key] = self.get(key, start) + count


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by name and its labels other than crawl/worker."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items()
                                  if k not in ("crawl", "worker")))
            out[(s.name, labels)] = s.value
    return out


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def test_a_histogram_kept_in_stats_adds_up_across_workers() -> None:
    a, b = Stats(), Stats()
    for value in (0.005, 0.3, 30.0):
        fam.FETCH_HISTOGRAM.observe(a, value)
    fam.FETCH_HISTOGRAM.observe(b, 0.3)
    merged = Stats()
    for stats in (a, b):
        for key, value in stats.items():
            merged.inc_value(key, value)
    buckets, total = fam.FETCH_HISTOGRAM.buckets(merged)
    as_dict = dict(buckets)
    assert as_dict["0.01"] == 1 and as_dict["0.5"] == 3 and as_dict["20"] == 3
    assert as_dict["+Inf"] == 4 and total == pytest.approx(30.605)


def test_pages_by_status_class_and_frontier_gauges_follow_prometheus_naming() -> None:
    stats = {"pages/status/200": 5, "pages/status/301": 1, "pages/status/404": 2,
             "pages/status/410": 1, "downloader/exception_type_count/twisted.x.TimeoutError": 3,
             "frontier/rejected/seen": 7, "frontier/rejected/too_deep": 1}
    counts = FrontierCounts(queued=4, in_flight=2, seen=20, hosts=3, hosts_ready=1,
                            hosts_waiting=1, hosts_busy=1, extra={"leases_expired": 1})
    metrics = [*fam.stats_families(stats, LABELS), *fam.frontier_families(counts, LABELS)]
    got = {}
    for family in metrics:
        for s in family.samples:
            got[(s.name, tuple(sorted(s.labels.items())))] = s.value
            assert s.labels["crawl"] == "web" and s.labels["worker"] == "w1"
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)
    key = (("crawl", "web"), ("status_class", "4xx"), ("worker", "w1"))
    assert got[("crawler_pages_total", key)] == 3
    assert got[("crawler_fetch_errors_total",
                (("crawl", "web"), ("kind", "TimeoutError"), ("worker", "w1")))] == 3
    assert got[("crawler_frontier_queued_urls", (("crawl", "web"), ("worker", "w1")))] == 4
    assert got[("crawler_frontier_leases_expired_total",
                (("crawl", "web"), ("worker", "w1")))] == 1
    assert fam.status_class(None) == "none" and fam.status_class(503) == "5xx"


def test_the_stall_histogram_is_in_seconds() -> None:
    family = fam.stall_family({0: 90, 7: 9, 150: 1}, LABELS)
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert buckets["0.001"] == 90 and buckets["0.01"] == 99 and buckets["0.25"] == 100


def test_a_scrape_is_served_from_its_own_thread_and_the_final_figures_are_waited_for() -> None:
    seen = []

    def families():
        seen.append(threading.current_thread().name)
        return fam.gauges([("up_test", "x", 1.0)], LABELS)

    server = MetricsServer("127.0.0.1", free_port(), families, process=False)
    server.start()
    try:
        assert "crawler_up_test" in scrape(server.port)
        server.final()
        assert not server.wait_final_scraped(0)
        scrape(server.port)
        assert not server.wait_final_scraped(0)  # one scrape may not have been read whole
        scrape(server.port)
        assert server.wait_final_scraped(0)
    finally:
        server.close()
    assert seen and threading.main_thread().name not in seen


def test_redis_round_trips_and_errors_are_counted(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    counts = install()
    client = redis_server.client()
    client.ping()  # the connection's own hello and set-up calls are round trips too
    before = counts.round_trips
    client.set("metrics:x", 1)
    pipe = client.pipeline()
    pipe.get("metrics:x")
    pipe.get("metrics:x")
    pipe.execute()
    assert counts.round_trips - before == 2  # one command, one pipeline
    errors = counts.errors
    dead = redis.Redis(port=free_port(), socket_connect_timeout=1)
    with pytest.raises(redis.ConnectionError):
        dead.ping()
    assert counts.errors == errors + 1


@pytest.mark.integration
def test_a_crawl_serves_its_figures_while_it_runs_and_ends_with_its_stats(
    tmp_path: Path,
) -> None:
    port = free_port()
    texts: list[str] = []
    with site(pages=10) as server:
        proc = start_crawl(
            tmp_path, seeds=server.seeds(),
            settings=loopback_settings(METRICS_PORT=port, TUNING={"metrics_interval": 0.2,
                                                                         "metrics_linger": 60}),
        )
        while proc.poll() is None:  # scrape until the crawl has ended
            try:
                texts.append(scrape(port))
            except OSError:
                time.sleep(0.05)
        result = finish_crawl(proc, tmp_path)
    assert result.returncode == 0, result.log[-3000:]
    assert len(texts) >= 2
    last = samples(texts[-1])
    stats = result.stats
    ok = sum(v for k, v in stats.items() if k.startswith("pages/status/2"))
    assert last[("crawler_pages_total", (("status_class", "2xx"),))] == ok
    assert last[("crawler_response_bytes_total", ())] == stats["downloader/response_bytes"]
    assert last[("crawler_fetch_duration_seconds_count", ())] == stats[
        "metrics/fetch_seconds/count"
    ]
    assert last[("crawler_frontier_queued_urls", ())] == 0
    assert last[("crawler_frontier_seen_urls", ())] == stats["frontier/seen"]
    assert last[("crawler_reactor_stall_seconds_count", ())] > 0
    assert last[("crawler_process_resident_memory_bytes", ())] > 0
    assert "Metrics at http://127.0.0.1:" in result.log
