"""Whole-crawl CPU per page and the reactor's longest stall on real documentation, this crawler
with every feature on against stock Scrapy, the same finite site set crawled to completion in
the same run.

    .venv/bin/python bench/realcrawl.py [--runs 2] [--configs stock,ours,bare]
                                        [--trees reference,nomicon,...] [--set KEY=VALUE]

The site set is real documentation HTML served by nginx (one loopback host per tree, only the
tree's folder served; ``bench/redis_workers.py`` starts it): the Rust books and API docs of a
rustup toolchain, nodejs's and valgrind's manuals from /usr/share/doc. Configurations:

* ``stock``: ``scrapy runspider bench/stock_spider.py`` outside the project, Scrapy's defaults
  (LinkExtractor with each tree's prefix as ``allow``, ``response.follow``, its scheduler and
  dupefilter, the visible text by XPath), 16 requests in flight, 2 per host, no delay;
* ``ours``: ``scrapy crawl`` with every feature on: near-duplicates (main text, host templates),
  the full-text index, the crawl database (``CRAWLDB_PATH``), robots.txt, the same concurrency;
* ``bare``: this crawler with near-duplicates, index and crawl database off.

Both write the same page items to a JSON-lines feed. Measured per run: pages fetched (nginx's
access log: equal work), CPU of the crawl process (user + sys, ``os.wait4``), wall time, and
the reactor's stalls (``crawler.extensions.stall``, added to the stock crawl through
``EXTENSIONS``; a 10 ms timer's lateness: the longest, the 99th percentile, how many over 20 ms;
"busy": only stalls during which the crawl process was on a CPU at least half the time, i.e.
not the machine's load). CPU includes the crawl's child processes (``os.wait4`` counts the
children it reaped).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.redis_workers import Nginx, default_trees  # noqa: E402

SITE = "docs"
DEFAULT_TREES = (
    "reference,nomicon,edition-guide,rustc,cargo,error_codes,std,nodejs/api,valgrind/html"
)
STALL = {"crawler.extensions.stall.ReactorStallMonitor": 510}
BASELINE: Path | None = None  # --baseline: an older checkout, run as the "before" config


@dataclass
class DocSite:
    """The documentation trees served by nginx on loopback, with the crawler's site config
    (``sites``), seeds file and the stock spider's allow pattern: what every equal-work crawl
    bench starts from."""

    root: Path
    nginx: Nginx
    trees: list[tuple[str, str]]
    seeds: Path
    allow: str

    @property
    def sites(self) -> Path:
        return self.root / "sites"


@contextlib.contextmanager
def doc_site(
    tree_names: str, port: int, prefix: str, *, delay: float = 0.0, keep: bool = False
) -> Iterator[DocSite]:
    """Serve the installed trees named in ``tree_names`` (comma-separated) in a temporary
    folder; nginx is stopped and the folder removed (unless ``keep``) however the bench ends."""
    wanted = tree_names.split(",")
    trees = [t for t in default_trees() if t[1] in wanted]
    if missing := set(wanted) - {p for _, p in trees}:
        print("missing trees (skipped):", ", ".join(sorted(missing)))
    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / "nginx").mkdir()
    nginx = Nginx(root / "nginx", trees, port)
    try:
        seeds, allow = write_site(root / "sites", nginx, trees, delay)
        print("trees:", ", ".join(p for _, p in trees), flush=True)
        yield DocSite(root, nginx, trees, seeds, allow)
    finally:
        nginx.stop()
        if keep:
            print("kept", root)
        else:
            shutil.rmtree(root, ignore_errors=True)


def write_site(
    sites_dir: Path, nginx: Nginx, trees: list[tuple[str, str]], delay: float = 0.0
) -> tuple[Path, str]:
    """The site config of this crawler, the seeds file, and the stock spider's allow pattern."""
    sites_dir.mkdir(parents=True, exist_ok=True)
    prefixes = [
        f"^http://{h.replace('.', '[.]')}:{nginx.port}/{p}/"
        for h, (_, p) in zip(nginx.hosts, trees, strict=True)
    ]
    (sites_dir / f"{SITE}.toml").write_text(
        f'''name = "{SITE}"
allow_private_addresses = true
[scope]
hosts = [{", ".join(f'"{h}"' for h in nginx.hosts)}]
[urls]
allow = [{", ".join(f"'{p}'" for p in prefixes)}]
max_depth = 10000
[politeness]
min_delay = {delay}
delay_factor = 0
host_concurrency = {1 if delay else 2}
'''
    )
    seeds = sites_dir / "seeds.txt"
    seeds.write_text(
        "".join(
            f"http://{h}:{nginx.port}/{p}/index.html\n"
            for h, (_, p) in zip(nginx.hosts, trees, strict=True)
        )
    )
    return seeds, "|".join(f"(?:{p})" for p in prefixes)


