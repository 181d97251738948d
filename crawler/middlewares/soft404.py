"""Soft-404 probes in a Scrapy crawl (the judgement is :mod:`crawler.content.soft404`'s).

When the scheduler admits the first URL of an origin (``origin_discovered``), one request for a
path that cannot exist is scheduled with ``engine.crawl``: it goes through the frontier as one
of the host's *first* requests (``frontier_first``, as robots.txt and the sitemap probe do):
after robots.txt (which may disallow it: then the host is not judged), under the host's
politeness, and before any page of the host, so that every page is judged. Like robots.txt it
is not charged to the host's page budget (a budget counts pages) and passes the site's URL
filters (they choose pages, and the probe is none).

Its answer never reaches the spider (:class:`Soft404Probed`, an ``IgnoreRequest``): this
downloader middleware (its redirects are not followed: ``dont_redirect``) sends what
the answer looks like (:class:`~crawler.content.soft404.Answer`, signal ``soft404_probed``), and
the soft-404 pipeline (``crawler.pipelines.soft404``) judges each page item of that host against
it. ``soft404/probes`` counts the probes sent, ``soft404/probe_status/<status>`` their
answers.

Enabled by ``SOFT404_PROBE``. Each worker of a fleet probes the hosts it discovers and keeps
those answers.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response, TextResponse

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.content.encoding import transport_encoding
from crawler.content.html import parse_page
from crawler.content.soft404 import answer_of, probe_path
from crawler.frontier.urls import origin_of
from crawler.middlewares.redirect import redirect_target

logger = logging.getLogger(__name__)

SOFT404_PROBE_META = "soft404_probe"  # the origin whose probe this request is
# Origins remembered as probed (~170 B each with the string), least recently met forgotten:
# one met again after that is probed again (one request more; the pipeline keeps the newer
# answer).
PROBED_KEPT = 100_000


class Soft404Probed(IgnoreRequest):
    """A probe's answer was read: nothing for the spider."""


class Soft404ProbeMiddleware:
    """Downloader middleware, order 470 (below the redirect middlewares, which leave a
    probe's redirect alone, and the retry middleware, which may retry its 5xx)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._probed: OrderedDict[str, None] = OrderedDict()  # least recently met first
        self.max_probed = PROBED_KEPT
        crawler.signals.connect(self._origin_discovered, crawler_signals.origin_discovered)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Soft404ProbeMiddleware:
        if not crawler.settings.getbool("SOFT404_PROBE", defaults.SOFT404_PROBE):
            raise NotConfigured
        return cls(crawler)

    def _origin_discovered(self, origin: str, host: str) -> None:
        key = origin_of(origin + "/") or origin
        engine = self.crawler.engine
        probed = self._probed
        if key in probed:
            probed.move_to_end(key)
            return
        if engine is None:
            return
        probed[key] = None
        if len(probed) > self.max_probed:
            probed.popitem(last=False)
        request = Request(
            key + probe_path(),
            dont_filter=True,
            # its redirect is read, not followed (crawler.content.soft404)
            meta={
                SOFT404_PROBE_META: key,
                "depth": 0,
                "dont_conditional": True,
                "dont_redirect": True,
                "frontier_first": True,  # before the host's pages: they are all judged
            },
        )
        self._inc("soft404/probes")
        engine.crawl(request)

    def process_response(self, request: Request, response: Response) -> Response:
        origin = request.meta.get(SOFT404_PROBE_META)
        if origin is None:
            return response
        self._inc(f"soft404/probe_status/{response.status}")
        title = text = ""
        if isinstance(response, TextResponse) and 200 <= response.status < 300:
            encoding = transport_encoding(response.headers.getlist(b"Content-Type"))
            page = parse_page(response.body, encoding).page
            title, text = page.title, page.main_text or page.text
        final = response.url
        location = response.headers.get(b"Location")
        if 300 <= response.status < 400 and location:
            final = redirect_target(request.url, location) or final
        answer = answer_of(response.status, title, text, request.url, final)
        self.crawler.signals.send_catch_log(
            crawler_signals.soft404_probed, origin=origin, answer=answer
        )
        logger.debug("soft-404 probe of %s answered %d", origin, response.status)
        raise Soft404Probed(f"soft-404 probe of {origin} read")

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)
