"""A robots.txt refresh is a conditional request (RFC 9309 2.4 lets a crawler use HTTP caching;
RFC 9110 13.1), the fetcher driven by hand as in ``tests/test_robots_unit.py``: the copy's
validators go out as they came in, and a 304 keeps the copy in force for as long as the answer
(or else the copy's own caching headers) says. The crawl over real HTTP is
``tests/test_robots_conditional.py``."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import TextResponse

from crawler.robots import RULES, RobotsRecord
from crawler.robots.book import selects
from tests.test_robots_unit import FakeEngine, answer, discover, middleware, run  # noqa: F401

ORIGIN = "http://a.example"
BODY = b"User-agent: *\nDisallow: /x\n"


def _refresh_after(mw, crawler, seconds: float) -> Request:  # type: ignore[no-untyped-def]
    """The clock moved ``seconds`` on, past the copy's expiry: the next page queues a refresh,
    returned as it enters the downloader."""
    now = mw.fetcher.clock()
    mw.fetcher.clock = lambda: now + seconds
    assert isinstance(run(mw.process_request(Request(f"{ORIGIN}/x"))).result, IgnoreRequest)
    refresh = crawler.engine.crawled[-1]
    assert refresh.url == f"{ORIGIN}/robots.txt"
    run(mw.process_request(refresh))
    return refresh


def test_a_refresh_is_conditional_and_a_304_renews_the_copy(middleware) -> None:  # noqa: F811
    """RFC 9309 2.4 lets a crawler use HTTP caching: a refresh carries the copy's ETag and
    Last-Modified, and a 304 keeps that copy in force, fresh again, with nothing re-read; a
    304 used to be read as a failed fetch (an unknown 3xx: unreachable)."""
    mw, crawler, timers, _ = middleware
    engine: FakeEngine = crawler.engine
    book = mw.fetcher.book
    lm = "Sat, 05 Dec 2026 10:00:00 GMT"
    first = discover(crawler, "http://a.example")
    run(mw.process_request(first))
    assert b"If-None-Match" not in first.headers  # nothing to revalidate yet
    body = b"User-agent: *\nDisallow: /x\n"
    run(mw.process_response(first, answer(first, 200, body, ETag='"v1"', **{"Last-Modified": lm})))
    assert book.validators("http://a.example") == ('"v1"', lm)
    # a day later the copy has expired: the next page queues a refresh, which asks whether
    # the file changed
    now = mw.fetcher.clock()
    mw.fetcher.clock = lambda: now + 86400 + 1
    assert isinstance(run(mw.process_request(Request("http://a.example/x"))).result, IgnoreRequest)
    refresh = engine.crawled[-1]
    assert refresh.url == "http://a.example/robots.txt"
    run(mw.process_request(refresh))
    assert refresh.headers[b"If-None-Match"] == b'"v1"'
    assert refresh.headers[b"If-Modified-Since"] == lm.encode()
    run(mw.process_response(refresh, answer(refresh, 304, **{"Cache-Control": "max-age=600"})))
    assert book.fresh("http://a.example", mw.fetcher.clock())
    rules = book.state("http://a.example").rules
    assert rules.record.body == body.decode() and rules.record.etag == '"v1"'
    assert rules.record.expires_at == pytest.approx(now + 86401 + 600, abs=5)
    assert isinstance(run(mw.process_request(Request("http://a.example/x"))).result, IgnoreRequest)
    assert run(mw.process_request(Request("http://a.example/y"))).result is None
    assert crawler.stats.get_value("robotstxt/not_modified") == 1
    assert crawler.stats.get_value("robotstxt/unreachable") is None
    assert timers == []  # no retry scheduled
    # and the SQLite cache keeps the validators for the next crawl
    assert book.cache.get("http://a.example").etag == '"v1"'


def test_a_redirect_targets_validators_are_not_the_origins(middleware) -> None:  # noqa: F811
    """The refresh asks the origin's /robots.txt, never the redirect's target: sending it the
    target's ETag asks a question about another URL."""
    mw, crawler, _, _ = middleware
    engine: FakeEngine = crawler.engine
    first = discover(crawler, "http://a.example")
    run(mw.process_request(first))
    run(mw.process_response(first, answer(first, 301, Location="/moved.txt")))
    hop, d = engine.downloads[-1]
    assert hop.url == "http://a.example/moved.txt"
    d.callback(answer(hop, 200, b"User-agent: *\nDisallow: /x\n", ETag='"moved"'))
    assert not mw.fetcher.book.state("http://a.example").rules.allowed("http://a.example/x")
    assert mw.fetcher.book.validators("http://a.example") == ("", "")