def command(config: str, run_dir: Path, sites_dir: Path, seeds: Path, allow: str,
            extra: dict[str, str]) -> tuple[list[str], Path]:
    """The crawl command of ``config`` and the folder to run it in."""
    settings: dict[str, Any] = {
        "CONCURRENT_REQUESTS": 16,
        "LOG_LEVEL": "INFO",
        "LOG_FILE": run_dir / "crawl.log",
        "TELNETCONSOLE_ENABLED": False,
        "FEED_EXPORT_ENCODING": "utf-8",
    }
    if config == "stock":
        settings |= {
            "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "DOWNLOAD_DELAY": 0,
            "EXTENSIONS": json.dumps(
                STALL | {"crawler.extensions.statsfile.StatsFile": 900}
            ),
            "STATS_FILE": run_dir / "stats.json",
        }
        cmd = [sys.executable, "-m", "scrapy", "runspider",
               str(PROJECT / "bench" / "stock_spider.py"),
               "-a", f"seeds={seeds}", "-a", f"allow={allow}"]
        cwd = run_dir
    else:
        on = config in ("ours", "before")
        settings |= {
            "SITES_DIR": sites_dir,
            "STATS_FILE": run_dir / "stats.json",
            "INDEX_PATH": run_dir / "index.sqlite",
            "NEARDUP_ENABLED": on,
            "INDEX_ENABLED": on,
        }
        if on:
            settings["CRAWLDB_PATH"] = run_dir / "crawldb.sqlite"
        if config == "before" and not _settings_have_probe(BASELINE):
            # a settings.py that predates the stall probe: its extensions, with the probe
            settings["EXTENSIONS"] = json.dumps(STALL | {
                "crawler.extensions.statsfile.StatsFile": 900,
                "crawler.extensions.progress.FrontierProgress": 500,
                "crawler.extensions.recrawl.RecrawlExtension": 100,
                "scrapy.extensions.logstats.LogStats": None,
            })
        cmd = [sys.executable, "-m", "scrapy", "crawl", SITE, "-a", f"seeds={seeds}"]
        cwd = BASELINE if config == "before" and BASELINE else PROJECT
    settings |= extra
    cmd += ["-o", f"{run_dir / 'items.jsonl'}:jsonlines"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd, cwd


def _settings_have_probe(checkout: Path | None) -> bool:
    """Whether a checkout's own settings.py runs the stall probe: then its extensions (the paced
    collector among them) run as they are, not the older list above."""
    if checkout is None:  # "before" without --baseline: this checkout, the older list
        return False
    settings = checkout / "crawler" / "settings.py"
    return settings.exists() and "ReactorStallMonitor" in settings.read_text()


def politeness(requests: list[list[str]], delay: float) -> dict[str, Any]:
    """Politeness as ``bench/politeness.py`` scores it, from nginx's log: per host, the ideal
    span of its n fetches ((n - 1) x delay; loopback answers take ~1 ms) over the real one,
    averaged; and the gaps between two fetches of a host (times are when nginx finished each
    answer, robots.txt included)."""
    by_host: dict[str, list[float]] = {}
    for r in requests:
        by_host.setdefault(r[1], []).append(float(r[0]))
    scores, gaps = [], []
    long_at: list[tuple[float, int, float]] = []  # (gap, its index in the host, s since start)
    first = min((float(r[0]) for r in requests), default=0.0)
    for times in by_host.values():
        times.sort()
        if len(times) < 3:
            continue
        span = times[-1] - times[0]
        scores.append((len(times) - 1) * delay / span if span else 0.0)
        gaps += [b - a for a, b in pairwise(times)]
        long_at.extend((round(b - a, 2), i, round(a - first, 1))
                       for i, (a, b) in enumerate(pairwise(times)) if b - a > 1.5 * delay)
    return {
        "host_scores": sorted(round(x, 3) for x in scores),
        "gaps_over_1_5x": sum(g > 1.5 * delay for g in gaps),
        "longest_gaps": sorted(long_at, reverse=True)[:12],
        "rate_vs_ideal": round(statistics.mean(scores), 3) if scores else None,
        "min_gap": round(min(gaps), 3) if gaps else None,
        "median_gap": round(statistics.median(gaps), 3) if gaps else None,
        "gaps_below_delay": sum(g < delay - 0.002 for g in gaps),
        "gaps": len(gaps),
    }


def run_config(config: str, i: int, root: Path, sites_dir: Path, seeds: Path, allow: str,
               nginx: Nginx, extra: dict[str, str], timeout: float) -> dict[str, Any]:
    run_dir = root / f"{config}-{i}"
    run_dir.mkdir()
    settings = {k: v for k, v in extra.items() if not k.startswith("_")}
    env = dict(os.environ)
    if extra.get("_spy") and config == "ours":
        from crawler import settings as project_settings

        spied = dict(project_settings.EXTENSIONS) | {"bench.stallspy.StallSpy": 511}
        settings["EXTENSIONS"] = json.dumps(spied)
        env["STALLSPY_OUT"] = str(run_dir / "stallspy.json")
    cmd, cwd = command(config, run_dir, sites_dir, seeds, allow, settings)
    if extra.get("_profile"):
        cmd += ["--profile", str(run_dir / "crawl.prof")]
    offset = nginx.log_offset()
    load0 = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=dict(env, PYTHONPATH=str(cwd if config == "before" else PROJECT)),
        stdout=subprocess.DEVNULL, stderr=open(run_dir / "stderr", "wb"),  # noqa: SIM115
    )
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        proc.kill()
        raise
    wall = time.monotonic() - start
    if time.monotonic() - start > timeout:
        print(f"warning: {config} took {wall:.0f} s", file=sys.stderr)
    code = os.waitstatus_to_exitcode(status)
    stats_path = run_dir / "stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    requests = nginx.requests(offset)
    pages = [r for r in requests if r[4] != "/robots.txt"]
    statuses = Counter(r[2] for r in pages)
    urls = Counter((r[1], r[4]) for r in pages)
    cpu = usage.ru_utime + usage.ru_stime
    ok = statuses.get("200", 0)
    polite = politeness(requests, float(extra.get("_delay", 0))) if "_delay" in extra else {}
    return polite | {
        "config": config, "run": i, "exit": code, "wall": wall, "cpu": cpu,
        "user": usage.ru_utime, "sys": usage.ru_stime, "maxrss_mb": usage.ru_maxrss / 1024,
        "pages": ok, "fetches": len(pages), "distinct": len(urls),
        "twice": sum(1 for n in urls.values() if n > 1), "statuses": dict(statuses),
        "bytes": sum(int(r[3]) for r in pages), "ms_per_page": 1000 * cpu / ok if ok else 0,
        "items": stats.get("item_scraped_count", 0),
        "stall_max_ms": stats.get("reactor/stall_max_ms"),
        "stall_p99_ms": stats.get("reactor/stall_p99_ms"),
        "stalls_over_20ms": stats.get("reactor/stalls_over_20ms"),
        "stalls_over_100ms": stats.get("reactor/stalls_over_100ms"),
        "stall_max_busy_ms": stats.get("reactor/stall_max_busy_ms"),
        "stalls_busy_over_20ms": stats.get("reactor/stalls_busy_over_20ms"),
        "gc_full_max_ms": stats.get("gc/full_max_ms"),
        "stall_worst": stats.get("reactor/stall_worst"),
        "load": (load0, os.getloadavg()[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--configs", default="stock,ours,bare")
    parser.add_argument("--trees", default=DEFAULT_TREES,
                        help="comma-separated tree prefixes (bench/redis_workers.py's names)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra setting for this crawler's runs")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--politeness", type=float, default=0.0, metavar="DELAY",
        help="crawl with this per-host delay (host concurrency 1) for --window seconds and "
             "score politeness (this crawler only)",
    )
    parser.add_argument("--window", type=float, default=40.0)
    parser.add_argument(
        "--baseline", type=Path, default=None, metavar="DIR",
        help="an older checkout of the project (git archive): the config 'before' crawls with "
             "it, every feature on, for a before/after in one run; the stall probe is copied in",
    )
    parser.add_argument("--profile", action="store_true",
                        help="cProfile each crawl (scrapy --profile; kept with --keep)")
    parser.add_argument("--spy", action="store_true",
                        help="add bench/stallspy.py to the ours crawls: what each stall was "
                             "(stallspy.json in the run's folder; with --keep)")
    parser.add_argument("--json", default="")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.baseline is not None:
        global BASELINE
        BASELINE = args.baseline.resolve()
        probe = BASELINE / "crawler" / "extensions" / "stall.py"
        if not probe.exists():
            shutil.copy(PROJECT / "crawler" / "extensions" / "stall.py", probe)
            defaults = BASELINE / "crawler" / "defaults.py"
            if "REACTOR_STALL_INTERVAL" not in defaults.read_text():
                with defaults.open("a") as f:
                    f.write("\nREACTOR_STALL_INTERVAL = 0.01\n")
    extra = dict(kv.split("=", 1) for kv in args.set)
    if args.profile:
        extra["_profile"] = "1"
    if args.spy:
        extra["_spy"] = "1"
    if args.politeness:
        extra |= {"_delay": str(args.politeness), "CLOSESPIDER_TIMEOUT": str(args.window)}
    results: list[dict[str, Any]] = []
    try:
        with doc_site(args.trees, args.port, "bench-realcrawl-", delay=args.politeness,
                      keep=args.keep) as site:  # fmt: skip
            for i in range(args.runs):
                for config in args.configs.split(","):
                    r = run_config(config, i, site.root, site.sites, site.seeds, site.allow,
                                   site.nginx, extra, args.timeout)  # fmt: skip
                    results.append(r)
                    print(json.dumps(r), flush=True)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\n{'config':8} {'pages':>6} {'CPU s':>7} {'ms/page':>8} {'wall s':>7} "
          f"{'stall max':>9} {'p99':>5} {'>20ms':>6} {'>100ms':>6} {'busy max':>8} "
          f"{'busy>20':>7} {'RSS MB':>6}")
    for r in results:
        print(f"{r['config']:8} {r['pages']:>6} {r['cpu']:>7.1f} {r['ms_per_page']:>8.2f} "
              f"{r['wall']:>7.1f} {r['stall_max_ms'] or 0:>9.1f} {r['stall_p99_ms'] or 0:>5.0f} "
              f"{r['stalls_over_20ms'] or 0:>6} {r['stalls_over_100ms'] or 0:>6} "
              f"{r['stall_max_busy_ms'] or 0:>8.1f} {r['stalls_busy_over_20ms'] or 0:>7} "
              f"{r['maxrss_mb']:>6.0f}")
        if "rate_vs_ideal" in r:
            print(f"         politeness: rate vs ideal {r['rate_vs_ideal']}, gaps below the "
                  f"delay {r['gaps_below_delay']} of {r['gaps']}, smallest {r['min_gap']} s, "
                  f"median {r['median_gap']} s")
    by: dict[str, list[float]] = {}
    for r in results:
        by.setdefault(r["config"], []).append(r["ms_per_page"])
    if "stock" in by:
        for config, values in by.items():
            if config != "stock":
                ratio = statistics.median(by["stock"]) / statistics.median(values)
                print(f"CPU per page, stock / {config}: {ratio:.2f}x (medians)")


if __name__ == "__main__":
    main()
