"""Other projects' meta refresh test vectors, as data, run against the crawler's refresh.

Source: ``web-platform-tests/wpt``, ``html/semantics/document-metadata/the-meta-element/
pragma-directives/attr-meta-http-equiv-refresh/parsing.html`` (commit ``0d62f1c8b15a``): every
entry of ``tests_arr``, a ``content`` value and what a browser does with it (``[]``: no refresh;
``[time, url]``: a refresh after ``time`` seconds to ``url`` resolved against the page,
``refresh.sub.html`` being the page itself). Each case is served the way the test's support page
serves it: ``<meta http-equiv=refresh content="...">`` in a page at ``support/refresh.sub.html``.
They are HTML's "shared declarative refresh steps" (4.2.5.3). A few cases of our own
(``WHATWG``) follow: which ``<meta>`` the tokenizer sees, the ``<base>`` in force, references in
the attribute, each with the spec's rule it checks.

Ours is what the crawl does with the page: :func:`crawler.content.refresh.page_refresh` (time and
absolute URL), then :func:`crawler.middlewares.redirect.meta_refresh` on the response (the
request URL the middleware redirects to). The WPT values are also sent as a ``Refresh`` header,
which HTML runs through the same steps (:func:`crawler.middlewares.redirect.response_refresh`).
A refresh of the page itself is a reload, which the crawler does not do on purpose (it has the
page): ``page_refresh`` says it, ``meta_refresh`` gives ``None``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from crawler.content.refresh import page_refresh, parse_refresh
from crawler.middlewares.redirect import (
    PrefixMetaRefreshMiddleware,
    meta_refresh,
    response_refresh,
)
from crawler.net.weburl import join, request_url

WPT = "wpt attr-meta-http-equiv-refresh/parsing.html"
WHATWG = "WHATWG HTML"
PAGE = "http://web-platform.test/refresh/support/refresh.sub.html?input=x"
SELF = "refresh.sub.html"


@dataclass(frozen=True)
class Case:
    source: str
    content: str  # the content attribute's value (WPT) or the page's head (WHATWG)
    expected: tuple[int, str] | tuple[()]  # the source's: () no refresh, else (time, url)
    differs: str = ""


def _wpt(content: str, *expected: int | str) -> Case:
    return Case(WPT, content, expected)  # type: ignore[arg-type]


WPT_CASES = [
    _wpt(""),
    _wpt("1", 1, SELF),
    _wpt("1 ", 1, SELF),
    _wpt("1\t", 1, SELF),
    _wpt("1\r", 1, SELF),
    _wpt("1\n", 1, SELF),
    _wpt("1\f", 1, SELF),
    _wpt("1;", 1, SELF),
    _wpt("1,", 1, SELF),
    _wpt("1; url=foo", 1, "foo"),
    _wpt("1, url=foo", 1, "foo"),
    _wpt("1 url=foo", 1, "foo"),
    _wpt("1;\turl=foo", 1, "foo"),
    _wpt("1,\turl=foo", 1, "foo"),
    _wpt("1\turl=foo", 1, "foo"),
    _wpt("1;\rurl=foo", 1, "foo"),
    _wpt("1,\rurl=foo", 1, "foo"),
    _wpt("1\rurl=foo", 1, "foo"),
    _wpt("1;\nurl=foo", 1, "foo"),
    _wpt("1,\nurl=foo", 1, "foo"),
    _wpt("1\nurl=foo", 1, "foo"),
    _wpt("1;\furl=foo", 1, "foo"),
    _wpt("1,\furl=foo", 1, "foo"),
    _wpt("1\furl=foo", 1, "foo"),
    _wpt("1url=foo"),
    _wpt("1x;url=foo"),
    _wpt("1 x;url=foo", 1, "x;url=foo"),
    _wpt("1;;url=foo", 1, ";url=foo"),
    _wpt("  1  ;  url  =  foo", 1, "foo"),
    _wpt("  1  ,  url  =  foo", 1, "foo"),
    _wpt("  1  ;  foo", 1, "foo"),
    _wpt("  1  ,  foo", 1, "foo"),
    _wpt("  1  url  =  foo", 1, "foo"),
    _wpt("1; url=foo ", 1, "foo"),
    _wpt("1; url=f\to\no", 1, "foo"),
    _wpt('1; url="foo"bar', 1, "foo"),
    _wpt("1; url='foo'bar", 1, "foo"),
    _wpt("1; url=\"foo'bar", 1, "foo'bar"),
    _wpt("1; url foo", 1, "url foo"),
    _wpt("1; urlfoo", 1, "urlfoo"),
    _wpt("1; urfoo", 1, "urfoo"),
    _wpt("1; ufoo", 1, "ufoo"),
    _wpt('1; "foo"bar', 1, "foo"),
    _wpt("; foo"),
    _wpt(", foo"),
    _wpt("foo"),
    _wpt("+1; url=foo"),
    _wpt("-1; url=foo"),
    _wpt("+0; url=foo"),
    _wpt("-0; url=foo"),
    _wpt("0; url=foo", 0, "foo"),
    _wpt("+1; foo"),
    _wpt("-1; foo"),
    _wpt("+0; foo"),
    _wpt("-0; foo"),
    _wpt("0; foo", 0, "foo"),
    _wpt("+1"),
    _wpt("-1"),
    _wpt("+0"),
    _wpt("-0"),
    _wpt("0", 0, SELF),
    _wpt("1.9; url=foo", 1, "foo"),
    _wpt("1.9..5.; url=foo", 1, "foo"),
    _wpt(".9; url=foo", 0, "foo"),
    _wpt("0.9; url=foo", 0, "foo"),
    _wpt("1e0; url=foo"),
    _wpt("1e1; url=foo"),
    _wpt("10e-1; url=foo"),
    _wpt("-0.1; url=foo"),
]


def _w(rule: str, head: str, *expected: int | str) -> Case:
    return Case(f"{WHATWG} {rule}", head, expected)  # type: ignore[arg-type]


R = '<meta http-equiv="refresh" content="0; url=/r">'
# Pages of our own: each a <head>, the rule it checks, what a browser does.
WHATWG_CASES = [
    _w(
        "4.2.5.3 http-equiv is 'refresh', case-insensitively",
        '<meta http-equiv="REFRESH" content="0; url=/r">',
        0,
        "/r",
    ),
    _w(
        "4.2.5.3 http-equiv is 'refresh', no other",
        '<meta http-equiv="x-refresh" content="0; url=/r">',
    ),
    _w("4.2.5.3 a content attribute, not empty", '<meta http-equiv="refresh">'),
    _w(
        "4.2.5.3 the first refresh that parses wins",
        '<meta http-equiv="refresh" content="x"><meta http-equiv="refresh" content="2; /a">'
        '<meta http-equiv="refresh" content="3; /b">',
        2,
        "/a",
    ),
    _w(
        "4.2.5.3 a URL that does not parse: no refresh, a later one counts",
        '<meta http-equiv="refresh" content="0; url=http://[x"><meta http-equiv="refresh" '
        'content="4; /b">',
        4,
        "/b",
    ),
    _w(
        "13.2.5.33 the first of two attributes of one name",
        '<meta http-equiv="refresh" content="0; /a" content="0; /b">',
        0,
        "/a",
    ),
    _w(
        "13.2.5.38 an unquoted attribute value",
        "<meta http-equiv=refresh content=5;url=/u>",
        5,
        "/u",
    ),
    _w(
        "13.2.5.72 references in the attribute are resolved",
        '<meta http-equiv="refresh" content="0; url=/q?a=1&amp;b=2&#x26;c=3&lt;">',
        0,
        "/q?a=1&b=2&c=3<",
    ),
    _w(
        "13.2.5.72 a named reference without ';' before '=' stays as written",
        '<meta http-equiv="refresh" content="0; url=/q?a=1&copy=2&not">',
        0,
        "/q?a=1&copy=2\u00ac",
    ),
    _w(
        "13.2.5.72 &quot; quotes the URL",
        '<meta http-equiv="refresh" content="0; url=&quot;/x&quot;y">',
        0,
        "/x",
    ),
    _w(
        "4.2.3 the URL is parsed against the <base> in force",
        f'<base href="http://other.test/dir/">{R.replace("/r", "r")}',
        0,
        "http://other.test/dir/r",
    ),
    _w(
        "4.2.3 a <base> after the refresh is not yet in force",
        f'{R.replace("/r", "r")}<base href="http://other.test/dir/">',
        0,
        "r",
    ),
    _w(
        "4.2.3 the first <base> with an href",
        '<base target=x><base href="/one/"><base href="/two/">' + R.replace("/r", "r"),
        0,
        "/one/r",
    ),
    _w(
        "4.2.3 a <base> whose URL does not parse leaves the document's",
        f'<base href="http://[x/">{R.replace("/r", "r")}',
        0,
        "r",
    ),
    _w(
        "4.2.5.3 a relative URL against a base that takes none: no refresh, a later one counts",
        '<base href="data:,x"><meta http-equiv="refresh" content="0; r">'
        '<meta http-equiv="refresh" content="1; http://other.test/x">',
        1,
        "http://other.test/x",
    ),
    _w("13.2.5.1 a comment is no tag", f"<!-- {R} -->"),
    _w("13.2.5.43 '<!-->' ends a comment", f"<!-->{R}", 0, "/r"),
    _w("13.2.5.1 a <meta> in a <title> is text", f"<title>{R}</title>"),
    _w("13.2.5.2 a <meta> in a <textarea> is text", f"<textarea>{R}</textarea>"),
    _w("13.2.5.3 a <meta> in a <style> is text", f"<style>{R}</style>"),
    _w("13.2.5.4 a <meta> in a <script> is text", f"<script>var s = '{R}';</script>"),
    _w("13.2.5.4 a script ends at its end tag", f"<script>x</script >{R}", 0, "/r"),
    _w("4.12.3 a <template>'s content is no part of the document", f"<template>{R}</template>"),
    _w("4.12.2 a <noscript> is text when scripting is on", f"<noscript>{R}</noscript>"),
    _w("13.2.5.33 a quote in an end tag's attribute name quotes nothing", f'</p "x>{R}', 0, "/r"),
    _w("13.2.5.33 an end tag that does not end hides the rest", f'</p x="y>{R}'),
    _w("13.2.5.42 '<?...>' is a bogus comment, not the tag", f'<?x "{R}"?>{R}', 0, "/r"),
    _w(
        "13.2.5.34 an attribute value may hold '>'",
        '<meta name="a>b" http-equiv="refresh" content="0; url=/r">',
        0,
        "/r",
    ),
]


def _page(case: Case) -> str:
    if case.source == WPT:  # the support page, the value escaped as an attribute's
        return (
            f'<!doctype html><meta http-equiv=refresh content="{html.escape(case.content)}">'
            "<body>refresh.sub.html"
        )
    return f"<!doctype html><html><head>{case.content}</head><body>page</body></html>"


def _browser(case: Case) -> tuple[int, str] | None:
    """What a browser does with the page: the source's verdict, its URL resolved."""
    if not case.expected:
        return None
    time, url = case.expected
    return time, PAGE if url == SELF else join(PAGE, url)