def test_a_304_that_says_nothing_of_freshness_keeps_the_copys_lifetime(middleware) -> None:  # noqa: F811
    """RFC 9111 4.3.4: a 304 updates the stored answer's headers, so the file's own
    ``max-age`` still stands when the 304 sends none; it used to become ROBOTSTXT_CACHE_EXPIRY
    (a day), and a site asking for a 10-minute refresh had its rule changes missed for a day."""
    mw, crawler, _, _ = middleware
    first = discover(crawler, ORIGIN)
    run(mw.process_request(first))
    cache_control = {"Cache-Control": "max-age=600"}
    run(mw.process_response(first, answer(first, 200, BODY, ETag='"v1"', **cache_control)))
    refresh = _refresh_after(mw, crawler, 601)
    assert refresh.headers[b"If-None-Match"] == b'"v1"'
    run(mw.process_response(refresh, answer(refresh, 304, ETag='"v1"')))
    record = mw.fetcher.book.state(ORIGIN).rules.record
    assert record.expires_at - record.fetched_at == pytest.approx(600)
    assert crawler.stats.get_value("robotstxt/not_modified") == 1


def test_validators_go_back_byte_for_byte(middleware) -> None:  # noqa: F811
    """An ETag may hold obs-text (RFC 9110 8.8.3): it is sent back with the bytes the server
    sent, weak prefix and quotes included, not re-encoded as UTF-8 (which no server matches:
    every refresh then downloaded the whole file again)."""
    mw, crawler, _, _ = middleware
    etag, last_modified = b'W/"caf\xe9"', b"Sat, 05 Dec 2026 10:00:00 GMT"
    first = discover(crawler, ORIGIN)
    run(mw.process_request(first))
    headers = {"ETag": etag, "Last-Modified": last_modified}
    response = TextResponse(first.url, status=200, body=BODY, headers=headers, request=first)
    run(mw.process_response(first, response))
    refresh = _refresh_after(mw, crawler, 86401)
    assert refresh.headers[b"If-None-Match"] == etag
    assert refresh.headers[b"If-Modified-Since"] == last_modified


LM = "Sat, 05 Dec 2026 10:00:00 GMT"


@pytest.mark.parametrize(
    ("copy", "answer_validators", "renews"),
    [
        (('"v1"', LM), ('"v1"', LM), True),
        (('"v1"', LM), ('"v2"', LM), False),  # a strong ETag decides alone
        (('"v1"', ""), ('"v1"', "Sun, 06 Dec 2026 10:00:00 GMT"), True),
        (('W/"v1"', ""), ('"v1"', ""), True),  # the same tag made strong: nginx's 304
        (("", LM), ('"v1"', LM), False),  # a strong ETag the copy does not have
        (('W/"v1"', ""), ('W/"v1"', ""), True),
        (('"v1"', ""), ('W/"v1"', ""), True),  # weak comparison
        (('W/"v1"', ""), ('W/"v2"', ""), False),
        (('W/"v1"', LM), ('W/"v1"', "Sun, 06 Dec 2026 10:00:00 GMT"), False),
        (("", LM), ("", LM), True),
        (("", LM), ("", "Saturday, 05-Dec-26 10:00:00 GMT"), True),  # the same date
        (("", LM), ("", "Sun, 06 Dec 2026 10:00:00 GMT"), False),
        (('"v1"', ""), ("", LM), False),  # nothing of the copy's to match
        (('"v1"', LM), ("", ""), True),  # a bare 304: about the one copy asked about
    ],
)
def test_a_304_renews_only_the_copy_it_names(
    copy: tuple[str, str], answer_validators: tuple[str, str], renews: bool
) -> None:
    """RFC 9111 4.3.4: a 304 updates the stored answer its validators select, and none when
    they select none (see :meth:`RobotsBook.names_copy` for the bare 304)."""
    record = RobotsRecord(ORIGIN, RULES, 200, 0.0, 100.0, BODY.decode(), *copy)
    assert selects(record, *answer_validators) is renews


def test_a_304_naming_another_file_is_fetched_again_once(middleware) -> None:  # noqa: F811
    """A 304 whose ETag is not the copy's renews nothing (it used to renew the old copy under
    the new ETag, so no later refresh ever brought the new file): robots.txt is fetched again
    at once without validators, and a 304 to that (a server that cannot tell) is a failed
    refresh, not another request."""
    mw, crawler, _, _ = middleware
    engine: FakeEngine = crawler.engine
    book = mw.fetcher.book
    first = discover(crawler, ORIGIN)
    run(mw.process_request(first))
    run(mw.process_response(first, answer(first, 200, BODY, ETag='"v1"')))
    refresh = _refresh_after(mw, crawler, 86401)
    assert refresh.headers[b"If-None-Match"] == b'"v1"'
    handled = run(mw.process_response(refresh, answer(refresh, 304, ETag='"v2"')))
    again, d = engine.downloads[-1]  # the downloader's middlewares have seen it
    assert again.url == f"{ORIGIN}/robots.txt"
    assert b"If-None-Match" not in again.headers and b"If-Modified-Since" not in again.headers
    assert crawler.stats.get_value("robotstxt/not_modified_other") == 1
    d.callback(answer(again, 304, ETag='"v2"'))
    assert isinstance(handled.result, IgnoreRequest)
    assert len(engine.downloads) == 1  # once
    assert crawler.stats.get_value("robotstxt/not_modified") is None
    assert crawler.stats.get_value("robotstxt/unreachable") == 1
    rules = book.state(ORIGIN).rules  # the copy stays in force while its refresh fails
    assert rules is not None and rules.record.etag == '"v1"'
    assert not book.fresh(ORIGIN, mw.fetcher.clock())
