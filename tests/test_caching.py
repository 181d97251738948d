"""Caching directives: how long robots.txt stays in force, driven by the fetcher's clock (no
wall-clock waits), the same lifetime on the Redis backend's shared cache, and the reading of
the headers themselves (RFC 9111 as a private cache)."""

from __future__ import annotations

from email.utils import formatdate

import pytest
from scrapy import Request

from crawler.backends.redis.robots import RedisRobotsCache
from crawler.crawldb import AdaptiveSchedule, Visit
from crawler.net.freshness import Freshness, freshness, freshness_of
from crawler.robots import MemoryRobotsCache, RobotsBook
from crawler.robots.cache import MAX_LIFETIME, MIN_LIFETIME, robots_lifetime
from tests.redis_support import fresh_key, redis_client, redis_server  # noqa: F401
from tests.test_robots_unit import answer, discover, middleware, run  # noqa: F401

T0 = 1_800_000_000.0
IMF_1994 = "Sun, 06 Nov 1994 08:49:37 GMT"  # RFC 9110 5.6.7's example


def http_date(t: float) -> str:
    return formatdate(t, usegmt=True)


@pytest.mark.parametrize(
    ("cc", "expires", "date", "age", "want"),
    [
        ("max-age=60", None, None, None, Freshness(60.0)),
        ("public, MAX-AGE=\"120\", s-maxage=5", None, None, None, Freshness(120.0)),
        ("max-age=60, max-age=5", None, None, None, Freshness(60.0)),  # the first one
        ("max-age=600", http_date(T0 + 5), http_date(T0), None, Freshness(600.0)),  # max-age wins
        (None, http_date(T0 + 300), http_date(T0), None, Freshness(300.0)),
        (None, http_date(T0 + 300), None, None, Freshness(200.0)),  # from receipt: T0 + 100
        (None, "0", http_date(T0), None, Freshness(0.0)),  # invalid Expires: already expired
        # RFC 9110 5.6.7's other two formats; a two-digit year 50+ years ahead is the past's
        (None, "Sunday, 06-Nov-94 08:50:37 GMT", IMF_1994, None, Freshness(60.0)),
        (None, "Sun Nov  6 08:51:37 1994", IMF_1994, None, Freshness(120.0)),
        (None, "Sun, 06 Nov 1994 08:50:37 UTC", IMF_1994, None, Freshness(0.0)),  # not GMT
        (None, http_date(T0 - 50), http_date(T0), None, Freshness(0.0)),
        ("max-age=100", None, None, "30", Freshness(70.0)),  # Age already spent on the way
        ("max-age=-1", None, None, None, Freshness(None)),  # not a delta-seconds
        ("max-age=\xb2", None, None, "\xb9", Freshness(None)),  # a Latin-1 "digit" is none
        ("max-age=" + "9" * 5000, None, None, None, Freshness(2.0**31)),  # RFC 9111 1.2.2
        ("max-age=100", None, None, "0" * 4999 + "7", Freshness(93.0)),
        ("no-store", None, None, None, Freshness(None, no_store=True)),
        ("no-cache, max-age=90", None, None, None, Freshness(90.0, no_cache=True)),
        ("s-maxage=600", None, None, None, Freshness(None)),  # a shared cache's: not ours
        ('no-cache="Set-Cookie, Age", max-age=30', None, None, None, Freshness(30.0)),
        ("garbage,,, MAX-AGE=45 ,", None, None, None, Freshness(45.0)),
        # no space around "=" (RFC 9111 5.2; cache-tests freshness-max-age-space-*-equals)
        ("garbage,,, MAX-AGE = 45 ,", None, None, None, Freshness(None)),
        (None, None, None, None, Freshness(None)),
    ],
)
def test_freshness_reads_rfc_9111_as_a_private_cache(
    cc: str | None, expires: str | None, date: str | None, age: str | None, want: Freshness
) -> None:
    assert freshness(cc, expires, date, age, received_at=T0 + 100) == want


