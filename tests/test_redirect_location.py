"""A ``Location`` is followed where a browser goes (WHATWG's join), not where ``urljoin`` goes.

``Location: \\landing`` is the path ``/landing`` to a browser (a backslash is a slash in a
special URL); RFC 3986 (``urljoin``, after Scrapy's ``safe_url_string``) makes it the relative
path ``%5Clanding``. A real crawl against devsite: a page's redirect, and robots.txt's (RFC 9309
2.3.1.2: followed like any other), each written with backslashes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler.middlewares.redirect import CountingRedirectMiddleware, redirect_target
from devsite import HostSpec, build_site
from devsite.routed import Answer, RoutedSiteServer
from tests.crawling import loopback_settings, run_crawl

HOST = "127.0.0.2"


def _answer(status: int, body: str = "", content_type: str = "text/html", **headers: str) -> Answer:
    return status, [("Content-Type", content_type), *headers.items()], body.encode()


def test_a_backslash_location_is_followed_as_a_browser_follows_it(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOST, pages=1)], links_per_page=1, cross_host_links=0)
    server = RoutedSiteServer(graph)
    server.route(HOST, "/robots.txt", lambda ask: _answer(301, Location="\\rules\\robots.txt"))
    server.route(
        HOST,
        "/rules/robots.txt",
        lambda ask: _answer(200, "User-agent: *\nDisallow: /private\n", "text/plain"),
    )
    server.route(HOST, "/moved", lambda ask: _answer(301, Location="\\landing"))
    server.route(HOST, "/landing", lambda ask: _answer(200, "<title>Landing</title><p>here</p>"))
    with server:
        result = run_crawl(
            tmp_path,
            seeds=[server.url(HOST, "/moved")],
            settings=loopback_settings(),
            timeout=90,
        )
    assert result.returncode == 0, result.log[-3000:]
    fetched = [r.path for r in server.records]
    assert fetched[:4] == ["/robots.txt", "/rules/robots.txt", "/moved", "/landing"], fetched
    assert not any("%5C" in path for path in fetched), fetched


def test_the_join_is_whatwg_s() -> None:
    """Where urljoin and WHATWG differ (web-platform-tests urltestdata: backslashes, another
    scheme's name before fewer than two slashes), and where they agree."""
    page = "http://h.test/a/b?z"
    assert redirect_target(page, b"\\other") == "http://h.test/other"
    assert redirect_target(page, b"\\\\x.test\\a") == "http://x.test/a"
    assert redirect_target(page, b"https:/x.test/a") == "https://x.test/a"
    assert redirect_target(page, b"http:/x") == "http://h.test/x"
    assert redirect_target(page, b"///x.test/a") == "http://x.test/a"
    assert redirect_target(page, "/caf\u00e9".encode()) == "http://h.test/caf%C3%A9"
    assert redirect_target(page, b"mailto:a@b.test") is None


class _Undecodable(HtmlResponse):
    """A page whose text must not be needed: the redirect middleware runs on the reactor
    thread, where decoding a 4 MB body (and guessing its charset) stalls every host."""

    @property
    def encoding(self) -> str:
        raise AssertionError("the body was decoded")


def test_a_location_is_joined_without_decoding_the_page_or_a_deprecated_call() -> None:
    middleware = CountingRedirectMiddleware.from_crawler(get_crawler())
    request = Request("http://h.test/a/p")
    for status in (200, 301):
        response = _Undecodable(
            request.url, status=status, headers={"Location": "\\b"}, body=b"<p>x", request=request
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Scrapy's: "passing a 'spider' argument"
            out = middleware.process_response(request, response)
        if status == 200:
            assert out is response and out.headers[b"Location"] == b"\\b"  # as the server sent
        else:
            assert isinstance(out, Request) and out.url == "http://h.test/b"
