"""What live metrics cost a crawl: CPU per page and the reactor's longest stall on real
documentation, with ``METRICS_PORT`` off and on (scraped every second), the same site set
crawled to completion in alternating runs.

    .venv/bin/python bench/metrics.py [--runs 3] [--trees reference,nomicon,...]
    .venv/bin/python bench/metrics.py --micro    # the per-page and per-scrape costs alone

The site set and the crawl are ``bench/realcrawl.py``'s (nginx serving real documentation
trees, this crawler with every feature on); "on" adds ``METRICS_PORT`` (a free loopback port,
``TUNING``'s ``metrics_interval`` 1) and a scraper that reads ``/metrics`` every second while
the crawl runs, as Prometheus would. CPU is the crawl process's (user + sys, ``os.wait4``: its
threads, the scrape thread included, and its children); the stalls are the stall probe's
(``crawler.extensions.stall``). Targets (issue 28): CPU per page at most 2 % more with metrics
on, and the longest stall unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.realcrawl import DEFAULT_TREES, command, doc_site  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scraper(port: int, stop: threading.Event, every: float, out: list[float]) -> None:
    """Reads /metrics every ``every`` seconds until ``stop``; keeps each scrape's time."""
    while not stop.wait(every):
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                r.read()
        except OSError:
            continue
        out.append(time.perf_counter() - start)


def run(config: str, i: int, root: Path, sites: Path, seeds: Path, allow: str,
        every: float) -> dict[str, Any]:
    run_dir = root / f"{config}-{i}"
    run_dir.mkdir()
    extra: dict[str, str] = {}
    port = 0
    if config == "on":
        port = free_port()
        extra = {"METRICS_PORT": str(port), "TUNING": '{"metrics_interval": 1}'}
    cmd, cwd = command("ours", run_dir, sites, seeds, allow, extra)
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        stdout=subprocess.DEVNULL, stderr=open(run_dir / "stderr", "wb"),  # noqa: SIM115
    )
    stop, scrapes = threading.Event(), []
    thread = None
    if port:
        thread = threading.Thread(target=scraper, args=(port, stop, every, scrapes))
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    stop.set()
    if thread is not None:
        thread.join()
    wall = time.monotonic() - start
    stats = json.loads((run_dir / "stats.json").read_text())
    pages = int(stats.get("pages/ok", 0))
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "config": config, "run": i, "exit": os.waitstatus_to_exitcode(status),
        "pages": pages, "cpu": round(cpu, 2), "wall": round(wall, 1),
        "ms_per_page": round(1000 * cpu / pages, 3) if pages else 0.0,
        "stall_max_ms": stats.get("reactor/stall_max_ms"),
        "stall_max_busy_ms": stats.get("reactor/stall_max_busy_ms"),
        "stall_p99_ms": stats.get("reactor/stall_p99_ms"),
        "stalls_over_20ms": stats.get("reactor/stalls_over_20ms"),
        "scrapes": len(scrapes),
        "scrape_ms_median": round(1000 * statistics.median(scrapes), 2) if scrapes else None,
        "load": round(os.getloadavg()[0], 1),
    }


def micro(n: int = 200_000) -> None:
    """CPU of what metrics add on the reactor per fetch (two histogram observations and the
    bytes by status class, into Scrapy's stats collector), of one snapshot (a copy of a real
    crawl's stats), and of building one scrape's families (on the scrape thread)."""
    from scrapy.settings import Settings
    from scrapy.statscollectors import MemoryStatsCollector

    from crawler.frontier import FrontierCounts
    from crawler.metrics import families as fam

    class _Crawler:
        settings = Settings()

    stats = MemoryStatsCollector(_Crawler())  # type: ignore[arg-type]
    for i in range(300):  # a crawl's stats: ~300 keys
        stats.set_value(f"some/stat/{i}", i)
    fetch, delay = fam.LocalHistogram(fam.FETCH_HISTOGRAM), fam.LocalHistogram(fam.DELAY_HISTOGRAM)
    sizes: dict[str, int] = {}
    start = time.process_time()
    for i in range(n):  # what WorkerMetrics.fetched and .fetch_completed do
        fetch.observe((i % 1000) / 1000)
        delay.observe((i % 300) / 100)
        key = fam.status_class(200)
        sizes[key] = sizes.get(key, 0) + 12_345
    per_fetch = (time.process_time() - start) / n
    start = time.process_time()
    for _ in range(2000):
        fetch.write(stats)
        delay.write(stats)
    per_write = (time.process_time() - start) / 2000
    start = time.process_time()
    for _ in range(2000):
        snapshot = dict(stats.get_stats())
    per_snapshot = (time.process_time() - start) / 2000
    labels = {"crawl": "docs", "worker": "host:1"}
    counts = FrontierCounts(queued=1000, seen=5000, hosts=10)
    start = time.process_time()
    for _ in range(500):
        metrics = [*fam.stats_families(snapshot, labels), *fam.frontier_families(counts, labels),
                   fam.stall_family({i: 10 for i in range(40)}, labels)]
    per_scrape = (time.process_time() - start) / 500
    print(f"per fetch, on the reactor: {per_fetch * 1e6:.2f} us")
    print(f"per snapshot (every metrics_interval), on the reactor: "
          f"{(per_snapshot + per_write) * 1e6:.1f} us (histograms into the stats: "
          f"{per_write * 1e6:.1f} us)")
    print(f"per scrape, families built on the scrape thread: {per_scrape * 1e3:.2f} ms "
          f"({len(metrics)} families)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=8082)
    parser.add_argument("--trees", default=DEFAULT_TREES)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument("--json", default="")
    parser.add_argument("--micro", action="store_true", help="the per-page costs alone")
    args = parser.parse_args()
    if args.micro:
        micro()
        return
    results: list[dict[str, Any]] = []
    try:
        with doc_site(args.trees, args.port, "bench-metrics-") as site:
            for i in range(args.runs):
                for config in (("off", "on") if i % 2 == 0 else ("on", "off")):
                    r = run(config, i, site.root, site.sites, site.seeds, site.allow, args.every)
                    results.append(r)
                    print(json.dumps(r), flush=True)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\n{'config':6} {'pages':>6} {'ms/page':>8} {'stall max':>9} {'busy max':>8} "
          f"{'p99':>4} {'>20ms':>5} {'scrapes':>7} {'load':>5}")
    for r in results:
        print(f"{r['config']:6} {r['pages']:>6} {r['ms_per_page']:>8.2f} "
              f"{r['stall_max_ms'] or 0:>9.1f} {r['stall_max_busy_ms'] or 0:>8.1f} "
              f"{r['stall_p99_ms'] or 0:>4.0f} {r['stalls_over_20ms'] or 0:>5} "
              f"{r['scrapes']:>7} {r['load']:>5}")
    med = {c: statistics.median(r["ms_per_page"] for r in results if r["config"] == c)
           for c in ("off", "on")}
    print(f"\nmedian CPU ms/page: off {med['off']:.2f}, on {med['on']:.2f} "
          f"({100 * (med['on'] / med['off'] - 1):+.1f} %)")


if __name__ == "__main__":
    main()