def test_freshness_of_scrapy_headers_joins_cache_control_lines_only() -> None:
    response = answer(Request("http://a.example/"), 200)
    response.headers.appendlist("Cache-Control", "no-cache")
    response.headers.appendlist("Cache-Control", "max-age=30")
    response.headers["Expires"] = http_date(T0 + 10)
    response.headers["Date"] = http_date(T0)
    assert freshness_of(response.headers) == Freshness(30.0, no_cache=True)
    assert freshness_of({"Expires": http_date(T0 + 10), "Date": http_date(T0)}).lifetime == 10


@pytest.mark.parametrize(
    ("hint", "lifetime"),
    [
        (Freshness(None), 1234.0),  # no header: the configured expiry
        (Freshness(60.0), 60.0),
        (Freshness(3600.0), 3600.0),
        (Freshness(10 * 86400.0), MAX_LIFETIME),  # RFC 9309 2.4: at most 24 hours
        (Freshness(5.0), MIN_LIFETIME),
        (Freshness(0.0), MIN_LIFETIME),
        (Freshness(600.0, no_store=True), MIN_LIFETIME),
        (Freshness(None, no_cache=True), MIN_LIFETIME),
    ],
)
def test_robots_lifetime_bounds(hint: Freshness, lifetime: float) -> None:
    assert robots_lifetime(hint, 1234.0) == lifetime
    assert robots_lifetime(hint, 1234.0, 404) == 1234.0  # an error page's headers: not ours


def _fetch_robots(mw, crawler, origin: str, **headers: str) -> None:
    robots = discover(crawler, origin)
    assert robots is not None and robots.url == origin + "/robots.txt"
    run(mw.process_request(robots))
    run(mw.process_response(robots, answer(robots, 200, b"User-agent: *\nAllow: /\n", **headers)))


def _page(mw, crawler, url: str) -> list[Request]:
    """A page of the origin passes the gate; the robots.txt refreshes queued meanwhile."""
    engine = crawler.engine
    before = len(engine.crawled)
    assert run(mw.process_request(Request(url))).result is None
    return [r for r in engine.crawled[before:] if r.url.endswith("/robots.txt")]


def test_max_age_60_is_refetched_after_60_s_and_no_sooner(middleware) -> None:  # noqa: F811
    """A long crawl's pages keep asking the gate: robots.txt served with max-age=60 is
    fetched again at the first page 60 s after it was fetched, and not before."""
    mw, crawler, _, _ = middleware
    now = [T0]
    mw.fetcher.clock = lambda: now[0]
    origin = "http://a.example"
    _fetch_robots(mw, crawler, origin, **{"Cache-Control": "max-age=60"})
    for t in (0, 1, 30, 59, 59.9):
        now[0] = T0 + t
        assert _page(mw, crawler, f"{origin}/p{t}") == [], t
    now[0] = T0 + 60
    (refresh,) = _page(mw, crawler, f"{origin}/p60")
    assert refresh.meta["frontier_first"]
    assert crawler.stats.get_value("robotstxt/refresh") == 1


@pytest.mark.parametrize(
    ("headers", "lifetime"),
    [
        ({"Cache-Control": "max-age=31536000"}, MAX_LIFETIME),
        ({"Expires": http_date(T0 + 7 * 86400), "Date": http_date(T0)}, MAX_LIFETIME),
        ({"Expires": http_date(T0 + 600), "Date": http_date(T0)}, 600.0),
        ({"Cache-Control": "no-store"}, MIN_LIFETIME),
        ({}, 86400.0),  # ROBOTSTXT_CACHE_EXPIRY's default
        ({"Cache-Control": b"max-age=\xb2"}, 86400.0),  # Latin-1 "²": none, no error
    ],
)
def test_robots_expiry_follows_headers_within_bounds(
    middleware, headers: dict[str, str], lifetime: float  # noqa: F811
) -> None:
    mw, crawler, _, _ = middleware
    mw.fetcher.clock = lambda: T0
    origin = "http://a.example"
    _fetch_robots(mw, crawler, origin, **headers)
    record = mw.fetcher.book.state(origin).rules.record
    assert record.expires_at - record.fetched_at == lifetime
    assert mw.fetcher.book.cache.get(origin).expires_at == T0 + lifetime  # what is kept


