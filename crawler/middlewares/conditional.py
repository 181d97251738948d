"""Conditional GET: a refetch carries the validators the crawl database stored for its URL.

``If-None-Match`` gets the stored ``ETag`` and ``If-Modified-Since`` the stored
``Last-Modified``, both verbatim (RFC 9110 13.1: the server's own strings, never a date the
client made up). The ``304 Not Modified`` answer then goes to the spider like any other response
(Scrapy's HttpCacheMiddleware would swap it for a cached 200; nothing here does), with what the
crawl database holds of the page in ``response.meta[NOT_MODIFIED_META]`` (its outlinks and
validators): the spider reports it as "not modified" without reading the database itself, and
nothing is re-parsed or re-indexed.

Validators belong to a URL: a redirect copies the request's headers to the new URL, so the ones
set for the old URL are replaced by the new URL's own (or removed). Requests that already carry
validators of their own, ``dont_conditional`` requests and robots.txt requests are left alone.
Disabled (NotConfigured) when the crawl keeps no crawl database.
"""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from crawler import signals as crawler_signals
from crawler.crawldb import CrawlDb, crawldb_enabled
from crawler.frontier import InvalidUrl, normalize_url
from crawler.items import NOT_MODIFIED_META
from crawler.meta import ROBOTS_META

CONDITIONAL_META = "conditional_for"  # the URL whose validators this middleware set
_VALIDATORS = (b"If-None-Match", b"If-Modified-Since")


class ConditionalGetMiddleware:
    """Downloader middleware, order 450 (after DefaultHeaders, before Retry and Redirect)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.db: CrawlDb | None = None
        self.stats = crawler.stats
        self.allow_all = crawler.settings.getbool("HTTPERROR_ALLOW_ALL")
        self.allowed = [int(c) for c in crawler.settings.getlist("HTTPERROR_ALLOWED_CODES")]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ConditionalGetMiddleware:
        if not crawldb_enabled(crawler.settings):
            raise NotConfigured  # no crawl database (no message: no warning on every crawl)
        middleware = cls(crawler)
        crawler.signals.connect(middleware._crawldb_opened, crawler_signals.crawldb_opened)
        return middleware

    def _crawldb_opened(self, db: CrawlDb) -> None:
        self.db = db

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        meta = request.meta
        if meta.get(ROBOTS_META) or meta.get("dont_conditional"):
            return None
        set_for = meta.get(CONDITIONAL_META)
        if set_for is not None:
            if set_for == request.url:
                return None  # a retry of the same URL
            for name in _VALIDATORS:  # a redirect copied the previous URL's validators
                request.headers.pop(name, None)
            del meta[CONDITIONAL_META]
        if any(name in request.headers for name in _VALIDATORS):
            return None
        if self.db is None:
            return None
        try:
            key = normalize_url(request.url)[0]
        except InvalidUrl:
            return None
        etag, last_modified = self.db.validators(key)
        if not etag and not last_modified:
            return None
        if etag:
            request.headers[b"If-None-Match"] = etag
        if last_modified:
            request.headers[b"If-Modified-Since"] = last_modified
        meta[CONDITIONAL_META] = request.url
        self._let_304_through(request)
        if self.stats is not None:
            self.stats.inc_value("crawldb/conditional_requests")
        return None

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        """A 304 carries the page's stored record (whoever asked for it: these validators or
        the request's own) to the spider."""
        if response.status == 304 and self.db is not None:
            try:
                key = normalize_url(response.url)[0]
            except InvalidUrl:
                return response
            request.meta[NOT_MODIFIED_META] = self.db.get(key)  # response.meta, once tied
        return response

    def _let_304_through(self, request: Request) -> None:
        """Make sure HttpErrorMiddleware hands the 304 to the callback (the site spider allows
        it already; other spiders get it through the request's meta)."""
        meta = request.meta
        if meta.get("handle_httpstatus_all") or self.allow_all:
            return
        if "handle_httpstatus_list" in meta:
            allowed = list(meta["handle_httpstatus_list"])
        else:
            allowed = list(getattr(self.crawler.spider, "handle_httpstatus_list", self.allowed))
        if 304 not in allowed:
            meta["handle_httpstatus_list"] = [*allowed, 304]
