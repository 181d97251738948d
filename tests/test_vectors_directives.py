"""Other projects' page-directive test vectors (``X-Robots-Tag``, ``<meta name="robots">``), as
data, run against the crawler's directives.

Sources (each case names its file and test):

* Google, "Robots meta tag, data-nosnippet, and X-Robots-Tag specifications"
  (``developers.google.com/search/reference/robots_meta_tag``): its examples and rules. The
  ``name`` and ``content`` are case-insensitive; ``robots`` addresses every crawler, a crawler's
  own name only that one (``googlebot-news`` is not ``googlebot``); an ``X-Robots-Tag`` may name
  a crawler before its directives (``googlebot: nofollow``), and without one is for all;
  several headers and several tags add up, and competing directives resolve to the most
  restrictive ("the sum of the negative rules"); ``none`` is ``noindex, nofollow``;
  ``unavailable_after: <date>`` is a directive with a value.
* The Web Robots Pages, ``robotstxt.org/wc/meta-user.html``: ``ALL=INDEX,FOLLOW``,
  ``NONE=NOINDEX,NOFOLLOW``, case-insensitive, comma-separated.
* ``MarginaliaSearch/MarginaliaSearch``, ``HttpFetcherImplTest.java``, ``testXRobotsTag``.
* ``spatie/robots-txt``, ``tests/RobotsHeadersTest.php`` (``it_can_parse_headers``) and
  ``tests/RobotsMetaTest.php`` with its ``tests/data/*.html`` pages.
* ``nielsole/xrobotstag``, ``parser_test.go``.
* ``apache/incubator-stormcrawler``, ``core/src/test/java/org/apache/stormcrawler/util/
  RobotsTagsTest.java`` (``testHTTPHeaders``; its ``isNoCache`` is no verdict of ours).

Ours is the crawl's: the ``X-Robots-Tag`` headers through :func:`crawler.robots.x_robots_tag`
for the crawler's token (:func:`crawler.config.agent.crawler_token` of its name), then the
page's ``<meta name="robots">`` and ``<meta name="<token>">`` as parsed by
:func:`crawler.content.html.parse_page` added to them, as ``crawler.sites.analysis`` does. The
verdict is (may index, may follow). Where a source lets a crawler-specific ``all`` or
``follow`` undo a general restriction, we follow Google's rule (restrictions add up) and the
case says so in ``differs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from crawler.config.agent import crawler_token
from crawler.content.html import parse_page
from crawler.robots import Directives, x_robots_tag

GOOGLE = "Google robots_meta_tag spec"
ROBOTSTXT_ORG = "robotstxt.org meta-user.html"
MARGINALIA = "MarginaliaSearch HttpFetcherImplTest.java testXRobotsTag"
SPATIE_HEADERS = "spatie/robots-txt RobotsHeadersTest.php it_can_parse_headers"
SPATIE_META = "spatie/robots-txt RobotsMetaTest.php"
NIELSOLE = "nielsole/xrobotstag parser_test.go"
STORM = "apache/incubator-stormcrawler RobotsTagsTest.java testHTTPHeaders"

ADDS_UP = "Google: competing directives resolve to the most restrictive; a crawler's own rule "
ADDS_UP += "adds to the general ones, it does not replace them"


@dataclass(frozen=True)
class Case:
    source: str
    agent: str  # the crawler's name
    headers: tuple[str, ...]  # X-Robots-Tag values
    head: str  # the page's <head> markup
    index: bool  # our verdict
    follow: bool | None  # our verdict (None: the source says nothing of it)
    differs: str = ""  # why ours is not the source's verdict


def _h(
    source: str,
    agent: str,
    headers: tuple[str, ...],
    index: bool,
    follow: bool | None = None,
    differs: str = "",
) -> Case:
    return Case(source, agent, headers, "", index, follow, differs)


def _m(
    source: str, agent: str, head: str, index: bool, follow: bool | None = None, differs: str = ""
) -> Case:
    return Case(source, agent, (), head, index, follow, differs)


M = "search.marginalia.nu"
SPATIE = (
    "nofollow",
    "google: noindex, nofollow",
    "googlebot*: noindex, follow",
    "bingBot: noindex, nofollow",
)
GOOGLE_HEADERS = ("googlebot: nofollow", "otherbot: noindex, nofollow")

CASES = [
    # --- Google's specification -----------------------------------------------------------------
    _m(GOOGLE, "Googlebot", '<meta name="robots" content="noindex" />', False, True),
    _m(GOOGLE, "otherbot", '<meta name="robots" content="noindex" />', False, True),
    _m(GOOGLE, "Googlebot", '<meta name="googlebot" content="noindex" />', False, True),
    _m(GOOGLE, "otherbot", '<meta name="googlebot" content="noindex" />', True, True),
    _m(GOOGLE, "Googlebot", '<meta name="googlebot-news" content="noindex">', True, True),
    _m(GOOGLE, "Googlebot-News", '<meta name="googlebot-news" content="noindex">', False, True),
    _m(
        GOOGLE,
        "Googlebot-News",
        '<meta name="googlebot" content="noindex"><meta name="googlebot-news" content="nosnippet">',
        True,
        True,
    ),
    _m(GOOGLE, "Googlebot", '<META NAME="GOOGLEBOT" CONTENT="NOINDEX, NOFOLLOW">', False, False),
    _m(GOOGLE, "Googlebot", '<meta name="robots" content="none">', False, False),
    _m(
        GOOGLE,
        "Googlebot",
        '<meta name="robots" content="all"><meta name="googlebot" content="noindex">',
        False,
        True,
    ),
    _m(
        GOOGLE,
        "Googlebot",
        '<meta name="robots" content="nofollow"><meta name="googlebot" content="noindex">',
        False,
        False,
    ),
    _m(GOOGLE, "Googlebot", '<meta name="robots" content="max-snippet:50, nosnippet">', True, True),
    _h(GOOGLE, "Googlebot", ("noindex",), False, True),
    _h(GOOGLE, "Googlebot", ("noindex, nofollow",), False, False),
    _h(
        GOOGLE,
        "Googlebot",
        ("noarchive", "unavailable_after: 25 Jun 2010 15:00:00 PST"),
        False,  # Google: not shown after that date, long past
        True,
    ),
    _h(GOOGLE, "Googlebot", GOOGLE_HEADERS, True, False),
    _h(GOOGLE, "otherbot", GOOGLE_HEADERS, False, False),
    _h(GOOGLE, "thirdbot", GOOGLE_HEADERS, True, True),
    _h(GOOGLE, "Googlebot", ("GoogleBot: NoIndex",), False, True),
    Case(
        GOOGLE, "Googlebot", ("nofollow",), '<meta name="robots" content="noindex">', False, False
    ),
    # --- robotstxt.org ------------------------------------------------------------------------
    _m(ROBOTSTXT_ORG, "anybot", '<meta name="robots" content="index,follow">', True, True),
    _m(ROBOTSTXT_ORG, "anybot", '<meta name="robots" content="noindex,follow">', False, True),
    _m(ROBOTSTXT_ORG, "anybot", '<meta name="robots" content="index,nofollow">', True, False),
    _m(ROBOTSTXT_ORG, "anybot", '<meta name="robots" content="noindex,nofollow">', False, False),
    _m(ROBOTSTXT_ORG, "anybot", '<META NAME="ROBOTS" CONTENT="NOINDEX,NOFOLLOW">', False, False),
    _m(ROBOTSTXT_ORG, "anybot", '<meta name="robots" content="ALL">', True, True),
    _m(ROBOTSTXT_ORG, "anybot", '<meta name="robots" content="NONE">', False, False),
    # --- MarginaliaSearch ---------------------------------------------------------------------
    _h(MARGINALIA, M, ("foo:",), True),
    _h(MARGINALIA, M, (":bar",), True),
    _h(MARGINALIA, M, (":",), True),
    _h(MARGINALIA, M, ("",), True),
    _h(MARGINALIA, M, ("doindex",), True),
    _h(MARGINALIA, M, ("noindex",), False),
    _h(MARGINALIA, M, ("none",), False),
    _h(MARGINALIA, M, (f"{M}: noindex",), False),
    _h(MARGINALIA, M, (f"{M}: none",), False),
    _h(MARGINALIA, M, ("googlebot: noindex",), True),
    _h(MARGINALIA, M, ("noindex", f"{M}: all"), False, differs=ADDS_UP),
    _h(MARGINALIA, M, ("none", f"{M}: all"), False, differs=ADDS_UP),
    _h(MARGINALIA, M, ("none", f"{M}: none"), False),
    _h(MARGINALIA, M, ("all", f"{M}: none"), False),
    _h(MARGINALIA, M, (f"{M}: all", "noindex"), False, differs=ADDS_UP),
    _h(MARGINALIA, M, (f"{M}: all", "none"), False, differs=ADDS_UP),
    _h(MARGINALIA, M, (f"{M}: none", "none"), False),
    _h(MARGINALIA, M, (f"{M}: none", "all"), False),
    # --- spatie/robots-txt --------------------------------------------------------------------
    _h(SPATIE_HEADERS, "otherbot", SPATIE, True, False),  # mayIndex(), mayFollow('otherbot')
    _h(SPATIE_HEADERS, "google", SPATIE, False, False),
    _h(SPATIE_HEADERS, "Bingbot", SPATIE, False, False),
    _h(
        SPATIE_HEADERS,
        "googlebot",
        SPATIE,
        True,
        False,
        differs="spatie reads 'googlebot*' as a pattern that googlebot matches and lets its "
        "'follow' undo the general 'nofollow'; Google names crawlers whole (no wildcard), and "
        "restrictions add up",
    ),
    _m(
        f"{SPATIE_META} noindex-nofollow.html",
        "anybot",
        '\n    <meta name="robots" content="noindex, nofollow">\n',
        False,
        False,
    ),
    _m(
        f"{SPATIE_META} noindex.html",
        "anybot",
        '<meta name="robots" content="noindex">',
        False,
        True,
    ),
    _m(
        f"{SPATIE_META} nofollow.html",
        "anybot",
        '<meta name="robots" content="nofollow">',
        True,
        False,
    ),
    _m(f"{SPATIE_META} all-allowed.html", "anybot", "<title>x</title>", True, True),
    _m(
        f"{SPATIE_META} noindex-minified.html",
        "anybot",
        '\n    <title>My title</title><meta name="description" content="My description"><meta '
        'name="robots" content="noindex, follow"><meta property="og:title" content="My title for '
        'SNS"/>\n',
        False,
        True,
    ),
    # --- StormCrawler -------------------------------------------------------------------------
    _h(STORM, "anybot", (), True, True),
    _h(STORM, "anybot", ("none",), False, False),
    _h(STORM, "anybot", ("noindex", "nofollow"), False, False),
    _h(STORM, "anybot", ("noindex, nofollow",), False, False),
    # --- nielsole/xrobotstag ------------------------------------------------------------------
    _h(f"{NIELSOLE} TestSimpleCase", "googlebot", ("googlebot: noindex, nofollow",), False, False),
    _h(
        f"{NIELSOLE} TestParserHeaderTagDifferentBotname",
        "googlebot",
        ("herokubot: noindex, nofollow",),
        True,
        True,
    ),
    _h(
        f"{NIELSOLE} TestParserHeaderDate",
        "googlebot",
        ("unavailable_after: 25 Jun 2010 15:00:00 PST",),
        False,
        True,
        differs="the parser only reads the date; ours, past, makes the page noindex (Google: "
        "not shown in search results after it)",
    ),
]


def _verdict(case: Case) -> tuple[bool, bool]:
    token = crawler_token(case.agent)
    directives = x_robots_tag(case.headers, token)
    page = parse_page(f"<html><head>{case.head}</head><body><p>x</p></body></html>".encode()).page
    directives.add(page.meta_robots)
    if token != "robots":
        directives.add(page.metas.get(token, ""))
    return not directives.noindex, not directives.nofollow


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.source}:{c.agent}:{c.headers}:{c.head}")
def test_what_a_page_lets_the_crawler_do(case: Case) -> None:
    index, follow = _verdict(case)
    assert index == case.index
    if case.follow is not None:
        assert follow == case.follow


def test_unavailable_after_is_kept_with_its_date() -> None:
    """nielsole/xrobotstag TestParserHeaderDate: the date is read and kept as written."""
    got = x_robots_tag(["unavailable_after: 25 Jun 2010 15:00:00 PST"], "googlebot")
    assert got.valued == [("unavailable_after", "25 Jun 2010 15:00:00 PST")] and got.noindex


FETCHED = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "noindex"),
    [
        ("25 Jun 2010 15:00:00 PST", True),  # RFC 822, Google's example
        ("Mon, 01 Jan 2024 00:00:00 GMT", True),  # RFC 822 with its day's name (and comma)
        ("Friday, 25-Jun-10 15:00:00 GMT", True),  # RFC 850
        ("2020-09-21", True),  # ISO 8601, Google's other example; no zone: UTC
        ("2024-06-01T11:59:59Z", True),
        ("2024-06-01T13:59:59+02:00", True),  # 11:59:59 UTC
        ("2024-06-01T12:00:01Z", False),  # still available when fetched
        ("Sat, 01 Jun 2024 12:00:01 GMT", False),
        ("2030-01-01", False),
        ("next tuesday", False),  # does not parse: ignored, as Google does
        ("2024-13-45", False),
        ("", False),
    ],
)
def test_unavailable_after_past_at_fetch_time_is_noindex(value: str, noindex: bool) -> None:
    """Google: "Do not show this page in search results after the specified date/time", in
    the forms it accepts (RFC 822, RFC 850, ISO 8601); an unparseable date is ignored."""
    header = f"noarchive, unavailable_after: {value}, nosnippet"
    got = x_robots_tag([header], "googlebot", now=FETCHED)
    assert got.noindex is noindex and got.words == ["noarchive", "nosnippet"]
    assert got.valued == [("unavailable_after", value)]
    page = Directives(now=FETCHED)  # the page's <meta name="robots">, as the analysis adds it
    page.add(parse_page(f'<meta name="robots" content="unavailable_after: {value}">'.encode())
             .page.meta_robots)
    assert page.noindex is noindex and not page.nofollow
