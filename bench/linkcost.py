"""The cost of a link: CPU per page and per extracted link for a whole crawl, this crawler
against stock Scrapy, on the same finite site crawled to completion in the same run.

    .venv/bin/python bench/linkcost.py [--hosts 8] [--pages 250] [--links 300] [--runs 1]

The site is documentation-like: every page carries a few hundred links, most of them to pages
the crawl has already seen. Both crawls use the same concurrency (16 requests, 2 per host), no
delay, and write the same page items (URL, status, title, text, outlinks with anchor text) to a
JSON-lines feed; "+dedup+index" is this crawler with its default content pipelines on
(near-duplicate detection and the full-text index), work stock Scrapy does not do. Stock Scrapy
runs outside the project (plain defaults) with LinkExtractor and response.follow
(bench/stock_spider.py). CPU is the crawl process's user + system time, from the operating
system; the test server runs in this process and is not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devsite import HostSpec, SiteServer, build_site  # noqa: E402
from tests.crawling import crawl_command, normalized  # noqa: E402

COMMON = {"CONCURRENT_REQUESTS": 16, "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False}


def run(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Run a crawl; (CPU seconds, wall seconds) of that process alone."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        print(proc.stderr.read()[-3000:] if proc.stderr else "", file=sys.stderr)
        raise SystemExit(f"crawl failed: {' '.join(cmd[:6])}")
    return usage.ru_utime + usage.ru_stime, wall


def ours(
    tmp: Path, seeds: list[str], pipelines: bool = False, record: bool = True
) -> list[str]:
    settings = COMMON | {
        "RECORD_ENABLED": record,  # on by default: tmp/stats.record.jsonl
        "NEARDUP_ENABLED": pipelines,
        "INDEX_ENABLED": pipelines,
        "INDEX_PATH": tmp / "index.sqlite",
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0,
        "FRONTIER_DELAY_FACTOR": 0,
        "FRONTIER_HOST_CONCURRENCY": 2,
        "LOG_LEVEL": "INFO",
    }
    return crawl_command(tmp, seeds=seeds, settings=settings)


def stock(tmp: Path, seeds: list[str]) -> list[str]:
    seeds_file = tmp / "seeds.txt"
    seeds_file.write_text("".join(f"{s}\n" for s in seeds))
    settings = COMMON | {
        "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
        "DOWNLOAD_DELAY": 0,
        "LOG_FILE": tmp / "crawl.log",
        "FEED_EXPORT_ENCODING": "utf-8",
    }
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(ROOT / "bench" / "stock_spider.py"),
           "-a", f"seeds={seeds_file}", "-o", f"{tmp / 'items.jsonl'}:jsonlines"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--pages", type=int, default=250)
    parser.add_argument("--links", type=int, default=300)
    parser.add_argument("--runs", type=int, default=1, help="alternate the crawlers this often")
    parser.add_argument("--only", default="", help="comma-separated crawler names to run "
                        "(this crawler, no record, stock Scrapy, +dedup+index)")
    args = parser.parse_args()

    specs = [HostSpec(f"127.0.2.{i + 1}", pages=args.pages) for i in range(args.hosts)]
    graph = build_site(specs, links_per_page=args.links, cross_host_links=2, extras=False)
    crawlers = {
        "this crawler": ours,
        # the crawl record (RECORD_ENABLED, crawler/extensions/recorder.py) off: its cost
        "no record": lambda tmp, seeds: ours(tmp, seeds, record=False),
        "stock Scrapy": stock,
        "+dedup+index": lambda tmp, seeds: ours(tmp, seeds, pipelines=True),
    }
    if args.only:
        keep = [name.strip() for name in args.only.split(",")]
        crawlers = {name: build for name, build in crawlers.items() if name in keep}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in crawlers}
    with SiteServer(graph) as server:
        seeds = server.seeds()
        wanted = graph.reachable(seeds)
        for _ in range(args.runs):
            for name, build in crawlers.items():
                server.reset()
                with tempfile.TemporaryDirectory() as tmp:
                    cwd = Path(tmp) if build is stock else ROOT
                    cpu, wall = run(build(Path(tmp), seeds), cwd)
                    record = Path(tmp) / "stats.record.jsonl"
                    record_bytes = record.stat().st_size if record.exists() else 0
                fetched = set(normalized(server.records))
                links = sum(len(graph.links(url)) for url in fetched if url in wanted)
                rows[name].append({
                    "pages": len(fetched & wanted),
                    "links": links,
                    "cpu_s": cpu,
                    "wall_s": wall,
                    "pages_per_s": len(fetched & wanted) / wall,
                    "us_cpu_per_page": cpu / len(fetched) * 1e6,
                    "us_cpu_per_link": cpu / links * 1e6,
                    "record_B_per_page": record_bytes / max(len(fetched), 1),
                })
    print(f"{args.hosts} hosts x {args.pages + 1} pages, ~{args.links} links per page; "
          f"{len(wanted)} pages reachable")
    best = {name: min(r, key=lambda x: x["cpu_s"]) for name, r in rows.items()}
    print(f"{'':18}" + "".join(f"{name:>16}" for name in best))
    for key in next(iter(best.values())):
        print(f"{key:18}" + "".join(f"{best[n][key]:>16,.1f}" for n in best))
    if "this crawler" in best and "stock Scrapy" in best:
        a, b = best["this crawler"], best["stock Scrapy"]
        print(f"CPU per link, stock / this: {b['us_cpu_per_link'] / a['us_cpu_per_link']:.2f}x;"
              f" pages/s, this / stock: {a['pages_per_s'] / b['pages_per_s']:.2f}x")
    if "this crawler" in rows and "no record" in rows:
        on = sorted(r["us_cpu_per_page"] for r in rows["this crawler"])
        off = sorted(r["us_cpu_per_page"] for r in rows["no record"])
        print(f"CPU per page with the record, runs: {', '.join(f'{v:,.0f}' for v in on)} us; "
              f"without: {', '.join(f'{v:,.0f}' for v in off)} us; median cost "
              f"{statistics.median(on) - statistics.median(off):+,.1f} us per page "
              f"({statistics.median(on) / statistics.median(off) - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
