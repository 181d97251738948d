"""Politeness benchmark: how close to the ideal polite rate a crawl gets, and whether any host
ever saw a gap shorter than the delay. Runs this crawler and stock Scrapy on the same site in
the same run.

    .venv/bin/python bench/politeness.py [--hosts 30] [--pages 12] [--delay 0.5] [--response 0.05]

Ideal: each host is fetched once per (delay + response time), so a host with n pages needs
n x response + (n - 1) x delay from its first fetch to its last. The score of a crawl is the
ideal span over the real span, per host, averaged (1.0 = the ideal polite rate). Both crawls run
the project's spider and middlewares; "stock Scrapy" swaps in Scrapy's own scheduler and
downloader, with DOWNLOAD_DELAY set to the same delay, CONCURRENT_REQUESTS_PER_DOMAIN = 1 and
no jitter; its delay counts start to start, so its gaps at the server fall below the delay.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devsite import HostSpec, SiteServer, build_site
from tests.crawling import per_host, run_crawl


def measure(records, pages_per_host: int, delay: float, response: float) -> dict[str, float]:
    hosts = per_host(records)
    scores, gaps = [], []
    for recs in hosts.values():
        if len(recs) < 2:
            continue
        span = recs[-1].end - recs[0].start
        ideal = len(recs) * response + (len(recs) - 1) * delay
        scores.append(ideal / span)
        gaps += [b.start - a.end for a, b in pairwise(recs)]
    first = min(r.start for r in records)
    last = max(r.end for r in records)
    return {
        "pages": len(records),
        "hosts": len(hosts),
        "seconds": round(last - first, 2),
        "pages_per_s": round(len(records) / (last - first), 2),
        "ideal_pages_per_s": round(len(hosts) / (delay + response), 2),
        "rate_vs_ideal": round(statistics.mean(scores), 3),
        "min_gap": round(min(gaps), 3),
        "median_gap": round(statistics.median(gaps), 3),
        "gaps_below_delay": sum(g < delay - 0.002 for g in gaps),
        "gaps": len(gaps),
        "max_in_flight_per_host": 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=30)
    parser.add_argument("--pages", type=int, default=12)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--response", type=float, default=0.05)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    specs = [
        HostSpec(f"127.0.1.{i + 1}", pages=args.pages, delay=args.response)
        for i in range(args.hosts)
    ]
    graph = build_site(specs, links_per_page=4, cross_host_links=1, extras=False)
    common = {
        "ALLOW_PRIVATE_ADDRESSES": True,
        "LOG_LEVEL": "INFO",
        "CONCURRENT_REQUESTS": 32,
    }
    crawlers = {
        "this crawler": {
            **common,
            "FRONTIER_MIN_DELAY": args.delay,
            "FRONTIER_DELAY_FACTOR": 0,
        },
        "stock Scrapy": {
            **common,
            "SCHEDULER": "scrapy.core.scheduler.Scheduler",
            "DOWNLOADER": "scrapy.core.downloader.Downloader",
            "DOWNLOAD_DELAY": args.delay,
            "DOWNLOAD_DELAY_JITTER": 0,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        },
    }
    results = {}
    with SiteServer(graph) as server:
        for name, settings in crawlers.items():
            server.reset()
            with tempfile.TemporaryDirectory() as tmp:
                crawl = run_crawl(Path(tmp), seeds=server.seeds(), settings=settings, timeout=600)
            if crawl.returncode != 0:
                print(crawl.log[-3000:], file=sys.stderr)
                return 1
            result = measure(server.records, args.pages, args.delay, args.response)
            result["max_in_flight_per_host"] = max(
                server.max_concurrency(s.address) for s in specs
            )
            results[name] = result

    keys = list(next(iter(results.values())))
    print(f"{args.hosts} hosts x {args.pages + 1} pages, delay {args.delay}s, "
          f"response {args.response}s")
    print(f"{'':24}" + "".join(f"{name:>16}" for name in results))
    for key in keys:
        print(f"{key:24}" + "".join(f"{results[n][key]!s:>16}" for n in results))
    ours, stock = results["this crawler"], results["stock Scrapy"]
    print(f"rate ratio (this / stock): {ours['pages_per_s'] / stock['pages_per_s']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, **results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
