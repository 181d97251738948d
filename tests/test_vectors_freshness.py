"""Other projects' HTTP caching test vectors, as data, run against the crawler's reading.

Source: ``http-tests/cache-tests``, ``tests/*.mjs`` (each case names its file and test ``id``):
the cases that decide whether a private cache may reuse what it fetched without asking the
server again, which is the crawler's recrawl question (RFC 9111: max-age, Expires, Date, Age,
heuristic freshness, no-cache, no-store), and the validators it asks again with (RFC 9110
13.1). A case is the response's headers; a number stands for an HTTP-date that many seconds
from the moment the answer was received, as the suite writes it. The suite reuses the answer
either at once or after its pause of 3 seconds (``test-engine/client/utils.mjs``,
``pause()``): "cached" means fresh for longer than that.

The verdict is the suite's; ours is :func:`crawler.net.freshness.freshness_of` of the headers:
reused when neither no-store nor no-cache nor a zero lifetime asks to revalidate and the
explicit lifetime, else the heuristic one, outlasts the pause. The crawler uses no heuristic
lifetime (``crawler.net.freshness`` says why), so :func:`heuristic_lifetime` computes it here
from the suite's headers, to check that the explicit one is read where a cache must prefer it
and absent where a cache may fall back on the heuristic. Left out:
tests of a *shared* cache (``browser_skip``: s-maxage, ``private``), of a cache answering
conditional requests itself (a 304 from the cache), of replacing or updating a stored answer,
and those of ``kind: 'check'``, which the suite says gather information rather than state
conformance (``age-parse.mjs``, ``expires-parse.mjs``, most of ``cc-parse.mjs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.http import Headers
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.extensions.recrawl import RecrawlExtension
from crawler.middlewares.conditional import ConditionalGetMiddleware
from crawler.net.freshness import Freshness, freshness_of

NOW = 1_700_000_000.0  # when the answer was received
PAUSE = 3.0  # test-engine/client/utils.mjs: pause() waits 3,000 ms


@dataclass(frozen=True)
class Case:
    source: str  # file and test id
    headers: tuple[tuple[str, str | int], ...]  # an int: an HTTP-date that far from NOW
    reuse: bool  # the suite's "cached" (else "not_cached" or revalidated)
    paused: bool = True  # asked again after the pause, else at once
    status: int = 200
    no_store: bool = False  # the suite's "must not store"


def _case(
    source: str, test: str, reuse: bool, *headers: tuple[str, str | int], **kw: object
) -> Case:
    return Case(f"cache-tests {source}: {test}", headers, reuse, **kw)  # type: ignore[arg-type]


CC = "Cache-Control"
CACHE_CONTROL_FRESHNESS = [
    _case("cc-freshness.mjs", "freshness-none", False),
    _case("cc-freshness.mjs", "freshness-max-age", True, (CC, "max-age=3600")),
    _case("cc-freshness.mjs", "freshness-max-age-quoted", True, (CC, 'max-age="3600"')),
    _case("cc-freshness.mjs", "freshness-max-age-single-quoted", False, (CC, "max-age='3600'")),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-ignore-quoted",
        False,
        (CC, 'extension="max-age=100", max-age=1'),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-ignore-quoted-rev",
        False,
        (CC, 'max-age=1, extension="max-age=100"'),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-ignore-quoted-all",
        False,
        (CC, 'extension="max-age=100", max-age="1"'),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-ignore-quoted-all-rev",
        False,
        (CC, 'max-age="1", extension="max-age=100"'),
    ),
    _case("cc-freshness.mjs", "freshness-max-age-space-before-equals", False, (CC, "max-age =100")),
    _case("cc-freshness.mjs", "freshness-max-age-space-after-equals", False, (CC, "max-age= 100")),
    _case("cc-freshness.mjs", "freshness-max-age-0", False, (CC, "max-age=0")),
    _case("cc-freshness.mjs", "freshness-max-age-a100", False, (CC, "max-age=a100")),
    _case("cc-freshness.mjs", "freshness-max-age-100a", False, (CC, "max-age=100a")),
    _case("cc-freshness.mjs", "freshness-max-age-negative", False, (CC, "max-age=-100")),
    _case("cc-freshness.mjs", "freshness-max-age-max", True, (CC, "max-age=2147483648")),
    _case("cc-freshness.mjs", "freshness-max-age-max-plus", True, (CC, "max-age=99999999999")),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-age",
        False,
        ("Date", 0),
        (CC, "max-age=10"),
        ("Age", "15"),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-expires",
        True,
        (CC, "max-age=3600"),
        ("Expires", -10000),
        ("Date", 0),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-expires-invalid",
        True,
        (CC, "max-age=3600"),
        ("Expires", "0"),
        ("Date", 0),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-0-expires",
        False,
        ("Expires", 10000),
        (CC, "max-age=0"),
        ("Date", 0),
    ),
    _case("cc-freshness.mjs", "freshness-max-age-extension", True, (CC, "foobar, max-age=3600")),
    _case("cc-freshness.mjs", "freshness-max-age-case-insenstive", True, (CC, "MaX-aGe=3600")),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-s-maxage-private",
        False,
        (CC, "s-maxage=3600, max-age=1"),
    ),
    _case(
        "cc-freshness.mjs",
        "freshness-max-age-s-maxage-private-multiple",
        False,
        (CC, "s-maxage=3600"),
        (CC, "max-age=1"),
    ),
    _case(
        "cc-parse.mjs",
        "freshness-max-age-ignore-quoted",
        False,
        (CC, 'extension="max-age=3600", max-age=1'),
    ),
    _case(
        "cc-parse.mjs",
        "freshness-max-age-ignore-quoted-rev",
        False,
        (CC, 'max-age=1, extension="max-age=3600"'),
    ),
    _case("cc-parse.mjs", "freshness-max-age-leading-zero", True, (CC, "max-age=003600")),
    _case("cc-parse.mjs", "freshness-max-age-single-quoted", False, (CC, "max-age='3600'")),
]

EXPIRES = "expires-freshness.mjs"
FUTURE = "Thu, 18 Aug 2050 02:01:18 GMT"


def _expires(test: str, reuse: bool, expires: str | int, **kw: object) -> Case:
    return _case(EXPIRES, test, reuse, ("Expires", expires), ("Date", 0), **kw)


EXPIRES_FRESHNESS = [
    _case(EXPIRES, "freshness-expires-none", False),
    _expires("freshness-expires-future", True, 30 * 24 * 60 * 60),
    _expires("freshness-expires-past", False, -30 * 24 * 60 * 60),
    _expires("freshness-expires-present", False, 0, paused=False),
    _case(EXPIRES, "freshness-expires-old-date", False, ("Expires", 300), ("Date", 400)),
    _expires("freshness-expires-wrong-case-weekday", True, FUTURE.replace("Thu", "THU")),
    _expires("freshness-expires-wrong-case-month", True, FUTURE.replace("Aug", "AUG")),
    _expires("freshness-expires-wrong-case-tz", True, FUTURE.replace("GMT", "gMT")),
    _expires("freshness-expires-invalid", False, "0"),
    _expires("freshness-expires-invalid-utc", False, FUTURE.replace("GMT", "UTC")),
    _expires("freshness-expires-invalid-2-digit-year", False, "Thu, 18 Aug 50 02:01:18 GMT"),
    _expires("freshness-expires-invalid-no-comma", False, FUTURE.replace(",", "")),
    _expires(
        "freshness-expires-invalid-multiple-spaces",
        False,
        "Thu, 18  Aug  2050 02:01:18 GMT",
        paused=False,
    ),
    _expires(
        "freshness-expires-invalid-date-dashes",
        False,
        "Thu, 18-Aug-2050 02:01:18 GMT",
        paused=False,
    ),
    _expires(
        "freshness-expires-invalid-time-periods",
        False,
        "Thu, 18 Aug 2050 02.01.18 GMT",
        paused=False,
    ),
    _expires(
        "freshness-expires-invalid-1-digit-hour",
        False,
        "Thu, 18 Aug 2050 2:01:18 GMT",
        paused=False,
    ),
    _case(
        EXPIRES,
        "freshness-expires-invalid-date",
        True,
        ("Date", "foo"),
        ("Expires", 10),
        paused=False,
    ),
    _case(
        EXPIRES,
        "freshness-expires-age-slow-date",
        False,
        ("Date", -10),
        ("Expires", 10),
        ("Age", "25"),
        paused=False,
    ),
    _case(
        EXPIRES,
        "freshness-expires-age-fast-date",
        False,
        ("Date", 10),
        ("Expires", 20),
        ("Age", "15"),
        paused=False,
    ),
]

RESPONSE = "cc-response.mjs"
ETAG = ("ETag", '"abcd"')
RESPONSE_DIRECTIVES = [
    _case(RESPONSE, "cc-resp-private-private", True, (CC, "private, max-age=3600"), paused=False),
    _case(RESPONSE, "cc-resp-no-store", False, (CC, "no-store"), paused=False, no_store=True),
    _case(
        RESPONSE,
        "cc-resp-no-store-case-insensitive",
        False,
        (CC, "No-StOrE"),
        paused=False,
        no_store=True,
    ),
    _case(
        RESPONSE,
        "cc-resp-no-store-fresh",
        False,
        (CC, "max-age=10000, no-store"),
        ("Expires", 10000),
        ("Date", 0),
        paused=False,
        no_store=True,
    ),
    _case(
        RESPONSE,
        "cc-resp-no-cache",
        False,
        (CC, "max-age=10000, no-cache"),
        ("Expires", 10000),
        ("Date", 0),
        paused=False,
    ),
    _case(
        RESPONSE,
        "cc-resp-no-cache-case-insensitive",
        False,
        (CC, "max-age=10000, No-CaChE"),
        ("Expires", 10000),
        ("Date", 0),
        paused=False,
    ),
    _case(RESPONSE, "cc-resp-no-cache-revalidate", False, (CC, "no-cache"), ETAG, paused=False),
    _case(
        RESPONSE,
        "cc-resp-no-cache-revalidate-fresh",
        False,
        (CC, "max-age=10000, no-cache"),
        ("Expires", 10000),
        ("Date", 0),
        ETAG,
        paused=False,
    ),
    _case(
        RESPONSE,
        "cc-resp-must-revalidate-fresh",
        True,
        (CC, "max-age=10000, must-revalidate"),
        ETAG,
        paused=False,
    ),
]

# heuristic-freshness.mjs, checkStatus: Last-Modified a day before Date, reused at once by an
# optimal cache for a status RFC 9110 15.1 lets it give a heuristic lifetime, never otherwise.
HEURISTIC = "heuristic-freshness.mjs"
# RFC 9111 4.2.2: "a typical setting of this fraction might be 10%".
HEURISTIC_FRACTION = 0.1
# RFC 9110 15.1: the statuses a cache may give a heuristic lifetime (any, with "public").
HEURISTIC_STATUSES = frozenset({200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501})
DAY_OLD = (("Last-Modified", -24 * 60 * 60), ("Date", 0))
HEURISTIC_FRESHNESS = [
    Case(
        f"cache-tests {HEURISTIC}: heuristic-{status}-{kind}",
        (*DAY_OLD, *extra),
        reuse,
        False,
        status,
    )
    for reuse, status, extra in [
        (True, 200, ()),
        (False, 201, ()),
        (False, 202, ()),
        (True, 203, ()),
        (True, 204, ()),
        (False, 403, ()),
        (True, 404, ()),
        (True, 405, ()),
        (True, 410, ()),
        (True, 414, ()),
        (True, 501, ()),
        (False, 502, ()),
        (False, 503, ()),
        (False, 504, ()),
        (False, 599, ()),
        (True, 599, ((CC, "public"),)),
    ]
    for kind in ["cached" if reuse else "not_cached"]
]

CASES = CACHE_CONTROL_FRESHNESS + EXPIRES_FRESHNESS + RESPONSE_DIRECTIVES + HEURISTIC_FRESHNESS


def _headers(case: Case) -> Headers:
    headers = Headers()
    for name, value in case.headers:
        text = formatdate(NOW + value, usegmt=True) if isinstance(value, int) else value
        headers.appendlist(name, text)
    return headers


def heuristic_lifetime(case: Case) -> float | None:
    """RFC 9111 4.2.2, as an optimal private cache reads it: a tenth of the time between
    ``Last-Modified`` and ``Date`` (the moment of receipt without one), less ``Age``, for a
    status that allows a heuristic or a ``public`` answer; else None."""
    headers = dict(case.headers)
    directives = {d.strip().lower() for d in str(headers.get(CC, "")).split(",")}
    modified = headers.get("Last-Modified")
    if not isinstance(modified, int):
        return None
    if case.status not in HEURISTIC_STATUSES and "public" not in directives:
        return None
    date = headers.get("Date", 0)
    assert isinstance(date, int)
    if modified > date:
        return None
    return max(0.0, HEURISTIC_FRACTION * (date - modified) - int(headers.get("Age", 0)))


def reused(case: Case) -> bool:
    """Whether a private cache that reads the headers as the crawler does takes the answer as
    still fresh when the suite asks again."""
    hint = freshness_of(_headers(case), NOW)
    fresh_for = hint.lifetime if hint.lifetime is not None else heuristic_lifetime(case)
    elapsed = PAUSE if case.paused else 0.0
    return not hint.stale_at_once and (fresh_for or 0.0) > elapsed


@pytest.mark.parametrize("case", CASES, ids=[c.source for c in CASES])
def test_reused_as_the_suite_says(case: Case) -> None:
    assert reused(case) is case.reuse, case


@pytest.mark.parametrize("case", [c for c in CASES if c.no_store], ids=lambda c: c.source)
def test_no_store_keeps_nothing(case: Case) -> None:
    """The schedule then drops the validators: the next fetch is a full GET."""
    assert freshness_of(_headers(case), NOW).no_store


def test_the_explicit_lifetime_is_what_the_crawl_uses() -> None:
    """The crawler reads no heuristic lifetime (crawler.net.freshness): a day-old page is
    fresh for 2.4 hours by the heuristic and has no lifetime for the schedule."""
    case = HEURISTIC_FRESHNESS[0]
    assert freshness_of(_headers(case), NOW) == Freshness()
    assert heuristic_lifetime(case) == pytest.approx(2.4 * 60 * 60)


# --- validators: conditional-etag.mjs, and RFC 9110 13.1.3 --------------------------------------

# (the stored ETag, the stored Last-Modified, the If-None-Match and If-Modified-Since a refetch
# carries): the stored strings verbatim (RFC 9110 13.1.2 and 13.1.3), weak tags included.
VALIDATORS = [
    ("conditional-etag.mjs: conditional-etag-strong-generate", '"abcdef"', None, '"abcdef"', None),
    (
        "conditional-etag.mjs: conditional-etag-weak-generate-weak",
        'W/"abcdef"',
        None,
        'W/"abcdef"',
        None,
    ),
    (
        "RFC 9110 13.1.3: If-Modified-Since is the stored Last-Modified",
        None,
        "Tue, 14 Nov 2023 22:13:20 GMT",
        None,
        "Tue, 14 Nov 2023 22:13:20 GMT",
    ),
]


@pytest.mark.parametrize(("source", "etag", "modified", "inm", "ims"), VALIDATORS)
def test_a_refetch_asks_with_the_stored_validators(
    tmp_path: Path,
    source: str,
    etag: str | None,
    modified: str | None,
    inm: str | None,
    ims: str | None,
) -> None:
    crawler = get_crawler(Spider, {"CRAWLDB_PATH": str(tmp_path / "db.sqlite")})
    crawler.spider = Spider("s")
    recrawl = RecrawlExtension.from_crawler(crawler)
    recrawl.record("http://a.example/p", 200, etag=etag, last_modified=modified)
    middleware = ConditionalGetMiddleware.from_crawler(crawler)
    crawler.signals.send_catch_log(crawler_signals.crawldb_opened, db=recrawl.db)
    try:
        request = Request("http://a.example/p")
        middleware.process_request(request)
    finally:
        recrawl._engine_stopped()
    sent = {name: request.headers.get(name) for name in ("If-None-Match", "If-Modified-Since")}
    assert sent == {
        "If-None-Match": inm.encode() if inm else None,
        "If-Modified-Since": ims.encode() if ims else None,
    }, source