CASES = WPT_CASES + WHATWG_CASES


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.source}:{case.content!r}")
def test_the_refresh_a_browser_performs(case: Case) -> None:
    assert page_refresh(_page(case), PAGE) == _browser(case)


@pytest.mark.parametrize("case", WPT_CASES, ids=lambda case: repr(case.content))
def test_the_content_parsed_as_the_steps_say(case: Case) -> None:
    parsed = parse_refresh(case.content)
    if not case.expected:
        assert parsed is None or not case.content
    else:
        time, url = case.expected
        assert parsed is not None
        assert parsed[0] == time
        assert parsed[1] is None if url == SELF else join(PAGE, parsed[1]) == join(PAGE, url)


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.source}:{case.content!r}")
def test_the_request_the_middleware_makes(case: Case) -> None:
    """A browser's refresh is the crawl's redirect, bar a reload of the page itself."""
    response = HtmlResponse(PAGE, body=_page(case).encode(), headers={"Content-Type": "text/html"})
    browser = _browser(case)
    if browser is None or browser[1] == PAGE:
        assert meta_refresh(response, ["noscript"]) is None
    else:
        assert meta_refresh(response, ["noscript"]) == (browser[0], request_url(browser[1])[0])


@pytest.mark.parametrize("case", WPT_CASES, ids=lambda case: repr(case.content))
def test_a_refresh_header_is_read_the_same_way(case: Case) -> None:
    """HTML runs a ``Refresh`` header's value through the same steps, for any document (here a
    PDF), before any ``<meta>``: a header that parses wins over the page's refresh, a reload
    included."""
    browser = _browser(case)
    expected = (
        None if browser is None or browser[1] == PAGE else (browser[0], request_url(browser[1])[0])
    )
    headers = {"Refresh": case.content.encode("latin-1"), "Content-Type": "application/pdf"}
    assert response_refresh(Response(PAGE, headers=headers, body=b"%PDF-1.4"), []) == expected
    page = b'<meta http-equiv="refresh" content="0; url=/from-the-page">'
    html = HtmlResponse(PAGE, body=page, headers={**headers, "Content-Type": "text/html"})
    fallback = (0, "http://web-platform.test/from-the-page")
    assert response_refresh(html, []) == (expected if browser is not None else fallback)


