"""Redirects, with the ones that are dropped said out loud.

Scrapy's ``RedirectMiddleware`` drops a request after ``REDIRECT_MAX_TIMES`` hops with a DEBUG
line only. Here a chain over the limit is counted in ``limits/redirects`` and a loop (a
redirect back to a URL of the same chain) in ``limits/redirect_loop``, each with one INFO line
per host; a loop is cut at once rather than followed round until the limit.

A ``Location`` goes where a browser goes: joined to the request's URL as WHATWG joins
(:func:`redirect_target`, :func:`crawler.net.weburl.join`), not with RFC 3986's ``urljoin``
after Scrapy's ``safe_url_string`` (which makes ``Location: \\other`` the path ``/%5Cother``
and ``Location: https:/x`` from an http page ``https:///x``). The robots.txt fetcher and the
soft-404 probes follow a ``Location`` the same way.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable, Iterable
from typing import Any

from scrapy import Request, Spider
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware, RedirectMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.httpobj import urlparse_cached

from crawler.content.document import page_encoding
from crawler.content.encoding import transport_encoding
from crawler.content.refresh import SCAN_CHARS, header_refresh, page_refresh
from crawler.download.limits import limit_log
from crawler.net.weburl import InvalidUrl, join, request_url


def redirect_target(url: str, location: bytes | str) -> str | None:
    """The request URL a ``Location`` header sends a request for ``url`` to, as a browser
    reads it (UTF-8, else Latin-1), or None if that is no http(s) URL."""
    if isinstance(location, bytes):
        try:
            location = location.decode("utf-8")
        except UnicodeDecodeError:
            location = location.decode("latin-1")
    try:
        return request_url(join(url, location))[0]
    except InvalidUrl:
        return None


def within_limits(
    crawler: Any, max_times: int, redirected: Request, request: Request,
    redirect: Callable[[], Request],
) -> Request:
    """``redirect()`` (Scrapy's ``_redirect`` of the hop), its loops and hops over the limit
    counted and said once per host (see the module docstring): for a ``Location`` and a
    refresh alike, whose hops count in one chain."""
    log = limit_log(crawler)
    chain = [*request.meta.get("redirect_urls", []), request.url]
    if redirected.url in chain:
        log.fire(  # said of the URL the chain started from: the one a user would look up
            "redirect_loop",
            chain[0],
            f"redirects back to {redirected.url} after {len(chain)} hops",
        )
        raise IgnoreRequest("redirect loop")
    try:
        return redirect()
    except IgnoreRequest:
        log.fire(
            "redirects",
            chain[0],
            f"more than {max_times} redirects (REDIRECT_MAX_TIMES), the last to {redirected.url}",
        )
        raise


class CountingRedirectMiddleware(RedirectMiddleware):
    """Replaces Scrapy's ``RedirectMiddleware`` at the same order (600)."""

    def _redirect(self, redirected: Request, request: Request, reason: Any) -> Request:
        redirect = functools.partial(super()._redirect, redirected, request, reason)
        return within_limits(
            self.crawler, self.max_redirect_times, redirected, request, redirect
        )

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        """Scrapy's, given the ``Location`` already joined (:func:`redirect_target`): an
        absolute URL, which Scrapy's own join leaves as it is. The response the rest of the
        chain sees keeps its header as the server sent it.

        Scrapy's reads a redirect's status and headers only: it is handed a bodiless copy,
        not ``response.replace()``, which computes a text response's ``encoding`` (decoding
        and sniffing the whole body, on the reactor thread). Nor is ``spider`` passed on:
        Scrapy deprecates it."""
        location = response.headers.get(b"Location")
        target = redirect_target(request.url, location) if location else None
        if target is None or target.encode() == location:
            return super().process_response(request, response)
        headers = response.headers.copy()
        headers[b"Location"] = target
        joined = Response(response.url, status=response.status, headers=headers, request=request)
        result = super().process_response(request, joined)
        return response if result is joined else result


class PrefixMetaRefreshMiddleware(MetaRefreshMiddleware):
    """Scrapy's ``MetaRefreshMiddleware`` (same order, 580), reading the refresh as a browser.

    The page's start is decoded the way every reader of a page decodes it
    (:func:`crawler.content.document.page_encoding`: BOM, ``Content-Type`` charset, the
    WHATWG prescan, then Scrapy's guess), not with ``response.text``, which decodes the whole
    body on the reactor thread (10-100 ms for a 4-8 MB page, during which every host that came
    due waits) and with w3lib's looser ``<meta charset>`` scan. The refresh is found and parsed
    by :func:`crawler.content.refresh.page_refresh` (HTML's declarative refresh steps), not
    w3lib's ``get_meta_refresh``. A ``Refresh`` header, which Scrapy ignores, is read the same
    way and first, for any response, as a browser reads it. A refresh of the page itself (no
    URL, or its own) is a reload, which a crawler that has the page does not do: the page is
    kept. A refresh back to a URL of its chain is a loop, cut and counted as a ``Location``
    one is (``limits/redirect_loop``).
    """

    def _redirect(self, redirected: Request, request: Request, reason: Any) -> Request:
        redirect = functools.partial(super()._redirect, redirected, request, reason)
        return within_limits(
            self.crawler, self.max_redirect_times, redirected, request, redirect
        )

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if (
            request.meta.get("dont_redirect", False)
            or request.method == "HEAD"
            or urlparse_cached(request).scheme not in {"http", "https"}
        ):
            return response
        refresh = response_refresh(response, self._ignore_tags)
        if refresh is None:
            return response
        interval, url = refresh
        redirected = self._redirect_request_using_get(request, response, url)
        if urlparse_cached(redirected).scheme not in {"http", "https"}:
            return response
        if interval < self._maxdelay:
            return self._redirect(redirected, request, "meta refresh")
        return response


_REFRESH_BYTES = 4 * SCAN_CHARS + 64  # enough for 4,096 characters in any codec's widest
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


@functools.lru_cache(maxsize=64)
def _ascii_compatible(codec: str) -> bool:
    """Whether ``codec`` writes the word "refresh", in any case, as ASCII bytes (not UTF-16,
    not EBCDIC): then the bytes tell whether the page holds it."""
    word = "refreshREFRESH"
    try:
        return word.encode(codec) == word.encode("ascii")
    except (UnicodeError, LookupError):
        return False


def response_refresh(response: Response, ignore_tags: Iterable[str]) -> tuple[int, str] | None:
    """The time and request URL of the refresh a browser performs on ``response``: its
    ``Refresh`` header's if it has one that parses, else its ``<meta>``'s (an HTML page's);
    ``None`` if none, or only a reload of the page."""
    header = response.headers.get(b"Refresh")
    if header:
        refresh = header_refresh(header, response.url)
        if refresh is not None:
            return _request(refresh, response.url)
    if not isinstance(response, HtmlResponse):
        return None
    return meta_refresh(response, ignore_tags)


def _request(refresh: tuple[int, str], url: str) -> tuple[int, str] | None:
    """``refresh`` with its URL in request form; ``None`` for a reload of ``url``."""
    try:
        target = request_url(refresh[1])[0]
        if target == request_url(url)[0]:
            return None
    except InvalidUrl:
        return None
    return refresh[0], target


def meta_refresh(response: TextResponse, ignore_tags: Iterable[str]) -> tuple[int, str] | None:
    """The time and request URL of the refresh a browser performs on ``response``, or ``None``
    if it performs none, or only a reload of the page (see :class:`PrefixMetaRefreshMiddleware`)."""
    body = response.body[:_REFRESH_BYTES]
    transport = transport_encoding(response.headers.getlist(b"Content-Type"))  # every line
    if (
        (transport is None or _ascii_compatible(transport))
        and not body.startswith(_WIDE_BOMS)
        and b"\x00" not in body
        and b"refresh" not in body.lower()
    ):
        # Most pages: no wide encoding can be theirs (no UTF-16 BOM or label, no NUL byte), so
        # the word would be ASCII bytes; lowering the bytes is 10x cheaper than the text, and
        # the prescan is not run.
        return None
    codec = page_encoding(body, transport)
    text = codecs.getincrementaldecoder(codec)(errors="replace").decode(body, final=False)
    refresh = page_refresh(text.removeprefix("\ufeff"), response.url, ignore_tags)
    return None if refresh is None else _request(refresh, response.url)
