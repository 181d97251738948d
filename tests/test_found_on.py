"""Where a link was found: a real crawl of the devsite, in memory and on a real Redis, where one
page answers 404. Every request the frontier hands out carries the page that led to it as
``Referer`` (as stock Scrapy's RefererMiddleware sets it), and the broken link's summary line,
stats file entry and crawl record name that page. The server's own record of requests and the
items' outlinks are the judges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawler.report.recordfile import read_records
from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import record_url, run_crawl, write_site
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

HOSTS = ("127.0.0.2", "127.0.0.3")
BROKEN = ("127.0.0.2", "/p/3.html")


def _site() -> RoutedSiteServer:
    graph = build_site(
        [HostSpec(HOSTS[0], pages=6), HostSpec(HOSTS[1], pages=4)],
        links_per_page=3,
        cross_host_links=1,
    )
    server = RoutedSiteServer(graph)
    server.route(*BROKEN, lambda ask: (404, [("Content-Type", "text/html")], b"gone"))
    return server


def _linking(items: list[dict[str, Any]]) -> dict[str, set[str]]:
    """URL -> the fetched pages whose links include it."""
    pages: dict[str, set[str]] = {}
    for item in items:
        for link in item["outlinks"]:
            pages.setdefault(link["url"], set()).add(item["url"])
    return pages


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_broken_link_is_reported_with_the_page_it_was_found_on(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    settings: dict[str, Any] = {
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.02,
        "LOG_LEVEL": "INFO",
        "TUNING": {"record_interval": 0.5},
    }
    if backend == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        settings |= {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
            "FRONTIER_REDIS_KEY": fresh_key(),
            "INDEX_PATH": tmp_path / "index.sqlite",
        }
    sites = tmp_path / "sites"
    write_site(sites, "foundon", f"[scope]\nhosts = {json.dumps(list(HOSTS))}\n")
    with _site() as server:
        broken_url = server.url(*BROKEN)
        result = run_crawl(
            tmp_path, "foundon", seeds=server.seeds(), sites_dir=sites, settings=settings
        )
        records = server.records
        seeds = set(server.seeds())
    assert result.returncode == 0, result.log[-3000:]
    linking = _linking(result.items)

    # every request but a seed's and robots.txt's carries the page it was found on
    pages = [r for r in records if r.path != "/robots.txt"]
    assert any(record_url(r) == broken_url for r in pages)
    for r in pages:
        referer = r.headers.get("Referer")
        if record_url(r) in seeds:
            assert referer is None, r
        else:
            assert referer in linking[record_url(r)], (record_url(r), referer)

    # the broken link, named with that page: stats file, summary line, crawl record
    [broken] = result.stats["broken_links"]
    assert broken["url"] == broken_url and broken["status"] == 404
    assert broken["found_on"] in linking[broken_url]
    [asked] = [r for r in pages if record_url(r) == broken_url]
    assert asked.headers["Referer"] == broken["found_on"]
    start = result.log.index("Crawl foundon ended (finished)")
    summary = result.log[start:].splitlines()
    line = next(x for x in summary if x.startswith("  broken links: "))
    assert line == f"  broken links: {broken_url} (404, on {broken['found_on']})"
    record = read_records([tmp_path / "stats.record.jsonl"])
    assert [(b["url"], b["referer"]) for b in record.broken] == [
        (broken_url, broken["found_on"])
    ]
