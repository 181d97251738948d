"""What a killed worker costs: pages fetched twice after a SIGKILL, with and without the backlog
bound (``FRONTIER_MAX_BACKLOG``, ``TUNING``'s ``max_backlog_bytes``), and what the bound costs a
healthy worker.

    .venv/bin/python bench/kill_refetch.py [--install] [--runs 2] [--cases kill,healthy]
                                           [--kill-after 20] [--on KEY=VALUE] [--set KEY=VALUE]
                                           [--json out.json]

The site set is five real documentation trees of Debian packages under /usr/share/doc (Python
3.11's documentation, Eigen's Doxygen pages, git's manual pages, GIO's gtk-doc, nodejs's API
manual: a few big pages), each its own loopback host, served by nginx
(``bench/redis_workers.py``'s server; ``--install`` apt-gets the packages and nginx-light).
Host concurrency 2, no politeness delay, as in ``bench/redis_workers.py``. Two cases, each run
once with the bound off (``0``) and once with it on (the defaults, or ``--on``), alternating
``--runs`` times:

* ``kill``: two workers on one Redis (the second joins once the crawl exists); the second is
  killed with SIGKILL ``--kill-after`` seconds after it started, and the survivor crawls to the
  end. Each worker appends the URL of every response it receives to a file of its own, one
  unbuffered write each (``FetchLog``, below), so the killed worker's record is complete. The
  refetches are the killed worker's pages the survivor fetched again after the kill; nginx's
  access log says the same from the server's side (URLs fetched twice) and that nothing was
  lost (the distinct pages equal the healthy crawl's). ``FRONTIER_LEASE_TTL`` is 30 s (a dead
  worker's leases expire then), with ``DOWNLOAD_TIMEOUT`` 5 and ``RETRY_TIMES`` 2 under it.
* ``healthy``: one Redis worker crawls the whole site set to completion: pages/s (wall) and CPU
  per page, equal work checked against nginx's log.

Nothing leaves loopback. Needs ``nginx`` and ``redis-server``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.redis_workers import KEY, Nginx, Worker, write_site  # noqa: E402
from crawler.config import defaults  # noqa: E402
from crawler.config.tuning import knob_default  # noqa: E402
from crawler.settings import EXTENSIONS  # noqa: E402

RedisServer = Any  # tests.redis_support's, imported in main(): workers import FetchLog only

DOC = "/usr/share/doc"
# (served root, URL prefix): five Debian documentation packages, five generators
TREES = [
    (DOC, "python3.11-doc/html"),
    (DOC, "libeigen3-dev/html"),
    (DOC, "git-doc"),
    (DOC, "libglib2.0-doc/gio"),
    (DOC, "nodejs/api"),
]
# what --install gets (root): the trees' packages and the server
PACKAGES = ["python3.11-doc", "libeigen3-doc", "git-doc", "libglib2.0-doc", "nodejs", "nginx-light"]
OFF = {"FRONTIER_MAX_BACKLOG": 0, "TUNING": json.dumps({"max_backlog_bytes": 0})}
KILL_SETTINGS = {"FRONTIER_LEASE_TTL": 30, "DOWNLOAD_TIMEOUT": 5, "RETRY_TIMES": 2}


class FetchLog:
    """Appends ``<time> <status> <url>`` of every response this worker receives to
    ``fetches.log`` beside its ``STATS_FILE``, one unbuffered write each: a worker killed with
    SIGKILL leaves every page it received on record."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FetchLog:
        stats_file = crawler.settings.get("STATS_FILE")
        if not stats_file:
            raise NotConfigured("FetchLog needs STATS_FILE")
        log = cls(Path(stats_file).with_name("fetches.log"))
        crawler.signals.connect(log.received, signals.response_received)
        return log

    def received(self, response: Response, **_: Any) -> None:
        os.write(self.fd, f"{time.time():.3f} {response.status} {response.url}\n".encode())


def fetch_log(worker: Worker) -> list[tuple[float, str]]:
    """(time, URL) of the pages ``worker`` received, robots.txt left out."""
    path = worker.dir / "fetches.log"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        at, _, url = line.split(" ", 2)
        if not url.endswith("/robots.txt"):
            rows.append((float(at), url))
    return rows


