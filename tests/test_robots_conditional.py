"""A robots.txt refreshed during a crawl is asked for conditionally (RFC 9309 2.4 lets a crawler
use HTTP caching; RFC 9110 13.1): the refresh carries the copy's ``ETag`` and
``Last-Modified``, and the server's 304 keeps that copy in force, fresh again, with no body sent.

One real crawl of one host whose copy expires after a second (``ROBOTSTXT_CACHE_EXPIRY``) while
its ``Crawl-delay`` spreads its pages over several seconds, so robots.txt is refreshed mid-crawl.
"""

from __future__ import annotations

import pytest

from tests import hostile as h
from tests.crawling import loopback_settings, run_crawl

pytestmark = pytest.mark.integration

HOST = "127.0.0.160"
PAGES = 8
ETAG = '"robots-v1"'
LAST_MODIFIED = "Sat, 05 Dec 2026 10:00:00 GMT"
ROBOTS = b"User-agent: *\nDisallow: /p/1.html\nCrawl-delay: 0.5\n"


def robots(req: h.Req, conn: h.Conn) -> None:
    if req.headers.get("if-none-match") == ETAG:
        conn.head(304, [("ETag", ETAG)])
        return
    headers = [("Content-Type", "text/plain"), ("ETag", ETAG), ("Last-Modified", LAST_MODIFIED)]
    conn.answer(200, headers, ROBOTS)


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("robots-conditional")
    server = h.HostileServer()
    site = h.normal_site(server, HOST, pages=PAGES)
    server.route(HOST, "/robots.txt", robots)
    with server:
        result = run_crawl(
            tmp,
            seeds=[server.url(HOST)],
            settings=loopback_settings(ROBOTSTXT_CACHE_EXPIRY=1),
            timeout=120,  # a hang guard, not a speed requirement
        )
        server.wait_idle()
        yield result, server, site


def test_a_refresh_is_conditional_and_its_304_keeps_the_copy(crawl) -> None:
    result, server, site = crawl
    assert result.returncode == 0, result.log[-3000:]
    hits = server.hits_of(HOST, "/robots.txt")
    first, *refreshes = hits
    assert first.status == 200 and "if-none-match" not in first.headers
    assert refreshes, "the crawl outlasted the copy: it must have been refreshed"
    for hit in refreshes:
        assert hit.headers.get("if-none-match") == ETAG
        assert hit.headers.get("if-modified-since") == LAST_MODIFIED
        assert hit.status == 304
    # the renewed copy still decides: /p/1.html never fetched, every other page once
    pages = [x.path for x in server.hits_of(HOST) if x.path != "/robots.txt"]
    assert sorted(pages) == sorted(site - {"/robots.txt", "/p/1.html"})
    assert result.stats["robotstxt/not_modified"] == len(refreshes)
    assert "robotstxt/unreachable" not in result.stats
