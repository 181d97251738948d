"""The end of a crawl: a dozen lines instead of the stats dict, pages counted without robots.txt
fetches and 404s, broken links listed, the busiest hosts with their real gap, and an ETA on the
progress line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawler.extensions.progress import eta_text
from crawler.extensions.summary import _SettingsView, summary_lines
from devsite import HostSpec, SiteServer, build_site
from tests.crawling import run_crawl, write_site

HOSTS = ["127.0.0.2", "127.0.0.3"]


@pytest.mark.integration
def test_a_crawl_ends_with_a_summary_that_counts_pages_not_robots_or_404s(
    tmp_path: Path,
) -> None:
    graph = build_site([HostSpec(h, pages=5) for h in HOSTS], links_per_page=2, cross_host_links=1)
    sites = tmp_path / "sites"
    write_site(sites, "pair", f"[scope]\nhosts = {json.dumps(HOSTS)}\n")
    with SiteServer(graph) as server:
        missing = [server.url(HOSTS[0], "/p/998.html"), server.url(HOSTS[1], "/p/999.html")]
        result = run_crawl(
            tmp_path,
            "pair",
            seeds=server.seeds() + missing,
            sites_dir=sites,
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_MIN_DELAY": 0.05,
                "LOG_LEVEL": "INFO",
            },
        )
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    pages = [r for r in records if r.path != "/robots.txt"]
    ok = [r for r in pages if r.status == 200]
    robots = [r for r in records if r.path == "/robots.txt"]
    assert len(robots) == 2 and all(r.status == 404 for r in robots)  # no broken link, though
    stats = result.stats
    assert stats["pages/ok"] == len(ok) and stats["pages/status/404"] == 2
    assert sorted(b["url"] for b in stats["broken_links"]) == sorted(missing)
    assert "Dumping Scrapy stats" not in result.log and "Scrapy stats:" not in result.log
    start = result.log.index("Crawl pair ended (finished) after ")
    summary = result.log[start:].splitlines()
    assert f": {len(ok)} pages OK, 2 broken links" in summary[0]
    assert f"  pages by status: 200 x{len(ok)}, 404 x2" in summary
    assert any(line.startswith("  broken links: ") and missing[0] in line for line in summary)
    busiest = next(line for line in summary if line.startswith("  busiest hosts: "))
    for host in HOSTS:
        n = sum(1 for r in ok if r.host == host)
        # hosts as the frontier keys them (by name: politeness is per host, whatever the port)
        assert f" {host} {n} pages, gap " in busiest
    assert any('next: search: scrapy search "some words" --index ' in line for line in summary)
    assert len(summary) <= 14


@pytest.mark.integration
def test_the_full_stats_stay_in_the_log_at_debug(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOSTS[0], pages=1)], links_per_page=1, cross_host_links=0)
    with SiteServer(graph) as server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings={"ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0.05},
        )
    assert result.returncode == 0, result.log[-3000:]
    assert "Scrapy stats:\n{" in result.log
    assert f"'pages/ok': {result.stats['pages/ok']}," in result.log


class _Settings(_SettingsView):
    def __init__(self, **kw: object) -> None:
        self.jobdir = str(kw.get("jobdir", ""))
        self.stats_file = str(kw.get("stats_file", ""))
        self.index_enabled = True
        self.index_path = str(kw.get("index_path", ""))
        self.crawldb = bool(kw.get("crawldb", False))


def test_summary_lines_say_what_happened_and_what_to_do_next() -> None:
    stats = {
        "finish_reason": "shutdown",
        "elapsed_time_seconds": 125.2,
        "downloader/response_bytes": 1_234_567,
        "robotstxt/response_count": 3,
        "downloader/exception_type_count/twisted.internet.error.TimeoutError": 4,
        "downloader/exception_type_count/twisted.internet.error.ConnectionRefusedError": 1,
        "robotstxt/denied": 2,
        "limits/page_links": 1,
        "frontier/rejected/seen": 900,
        "frontier/rejected/host_budget": 60,
        "neardup/exact": 2,
        "neardup/near": 5,
        "frontier/queued_at_close": 42,
        "index/documents": 100,
        "pages/ok": 110,
        "pages/broken": 7,
    }
    broken = [(f"http://h/{i}", 404, f"http://h/{i}0" if i % 2 else "") for i in range(7)]
    lines = summary_lines(
        "web",
        stats,
        statuses={200: 105, 304: 5, 404: 7, 500: 1},
        broken=broken,
        busiest=[("a.example", 60, 1.234), ("b.example", 50, None)],
        hosts=3,
        settings=_Settings(jobdir="crawls/web-1", stats_file="s.json"),
    )
    assert lines == [
        "Crawl web ended (shutdown) after 2m05s: 110 pages OK, 7 broken links, "
        "1 other error answer",
        "  pages by status: 200 x105, 304 x5, 404 x7, 500 x1",
        "  downloaded 1.2 MB; pages from 3 hosts (3 robots.txt fetches)",
        "  errors: TimeoutError 4, robots.txt denied 2, ConnectionRefusedError 1",
        "  limits hit: page_links 1",
        "  URLs not queued: seen 900, host_budget 60",
        "  duplicates: 2 exact, 5 near (indexed as aliases)",
        "  broken links: http://h/0 (404), http://h/1 (404, on http://h/10), http://h/2 (404),"
        " http://h/3 (404, on http://h/30), http://h/4 (404) and 2 more, all in s.json"
        " (broken_links)",
        "  busiest hosts: a.example 60 pages, gap 1.23s; b.example 50 pages, gap -",
        "  left in the frontier: 42 URLs",
        "  next: resume: run the same command again (JOBDIR=crawls/web-1)",
        "  next: recrawl later with conditional GET: -s RECRAWL_INTERVAL=86400",
        '  next: search: scrapy search "some words" -s JOBDIR=crawls/web-1',
    ]


def test_an_interrupted_crawl_without_jobdir_is_told_how_to_be_resumable() -> None:
    lines = summary_lines(
        "web",
        {"finish_reason": "shutdown", "frontier/queued_at_close": 3},
        statuses={},
        broken=[],
        busiest=[],
        hosts=0,
        settings=_Settings(crawldb=True),
    )
    assert lines[0] == "Crawl web ended (shutdown) after 0.0s: 0 pages OK"
    assert "  next: to make a crawl resumable, give it a job folder: -s JOBDIR=crawls/web-1" in (
        lines
    )
    assert "  next: recrawl: run the same command again; it refetches only what is due" in lines


def test_eta_only_when_it_can_be_known() -> None:
    assert eta_text(0, 3.0) == ""  # nothing queued
    assert eta_text(100, 0.0) == ""  # no page came in since the last line
    assert eta_text(30, 1.0) == "; queue empty in ~30s at this rate"
    assert eta_text(540, 1.0) == "; queue empty in ~9m at this rate"
    assert eta_text(9000, 1.0) == "; queue empty in ~2.5h at this rate"
