"""Recrawl benchmark: a second crawl of an unchanged multi-host site, against the first.

    .venv/bin/python bench/recrawl.py [--hosts 20] [--pages 25] [--delay 0.05]

This crawler runs with a crawl database (``CRAWLDB_PATH``) and its robots.txt, conditional-GET
and recrawl components; the second crawl starts once every page is due (``RECRAWL_INTERVAL``
seconds after the first) and sends ``If-None-Match`` / ``If-Modified-Since``. Stock Scrapy
(default scheduler, downloader and middlewares, no HTTP cache) crawls the same site twice for
comparison: it has nothing to remember, so its second crawl costs what the first did.

The server answers validators like any web server (``ETag``, ``Last-Modified``, ``304``), and
counts what it sent: requests, statuses and body bytes. Scrapy's ``downloader/response_bytes``
(status line, headers and body as received) is reported too. Targets of the issue: 95 % or more
of the second crawl's page requests answered 304, and its bytes at most 5 % of the first's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import run_crawl

OURS = {
    "DOWNLOADER_MIDDLEWARES": json.dumps(
        {
            "crawler.middlewares.address_safety.AddressSafetyMiddleware": 50,
            "crawler.middlewares.robots.RobotsMiddleware": 100,
            "crawler.middlewares.conditional.ConditionalGetMiddleware": 450,
        }
    ),
    "EXTENSIONS": json.dumps(
        {
            "crawler.extensions.statsfile.StatsFile": 900,
            "crawler.extensions.recrawl.RecrawlExtension": 100,
        }
    ),
}


def measure(records: list[Any], stats: dict[str, Any], seconds: float) -> dict[str, Any]:
    pages = [r for r in records if r.path != "/robots.txt"]
    statuses = Counter(r.status for r in pages)
    return {
        "requests": len(records),
        "robots.txt requests": len(records) - len(pages),
        "page requests": len(pages),
        "200": statuses.get(200, 0),
        "304": statuses.get(304, 0),
        "share 304": round(statuses.get(304, 0) / max(1, len(pages)), 4),
        "body bytes": sum(r.bytes for r in records),
        "response bytes": stats.get("downloader/response_bytes", 0),
        "request bytes": stats.get("downloader/request_bytes", 0),
        "seconds": round(seconds, 2),
    }


def crawl_twice(
    server: RoutedSiteServer, settings: dict[str, Any], wait: float
) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in ("first", "second"):
            server.reset()
            workdir = Path(tmp) / run
            workdir.mkdir()
            started = time.monotonic()
            run_settings = {**settings, "INDEX_PATH": workdir / "index.sqlite"}
            crawl = run_crawl(workdir, seeds=server.seeds(), settings=run_settings, timeout=900)
            seconds = time.monotonic() - started
            if crawl.returncode != 0:
                print(crawl.log[-3000:], file=sys.stderr)
                raise SystemExit(1)
            out.append(measure(server.records, crawl.stats, seconds))
            if run == "first":
                time.sleep(wait)  # every page comes due
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=25)
    parser.add_argument("--delay", type=float, default=0.05, help="politeness delay per host")
    parser.add_argument(
        "--page-bytes",
        type=int,
        default=0,
        help="pad every page with this many bytes (generated pages are about 1 KB; the median "
        "HTML document on the web is about 30 KB)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    specs = [HostSpec(f"127.0.2.{i + 1}", pages=args.pages) for i in range(args.hosts)]
    # No extras (big binary, traps, endless calendar): stock Scrapy has no trap defenses, and
    # one 64 KiB file per host would flatter the byte ratio.
    graph = build_site(specs, links_per_page=4, cross_host_links=1, extras=False)
    common = {"ALLOW_PRIVATE_ADDRESSES": True, "LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 32}
    interval = 2.0
    results: dict[str, list[dict[str, Any]]] = {}
    server = RoutedSiteServer(graph, pad_html=args.page_bytes)
    with server, tempfile.TemporaryDirectory() as db_dir:
        results["this crawler"] = crawl_twice(
            server,
            {
                **common,
                **OURS,
                "FRONTIER_MIN_DELAY": args.delay,
                "FRONTIER_DELAY_FACTOR": 0,
                "CRAWLDB_PATH": Path(db_dir) / "crawldb.sqlite",
                "RECRAWL_INTERVAL": interval,
            },
            wait=interval + 0.1,
        )
        results["stock Scrapy"] = crawl_twice(
            server,
            {
                **common,
                "SCHEDULER": "scrapy.core.scheduler.Scheduler",
                "DOWNLOADER": "scrapy.core.downloader.Downloader",
                "DOWNLOAD_DELAY": args.delay,
                "DOWNLOAD_DELAY_JITTER": 0,
                "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            },
            wait=0,
        )

    print(
        f"{args.hosts} hosts x {args.pages + 1} pages (+{args.page_bytes} bytes of padding), "
        f"politeness delay {args.delay}s"
    )
    columns = [(name, run) for name in results for run in ("first", "second")]
    print(f"{'':22}" + "".join(f"{f'{n[:12]} {r}':>22}" for n, r in columns))
    for key in results["this crawler"][0]:
        row = [results[n][0 if r == "first" else 1][key] for n, r in columns]
        print(f"{key:22}" + "".join(f"{v!s:>22}" for v in row))
    summary = {}
    for name, (first, second) in results.items():

        def ratio(key: str, a: dict[str, Any] = first, b: dict[str, Any] = second) -> float:
            return round(b[key] / max(1, a[key]), 4)

        total = (second["response bytes"] + second["request bytes"]) / max(
            1, first["response bytes"] + first["request bytes"]
        )
        summary[name] = {
            "share 304": second["share 304"],
            "body bytes second / first": ratio("body bytes"),
            "response bytes second / first": ratio("response bytes"),
            "request + response bytes second / first": round(total, 4),
        }
        print(
            f"{name}: second crawl {second['share 304']:.1%} 304; of the first crawl's bytes: "
            f"bodies {ratio('body bytes'):.2%}, responses with headers "
            f"{ratio('response bytes'):.2%}, requests and responses {total:.2%}"
        )
    if args.json:
        out = {"args": vars(args) | {"json": None}, **results, "summary": summary}
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
