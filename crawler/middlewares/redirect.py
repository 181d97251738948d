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

from collections.abc import Iterable
from typing import Any

from scrapy import Request, Spider
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware, RedirectMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.response import get_meta_refresh
from w3lib import html
from w3lib.encoding import html_to_unicode

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


class CountingRedirectMiddleware(RedirectMiddleware):
    """Replaces Scrapy's ``RedirectMiddleware`` at the same order (600)."""

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

    def _redirect(self, redirected: Request, request: Request, reason: Any) -> Request:
        log = limit_log(self.crawler)
        chain = [*request.meta.get("redirect_urls", []), request.url]
        if redirected.url in chain:
            log.fire(  # said of the URL the chain started from: the one a user would look up
                "redirect_loop",
                chain[0],
                f"redirects back to {redirected.url} after {len(chain)} hops",
            )
            raise IgnoreRequest("redirect loop")
        try:
            return super()._redirect(redirected, request, reason)
        except IgnoreRequest:
            log.fire(
                "redirects",
                chain[0],
                f"more than {self.max_redirect_times} redirects (REDIRECT_MAX_TIMES), "
                f"the last to {redirected.url}",
            )
            raise


class PrefixMetaRefreshMiddleware(MetaRefreshMiddleware):
    """Scrapy's ``MetaRefreshMiddleware`` (same order, 580), decoding only the page's start.

    The stock one reads ``response.text[0:4096]``, which decodes the whole body on the reactor
    thread: 10-100 ms for a 4-8 MB page (nodejs ``all.html``), during which every host that
    came due waits. A refresh is looked for in those first 4,096 characters either way, so when
    the page declares its encoding (header, BOM or ``<meta charset>``) only a prefix long enough
    for them is decoded, the same way; otherwise, or when the prefix holds too few characters,
    the stock path runs. Same redirects, same base URL.
    """

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if (
            request.meta.get("dont_redirect", False)
            or request.method == "HEAD"
            or not isinstance(response, HtmlResponse)
            or urlparse_cached(request).scheme not in {"http", "https"}
        ):
            return response
        interval, url = meta_refresh(response, self._ignore_tags)
        if not url:
            return response
        redirected = self._redirect_request_using_get(request, response, url)
        if urlparse_cached(redirected).scheme not in {"http", "https"}:
            return response
        if interval is not None and interval < self._maxdelay:
            return self._redirect(redirected, request, "meta refresh")
        return response


_REFRESH_CHARS = 4096  # what Scrapy's get_meta_refresh and get_base_url look at
_REFRESH_BYTES = 4 * _REFRESH_CHARS + 64  # enough for 4,096 characters in any codec's widest


def meta_refresh(
    response: TextResponse, ignore_tags: Iterable[str]
) -> tuple[None, None] | tuple[float, str]:
    """``scrapy.utils.response.get_meta_refresh(response)``, from a decoded prefix when that
    gives the same 4,096 characters (see :class:`PrefixMetaRefreshMiddleware`)."""
    body = response.body
    encoding = response._declared_encoding() if len(body) > _REFRESH_BYTES else None
    if encoding is None:
        return get_meta_refresh(response, ignore_tags=ignore_tags)
    text = html_to_unicode(f"charset={encoding}", body[:_REFRESH_BYTES])[1]
    # a character cut at the prefix's end is decoded differently: keep well clear of it
    if len(text) < _REFRESH_CHARS + 16:
        return get_meta_refresh(response, ignore_tags=ignore_tags)
    text = text[:_REFRESH_CHARS]
    base = html.get_base_url(text, response.url, encoding)
    return html.get_meta_refresh(text, base, encoding, ignore_tags=ignore_tags)