def test_a_404_robots_txt_with_no_cache_keeps_the_configured_expiry(middleware) -> None:  # noqa: F811
    """CDNs mark every error page no-cache: a missing robots.txt is not asked for again
    every minute."""
    mw, crawler, _, _ = middleware
    mw.fetcher.clock = lambda: T0
    robots = discover(crawler, "http://a.example")
    run(mw.process_request(robots))
    run(mw.process_response(robots, answer(robots, 404, b"gone", **{"Cache-Control": "no-cache"})))
    record = mw.fetcher.book.state("http://a.example").rules.record
    assert record.expires_at - record.fetched_at == 86400.0


def test_the_shared_redis_cache_keeps_the_header_lifetime(
    redis_client,  # noqa: F811
) -> None:
    """Worker A fetches robots.txt with max-age=60; worker B, reading the shared copy, finds
    it fresh until A's 60 s are over and then due for a refresh."""
    key = fresh_key()
    a = RobotsBook(RedisRobotsCache(redis_client, key), "bot")
    b = RobotsBook(RedisRobotsCache(redis_client, key), "bot")
    o = "http://a.example"
    life = robots_lifetime(freshness("max-age=60"), a.expiry)
    a.fetched(o, 200, b"User-agent: *\nDisallow: /x\n", T0, lifetime=life)
    assert b.fresh(o, T0 + 59.9) and not b.needs_fetch(o, T0 + 59.9)
    assert not b.fresh(o, T0 + 60) and b.needs_fetch(o, T0 + 60)
    capped = robots_lifetime(freshness("max-age=999999"), a.expiry)
    a.fetched("http://b.example", 200, b"", T0, lifetime=capped)
    c = RobotsBook(RedisRobotsCache(redis_client, key), "bot")
    assert c.fresh("http://b.example", T0 + MAX_LIFETIME - 1)
    assert not c.fresh("http://b.example", T0 + MAX_LIFETIME)


def test_the_book_takes_the_configured_expiry_without_a_lifetime() -> None:
    book = RobotsBook(MemoryRobotsCache(), "bot", expiry=100)
    record = book.fetched("http://a.example", 200, b"", T0)
    assert record is not None and record.expires_at == T0 + 100


# --- recrawl hints --------------------------------------------------------------------------

HOUR = 3600.0


def _schedule() -> AdaptiveSchedule:
    return AdaptiveSchedule(interval=HOUR, min_interval=60.0, max_interval=10 * HOUR)


def test_max_age_puts_the_next_fetch_no_sooner_than_the_page_stays_fresh() -> None:
    s = _schedule()
    plain, _ = s.apply(None, Visit("u", 200, 0.0, fingerprint="a"))
    assert plain.next_fetch == HOUR
    fresh, _ = s.apply(None, Visit("u", 200, 0.0, fingerprint="a", max_age=3 * HOUR))
    assert fresh.next_fetch == 3 * HOUR and fresh.interval == HOUR  # the interval still adapts
    short, _ = s.apply(None, Visit("u", 200, 0.0, fingerprint="a", max_age=600))
    assert short.next_fetch == HOUR  # the adaptive schedule says later: it decides
    huge, _ = s.apply(None, Visit("u", 200, 0.0, fingerprint="a", max_age=365 * 86400))
    assert huge.next_fetch == 10 * HOUR  # never beyond max_interval
    again, _ = s.apply(fresh, Visit("u", 304, 3 * HOUR, max_age=5 * HOUR))
    assert again.next_fetch == 8 * HOUR  # a 304 carries the hint too
    gone, _ = s.apply(fresh, Visit("u", 503, 3 * HOUR, max_age=5 * HOUR))
    assert gone.next_fetch == 4 * HOUR  # an error's headers say nothing about the page


def test_no_store_keeps_no_validators_for_conditional_get() -> None:
    s = _schedule()
    kept, _ = s.apply(None, Visit("u", 200, 0.0, last_modified="lm", etag='"e"', fingerprint="a"))
    assert (kept.etag, kept.last_modified) == ('"e"', "lm")
    unkept, _ = s.apply(
        kept, Visit("u", 200, 1.0, last_modified="lm", etag='"e"', fingerprint="a", no_store=True)
    )
    assert (unkept.etag, unkept.last_modified) == (None, None) and unkept.fingerprint == "a"
