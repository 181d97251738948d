"""robots.txt per RFC 9309, fetched through the frontier (replaces Scrapy's RobotsTxtMiddleware):
the gate.

This downloader middleware (order 100, like Scrapy's own) only checks page requests against
their origin's verdict; a denied one raises ``IgnoreRequest`` here, so it never reaches the
network and the frontier frees the host at once (stat ``robotstxt/denied``). Everything about
fetching robots.txt (the per-origin state machine: the requests, redirects, retries, holds,
parked requests, direct fetches) belongs to
:class:`~crawler.middlewares.robots_fetcher.RobotsFetcher`,
whose module docstring describes it; robots.txt requests travel through this middleware's
hooks only to be handed to it, since their answers must never reach the spider.
"""

from __future__ import annotations

import logging

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response

from crawler.frontier.urls import origin_of
from crawler.meta import USAGE_BEFORE_META, USAGE_META
from crawler.middlewares.robots_fetcher import RobotsFetcher
from crawler.middlewares.robots_requests import RobotsTxtHandled, is_robots_request
from crawler.robots import Verdict
from crawler.robots.config import RobotsConfig
from crawler.robots.usage import NOT_FETCHED, decide, path_of, purposes_of

__all__ = ["RobotsMiddleware", "RobotsTxtHandled"]

logger = logging.getLogger(__name__)


class RobotsMiddleware:
    """The gate: a page request goes on only when its origin's robots.txt allows it."""

    def __init__(self, crawler: Crawler, fetcher: RobotsFetcher | None = None) -> None:
        s = crawler.settings
        config = RobotsConfig.from_settings(s)  # built once, handed to the fetcher
        if not config.enabled:
            raise NotConfigured("ROBOTSTXT_ENABLED is off")
        if s.getbool("ROBOTSTXT_OBEY"):
            logger.warning(
                "ROBOTSTXT_OBEY is on: Scrapy's own robots.txt middleware runs as well as "
                "crawler.middlewares.robots; set ROBOTSTXT_OBEY = False"
            )
        self.stats = crawler.stats
        self.purposes = purposes_of(s)
        if fetcher is None:
            fetcher = RobotsFetcher.from_crawler(crawler, config)
        self.fetcher = fetcher

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if is_robots_request(request):
            self.fetcher.process_request(request)
            return None
        # a retry or a redirect carries its parent's: this request's are decided afresh
        request.meta.pop(USAGE_BEFORE_META, None)
        request.meta.pop(USAGE_META, None)
        if request.meta.get("dont_obey_robotstxt"):
            return None
        origin = origin_of(request.url)
        if origin is None:
            return None
        verdict = await self.fetcher.settle(request, origin)
        if verdict is Verdict.ALLOW:
            self._usage(request, origin)
            return None
        if verdict is Verdict.DENY:
            self._inc("robotstxt/denied")
            logger.debug("Forbidden by robots.txt: %s", request.url)
            raise IgnoreRequest(f"Forbidden by robots.txt: {request.url}")
        if verdict is Verdict.UNAVAILABLE:
            # Disallowed for now: the fetcher parks a frontier request until a retry succeeds;
            # anything else is refused outright.
            if self.fetcher.park(request, origin):
                self._inc("robotstxt/deferred")
                raise IgnoreRequest(
                    f"robots.txt of {origin} unreachable for now; parked: {request.url}"
                )
            self._inc("robotstxt/denied_unreachable")
            raise IgnoreRequest(f"robots.txt of {origin} is unreachable: {request.url}")
        self._inc("robotstxt/unresolved")
        raise IgnoreRequest(f"robots.txt of {origin} could not be read: {request.url}")

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        if not is_robots_request(request):
            return response
        return await self.fetcher.process_response(request, response)

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        if is_robots_request(request):
            self.fetcher.process_exception(request, exception)
        return None

    def _usage(self, request: Request, origin: str) -> None:
        """The usage preferences the robots.txt group states for the URL: kept on the request
        for the page's decision, and enforced now when they refuse every purpose of the crawl
        (not fetched; README "Usage preferences")."""
        rules = self.fetcher.book.state(origin).rules
        if rules is None:
            return
        signals = rules.usage(path_of(request.url))
        if not signals:
            return
        request.meta[USAGE_BEFORE_META] = signals
        decision = decide(signals, self.purposes)
        if not decision.fetch:
            for signal in decision.signals:
                self._inc(signal.stat)
            self._inc(f"usage/effect/{NOT_FETCHED}")
            logger.debug("Not fetched, by usage preferences of robots.txt: %s", request.url)
            raise IgnoreRequest(f"Usage preferences refuse {request.url} every purpose")

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)