def served(nginx: Nginx, offset: int) -> dict[str, Any]:
    """Pages, distinct URLs and URLs fetched twice, from nginx's access log."""
    pages = [r for r in nginx.requests(offset) if r[4] != "/robots.txt"]
    urls = Counter((r[1], r[4]) for r in pages)
    return {
        "fetches": len(pages),
        "pages": sum(1 for r in pages if r[2] == "200"),
        "distinct": len(urls),
        "twice": sum(1 for n in urls.values() if n > 1),
    }


def worker_settings(server: RedisServer, bound: dict[str, Any], extra: dict[str, Any]) -> dict:
    return {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
        "FRONTIER_REDIS_KEY": KEY,
        "EXTENSIONS": json.dumps(EXTENSIONS | {"bench.kill_refetch.FetchLog": 0}),
        **bound,
        **extra,
    }


def run_kill(
    label: str, i: int, root: Path, sites_dir: Path, seeds: Path, nginx: Nginx,
    server: RedisServer, bound: dict[str, Any], args: Any,
) -> dict[str, Any]:
    client = server.client()
    client.flushall()
    settings = worker_settings(server, bound, KILL_SETTINGS | args.extra)
    offset = nginx.log_offset()
    run_dir = root / f"kill-{label}-{i}"
    t0 = time.monotonic()
    survivor = Worker(run_dir / "w0", sites_dir, settings, seeds)
    while nginx.log_offset() == offset:  # the crawl exists: its first request was logged
        if survivor.proc.poll() is not None:
            raise RuntimeError(f"worker 0 ended before its first request: {survivor.dir}")
        time.sleep(0.02)
    doomed = Worker(run_dir / "w1", sites_dir, settings, None)
    time.sleep(max(0.0, doomed.start + args.kill_after - time.monotonic()))
    if doomed.proc.poll() is not None:
        raise RuntimeError(f"worker 1 ended before the kill: {doomed.dir}")
    doomed.proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    doomed.join(30)
    survivor.join(args.timeout)
    wall = survivor.end - t0
    killed = fetch_log(doomed)
    killed_urls = {url for _, url in killed}
    survivor_log = fetch_log(survivor)
    again = {url for at, url in survivor_log if at >= killed_at and url in killed_urls}
    before = {url for at, url in survivor_log if at < killed_at and url in killed_urls}
    client.close()
    return {
        "case": "kill", "config": label, "run": i, "wall": wall,
        "killed_pages": len(killed_urls), "refetched": len(again),
        "both_before_kill": len(before),  # fetched by both while both ran: 0 expected
        "survivor_finish": survivor.stats.get("finish_reason"),
        "survivor_backlog_full": survivor.stats.get("frontier/backlog/full", 0),
        "survivor_backlog_peak": survivor.stats.get("frontier/backlog/peak_pages"),
        "load": os.getloadavg()[0],
    } | served(nginx, offset)


def run_healthy(
    label: str, i: int, root: Path, sites_dir: Path, seeds: Path, nginx: Nginx,
    server: RedisServer, bound: dict[str, Any], args: Any,
) -> dict[str, Any]:
    client = server.client()
    client.flushall()
    client.close()
    settings = worker_settings(server, bound, args.extra)
    offset = nginx.log_offset()
    load0 = os.getloadavg()[0]
    worker = Worker(root / f"healthy-{label}-{i}", sites_dir, settings, seeds)
    worker.join(args.timeout)
    wall = worker.end - worker.start
    counts = served(nginx, offset)
    stats = worker.stats
    return {
        "case": "healthy", "config": label, "run": i, "wall": wall,
        "pages_per_s": counts["pages"] / wall, "cpu": worker.cpu,
        "ms_per_page": 1000 * worker.cpu / counts["pages"] if counts["pages"] else 0.0,
        "items": stats.get("item_scraped_count", 0), "finish": stats.get("finish_reason"),
        "backlog_full": stats.get("frontier/backlog/full", 0),
        "backlog_full_s": stats.get("frontier/backlog/full_seconds", 0.0),
        "backlog_peak": stats.get("frontier/backlog/peak_pages"),
        "backlog_peak_mb": (stats.get("frontier/backlog/peak_bytes") or 0) / 2**20,
        "load": (load0, os.getloadavg()[0]),
    } | counts