@pytest.mark.parametrize("digits", [4301, 5000, 12_000])  # the <meta> in the middleware's 16 KB
def test_a_time_of_thousands_of_digits_is_a_refresh_never_due(digits: int) -> None:
    """HTML parses the time as a non-negative integer, of any length. Python refuses to read an
    int of over 4,300 digits (ValueError): a ``Refresh`` header or a ``<meta>`` saying so made
    the middleware raise and lose the response. It is a refresh too late to follow."""
    content = "9" * digits + "; url=/later"
    parsed = parse_refresh(content)
    assert parsed is not None and parsed[0] > 10**9 and parsed[1] == "/later"
    later = "http://web-platform.test/later"
    headers = {"Refresh": content, "Content-Type": "application/pdf"}
    pdf = Response(PAGE, headers=headers, body=b"%PDF-1.4")
    assert response_refresh(pdf, [])[1] == later  # type: ignore[index]
    page = f'<meta http-equiv="refresh" content="{content}">'.encode()
    answer = HtmlResponse(PAGE, body=page, headers={"Content-Type": "text/html"})
    assert meta_refresh(answer, [])[1] == later  # type: ignore[index]
    middleware = PrefixMetaRefreshMiddleware.from_crawler(get_crawler(Spider))
    request = Request(PAGE)
    answer = answer.replace(request=request)
    assert middleware.process_response(request, answer) is answer  # kept: never due
    assert parse_refresh("0" * digits + "7") == (7, None)
