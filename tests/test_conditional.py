"""Conditional GET: the middleware's headers, and the devsite server that answers them."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.extensions.recrawl import RecrawlExtension
from crawler.middlewares.conditional import CONDITIONAL_META, ConditionalGetMiddleware
from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer

# --- the server itself ----------------------------------------------------------------------


def test_routed_server_sends_validators_and_304(tmp_path: Path) -> None:
    import urllib.request

    with RoutedSiteServer(build_site([HostSpec("127.0.0.2", pages=2)])) as server:
        url = server.url("127.0.0.2", "/p/0.html")
        with urllib.request.urlopen(url) as r:
            etag, lm = r.headers["ETag"], r.headers["Last-Modified"]
        for headers in ({"If-None-Match": etag}, {"If-Modified-Since": lm}):
            try:
                urllib.request.urlopen(urllib.request.Request(url, headers=headers))
            except urllib.error.HTTPError as exc:
                assert exc.code == 304
            else:
                raise AssertionError("no 304")
        server.set_body("127.0.0.2", "/p/0.html", b"<p>new</p>")
        again = urllib.request.Request(url, headers={"If-None-Match": etag})
        with urllib.request.urlopen(again) as r:
            assert r.status == 200 and r.read() == b"<p>new</p>"
        statuses = [r.status for r in server.records]
    assert statuses == [200, 304, 304, 200]


# --- the middleware -------------------------------------------------------------------------


@pytest.fixture
def conditional(tmp_path: Path):
    crawler = get_crawler(Spider, {"CRAWLDB_PATH": str(tmp_path / "db.sqlite")})
    crawler.spider = Spider("s")
    ext = RecrawlExtension.from_crawler(crawler)
    lm = "Wed, 21 Oct 2015 07:28:00 GMT"
    ext.record("http://a.example/x", 200, etag='"e1"', last_modified=lm)
    ext.record("http://a.example/only-etag", 200, etag='"e2"')
    ext.record("http://a.example/none", 200)
    middleware = ConditionalGetMiddleware.from_crawler(crawler)
    # what the extension sends at spider_opened
    crawler.signals.send_catch_log(crawler_signals.crawldb_opened, db=ext.db)
    yield middleware, crawler
    ext._engine_stopped()


def test_refetch_carries_the_stored_validators(conditional) -> None:
    mw, crawler = conditional
    request = Request("http://A.example:80/x")
    mw.process_request(request)
    assert request.headers[b"If-None-Match"] == b'"e1"'
    assert request.headers[b"If-Modified-Since"] == b"Wed, 21 Oct 2015 07:28:00 GMT"
    assert 304 in request.meta["handle_httpstatus_list"]  # a plain Spider would drop the 304

    request = Request("http://a.example/only-etag")
    mw.process_request(request)
    assert request.headers[b"If-None-Match"] == b'"e2"'
    assert b"If-Modified-Since" not in request.headers

    for url in ("http://a.example/none", "http://a.example/unknown"):
        request = Request(url)
        mw.process_request(request)
        assert b"If-None-Match" not in request.headers and not request.meta
    assert crawler.stats.get_value("crawldb/conditional_requests") == 2


def test_validators_do_not_follow_a_redirect_and_explicit_ones_stay(conditional) -> None:
    mw, _ = conditional
    request = Request("http://a.example/x")
    mw.process_request(request)
    redirected = request.replace(url="http://a.example/elsewhere")
    mw.process_request(redirected)
    assert b"If-None-Match" not in redirected.headers
    assert CONDITIONAL_META not in redirected.meta
    back = redirected.replace(url="http://a.example/only-etag")
    mw.process_request(back)
    assert back.headers[b"If-None-Match"] == b'"e2"'

    own = Request("http://a.example/x", headers={"If-None-Match": '"mine"'})
    mw.process_request(own)
    assert own.headers[b"If-None-Match"] == b'"mine"'
    robots = Request("http://a.example/x", meta={"robotstxt_for": "http://a.example"})
    mw.process_request(robots)
    assert b"If-None-Match" not in robots.headers


def test_a_304_carries_the_stored_record_to_the_spider(conditional) -> None:
    """The spider reads no crawl database: a 304 brings it the page's record (its outlinks,
    validators) in its meta; other answers, and pages the database does not know, bring none."""
    from scrapy.http import Response

    from crawler.items import NOT_MODIFIED_META

    mw, _ = conditional
    request = Request("http://A.example:80/x")
    mw.process_request(request)
    response = Response("http://a.example/x", status=304, request=request)
    assert mw.process_response(request, response) is response
    record = response.meta[NOT_MODIFIED_META]
    assert record.etag == '"e1"' and record.last_modified == "Wed, 21 Oct 2015 07:28:00 GMT"
    for url, status in (("http://a.example/x", 200), ("http://a.example/unknown", 304)):
        other = Request(url)
        mw.process_response(other, Response(url, status=status, request=other))
        assert other.meta.get(NOT_MODIFIED_META) is None