def summarize(results: list[dict[str, Any]], bound_text: str) -> None:
    print(f"\nbound on: {bound_text}")
    for r in results:
        if r["case"] == "kill":
            print(
                f"kill    {r['config']:4} #{r['run']} killed worker fetched "
                f"{r['killed_pages']}, survivor fetched {r['refetched']} of them again "
                f"(nginx: {r['twice']} URLs twice, {r['distinct']} distinct, "
                f"{r['pages']} pages 200) wall {r['wall']:.1f}s survivor {r['survivor_finish']}"
                f" backlog full {r['survivor_backlog_full']}x peak {r['survivor_backlog_peak']}"
                f" load {r['load']:.1f}"
            )
        else:
            print(
                f"healthy {r['config']:4} #{r['run']} {r['pages']} pages ({r['distinct']} "
                f"distinct, {r['twice']} twice) in {r['wall']:.1f}s = {r['pages_per_s']:.1f} "
                f"pages/s, CPU {r['ms_per_page']:.1f} ms/page; backlog full {r['backlog_full']}x"
                f" ({r['backlog_full_s']:.1f}s) peak {r['backlog_peak']} pages "
                f"{r['backlog_peak_mb']:.1f} MB, load {r['load'][0]:.1f}->{r['load'][1]:.1f}"
            )
    print("\nmedians:")
    for case, field in (("kill", "refetched"), ("healthy", "pages_per_s"),
                        ("healthy", "ms_per_page")):
        for config in ("off", "on"):
            values = [r[field] for r in results if r["case"] == case and r["config"] == config]
            if values:
                print(f"{case:7} {config:3} {field}: {statistics.median(values):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--install", action="store_true",
                        help="apt-get the documentation packages and nginx-light (root)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cases", default="kill,healthy")
    parser.add_argument("--kill-after", type=float, default=20.0)
    parser.add_argument("--port", type=int, default=8082)
    parser.add_argument("--host-concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--on", action="append", default=[], metavar="KEY=VALUE",
                        help="the bound of the 'on' runs (default: the project's defaults)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra setting for every worker")
    parser.add_argument("--json", default="")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    from tests.redis_support import start_redis

    if args.install:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
                       check=True, env=env)
    trees = [(r, p) for r, p in TREES if os.path.isfile(os.path.join(r, p, "index.html"))]
    if len(trees) < len(TREES):
        missing = sorted({p for _, p in TREES} - {p for _, p in trees})
        print("missing trees (run with --install):", ", ".join(missing))
    args.extra = dict(kv.split("=", 1) for kv in args.set)
    on = {
        "FRONTIER_MAX_BACKLOG": defaults.FRONTIER_MAX_BACKLOG,
        "TUNING": json.dumps({"max_backlog_bytes": knob_default("max_backlog_bytes")}),
    } | dict(kv.split("=", 1) for kv in args.on)
    root = Path(tempfile.mkdtemp(prefix="bench-kill-refetch-"))
    (root / "nginx").mkdir()
    nginx = Nginx(root / "nginx", trees, args.port)
    (root / "redis").mkdir()
    server = start_redis(root / "redis", timeout=30)
    results: list[dict[str, Any]] = []
    try:
        sites_dir = root / "sites"
        site_args = SimpleNamespace(min_delay=0.0, host_concurrency=args.host_concurrency)
        seeds = write_site(sites_dir, nginx, trees, site_args)
        print("trees:", ", ".join(f"{h}=/{p}/" for h, (_, p) in zip(nginx.hosts, trees,
                                                                    strict=True)))
        runners = {"kill": run_kill, "healthy": run_healthy}
        for i in range(args.runs):
            for case in args.cases.split(","):
                for label, bound in (("off", OFF), ("on", on)):
                    r = runners[case](label, i, root, sites_dir, seeds, nginx, server, bound,
                                      args)
                    results.append(r)
                    print(json.dumps(r), flush=True)
        summarize(results, ", ".join(f"{k}={v}" for k, v in on.items()))
    finally:
        server.stop()
        nginx.stop()
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if args.keep:
            print("kept", root)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
