"""429/503 with Retry-After: the host is left alone as long as it asks, then the page is fetched.

One real crawl of hostile hosts next to a normal site, judged from the server's record.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from scrapy import Request
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawler.download.robots_request import robots_request
from crawler.middlewares.retry_after import RetryAfterMiddleware, parse_retry_after
from crawler.middlewares.robots_requests import retry_after
from tests import hostile as h
from tests.crawling import run_crawl

SECONDS, DATE, ABSURD, ALWAYS, NORMAL = (f"127.0.0.{i}" for i in range(81, 86))
WAIT = 3


def test_parse_retry_after() -> None:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_retry_after("120") == 120
    assert parse_retry_after(format_datetime(now + timedelta(seconds=90), usegmt=True), now) == 90
    assert parse_retry_after(format_datetime(now - timedelta(days=1), usegmt=True), now) == 0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("-5") is None


def test_robots_txt_is_told_by_the_request_not_by_its_path() -> None:
    """A robots.txt redirect hop (any path) is left to the robots.txt middleware's rules; a
    page that happens to be at /robots.txt (a link to it) is a page like any other."""
    middleware = RetryAfterMiddleware(get_crawler())
    hop = robots_request("http://a.test", "http://a.test/moved/rules.txt", 1)
    busy = Response(hop.url, status=503, headers={"Retry-After": b"5"})
    assert middleware.process_response(hop, busy) is busy
    page = Request("http://b.test/robots.txt")
    answer = Response(page.url, status=503, headers={"Retry-After": b"5"})
    again = middleware.process_response(page, answer)
    assert isinstance(again, Request) and again.url == page.url


def test_a_retry_after_of_odd_digits_is_unreadable_not_an_error() -> None:
    """A header byte 0xB2 is Latin-1's "²", which ``str.isdigit`` takes for a digit and
    ``float`` refuses: the page's and robots.txt's readers both find no delay in it."""
    assert parse_retry_after(b"\xb2".decode("latin-1")) is None
    answer = Response("http://a.test/robots.txt", status=503, headers={"Retry-After": b"\xb2"})
    assert retry_after(answer) is None


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("retry_after")
    server = h.HostileServer()
    busy = h.page(h.links_page([], "finally"))
    home = h.page(h.links_page(["/busy"], "home"))
    for address in (SECONDS, DATE, ABSURD, ALWAYS):
        server.route(address, "/", home)
    server.route(SECONDS, "/busy", h.retry_after(429, str(WAIT), busy))
    server.route(DATE, "/busy", h.retry_after(503, h.http_date_in(WAIT), busy))
    server.route(ABSURD, "/busy", h.retry_after(429, "999999", busy))
    server.route(ALWAYS, "/busy", h.retry_after(429, "1", busy, times=100))
    normal = h.normal_site(server, NORMAL, pages=5)
    with server:
        result = run_crawl(
            tmp,
            seeds=[server.url(a) for a in (SECONDS, DATE, ABSURD, ALWAYS, NORMAL)],
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_MIN_DELAY": 0.05,
                "FRONTIER_DELAY_FACTOR": 0,
                "RETRY_TIMES": 2,  # a 429/503 is asked again as often as any "try again"
            },
            timeout=90,
        )
        server.wait_idle()
        yield result, server, normal


def pages(server: h.HostileServer, address: str) -> list[h.Hit]:
    return [x for x in server.hits_of(address) if x.path != "/robots.txt"]


@pytest.mark.parametrize(("address", "least"), [(SECONDS, WAIT), (DATE, WAIT - 1)])
def test_host_waits_retry_after_then_page_is_fetched(crawl, address: str, least: float) -> None:
    result, server, _ = crawl
    assert result.returncode == 0, result.log[-3000:]
    hits = pages(server, address)
    expected_status = 429 if address == SECONDS else 503
    assert [(x.path, x.status) for x in hits] == [
        ("/", 200),
        ("/busy", expected_status),
        ("/busy", 200),
    ]
    # An HTTP date has whole seconds: it may say up to 1 s less than WAIT.
    assert hits[2].start - hits[1].end >= least


def test_absurd_retry_after_skips_the_host_with_a_log_line(crawl) -> None:
    result, server, _ = crawl
    assert [(x.path, x.status) for x in pages(server, ABSURD)] == [("/", 200), ("/busy", 429)]
    assert result.stats["retry_after/host_skipped"] == 1
    assert result.log.count(f"Skipping host {ABSURD}") == 1


def test_gives_up_after_retry_times(crawl) -> None:
    result, server, _ = crawl
    busy = [x for x in pages(server, ALWAYS) if x.path == "/busy"]
    assert [x.status for x in busy] == [429] * 3  # the first answer and 2 retries
    assert result.stats["retry_after/gave_up"] == 1
    assert f"Gave up {server.url(ALWAYS, '/busy')} after 3 answers 429" in result.log
    assert result.stats["retry_after/requeued"] == 4  # 1 (seconds) + 1 (date) + 2 (always)


def test_normal_site_completes(crawl) -> None:
    result, server, normal = crawl
    assert {x.path for x in pages(server, NORMAL)} == normal - {"/robots.txt"}
    assert result.stats.get("finish_reason") == "finished"
