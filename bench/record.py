"""The crawl record's cost per fetch, measured on its own: ``fetch_finished`` sent through
Scrapy's signal manager (as the downloader sends it) with and without the record's receiver,
and the record's bytes per fetch.

    .venv/bin/python bench/record.py [--fetches 50000] [--hosts 200] [--runs 5]

A whole crawl's CPU (bench/linkcost.py, "this crawler" against "no record") varies by a few
per cent from run to run, more than the record costs; this isolates it. Each fetch has a
200 response with a Content-Type, as a page does; the snapshot loop is not running (it costs
one ``frontier.counts()`` per record_interval (TUNING), not per page).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy import Request  # noqa: E402
from scrapy.http import HtmlResponse  # noqa: E402
from scrapy.utils.httpobj import urlparse_cached  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from crawler import signals as crawler_signals  # noqa: E402
from crawler.extensions.recorder import CrawlRecordExtension  # noqa: E402
from crawler.frontier import Outcome  # noqa: E402
from crawler.report.recordfile import RecordWriter  # noqa: E402


def one_run(fetches: int, hosts: int, record: bool, tmp: Path) -> tuple[float, int]:
    """CPU seconds per fetch for ``fetches`` signals, and the record's size in bytes."""
    crawler = get_crawler(settings_dict={"TUNING": {"record_max_fetches": fetches}})
    # a receiver like the scheduler's, so the dispatch cost is counted as in a crawl
    crawler.signals.connect(lambda request, outcome, duration: None,
                            crawler_signals.fetch_finished)  # fmt: skip
    path = tmp / f"record-{record}.jsonl"
    path.unlink(missing_ok=True)
    ext = CrawlRecordExtension(crawler)
    if record:
        ext.writer = RecordWriter(path, {"worker": "bench"}, time.time())
        crawler.signals.connect(ext.fetch_finished, crawler_signals.fetch_finished)
    pages = []
    for i in range(fetches):
        url = f"http://host{i % hosts}.example/p/{i}.html"
        request = Request(url, meta={"depth": i % 7})
        response = HtmlResponse(url, body=b"<html></html>", request=request,
                                headers={"Content-Type": "text/html; charset=utf-8"})  # fmt: skip
        urlparse_cached(request)  # as the downloader's slot lookup does before any fetch
        pages.append((request, response))
    send = crawler.signals.send_catch_log
    start = time.process_time()
    for request, response in pages:
        send(crawler_signals.fetch_finished, request=request, outcome=Outcome.FETCHED,
             duration=0.05, response=response, followed_by=None, status=200,
             size=12345)  # fmt: skip
    cpu = time.process_time() - start
    if ext.writer is not None:
        ext.writer.close()
    return cpu / fetches, path.stat().st_size if path.exists() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=50_000)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    on, off, size = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            off.append(one_run(args.fetches, args.hosts, False, Path(tmp))[0])
            cpu, size = one_run(args.fetches, args.hosts, True, Path(tmp))
            on.append(cpu)
    a, b = statistics.median(on) * 1e6, statistics.median(off) * 1e6
    print(f"{args.fetches:,} fetches of {args.hosts} hosts, median of {args.runs} runs")
    print(f"fetch_finished without the record: {b:.1f} us CPU per fetch")
    print(f"fetch_finished with the record:    {a:.1f} us CPU per fetch")
    print(f"the record's cost: {a - b:.1f} us CPU and {size / args.fetches:.1f} bytes per fetch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
