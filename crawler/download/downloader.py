"""A Scrapy downloader that reports the end of every fetch, however it ends."""

from __future__ import annotations

from collections.abc import Generator
from time import monotonic
from typing import Any

from scrapy import Request, signals
from scrapy.core.downloader import Downloader
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.internet.defer import Deferred, inlineCallbacks

from crawler import signals as crawler_signals
from crawler.frontier import Outcome


class FrontierDownloader(Downloader):
    """Sends ``fetch_finished`` with the fetch's outcome, network time, the response if one
    goes on to the spider, and the status and body size of what the server answered (also for
    answers that became a retry or a redirect, which the crawl record charts).

    ``Downloader.fetch`` is the one place every scheduled request passes through and leaves,
    whether it was downloaded, failed, denied by a middleware, or turned into a retry or a
    redirect; the public signals alone miss requests that never reach the network. The network
    time is from ``request_reached_downloader`` to ``request_left_downloader``.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._started: dict[int, float] = {}
        self._ended: dict[int, float] = {}
        self._answered: dict[int, tuple[int, int]] = {}  # status, body bytes
        crawler.signals.connect(self._reached, signals.request_reached_downloader)
        crawler.signals.connect(self._left, signals.request_left_downloader)
        crawler.signals.connect(self._answered_by_server, signals.response_downloaded)

    def held_longer_than(self, seconds: float) -> int:
        """Requests in the downloader for more than ``seconds``: download slots a hanging host
        holds (O(requests in flight), at most CONCURRENT_REQUESTS)."""
        since = monotonic() - seconds
        return sum(1 for t in list(self._started.values()) if t < since)

    def _reached(self, request: Request) -> None:
        self._started[id(request)] = monotonic()

    def _left(self, request: Request) -> None:
        self._ended[id(request)] = monotonic()

    def _answered_by_server(self, response: Response, request: Request) -> None:
        self._answered[id(request)] = (response.status, len(response.body))

    @inlineCallbacks
    def fetch(
        self, request: Request, spider: Any = None
    ) -> Generator[Deferred[Any], Any, Response | Request]:
        result: Any = None
        try:
            result = yield super().fetch(request)
            return result
        finally:
            key = id(request)
            started = self._started.pop(key, None)
            ended = self._ended.pop(key, None)
            answered = self._answered.pop(key, None)
            if started is None:
                outcome, duration = Outcome.NOT_SENT, None
            else:
                duration = (ended or monotonic()) - started
                # no answer, or a 5xx: a failed fetch of its host (PolitenessPolicy)
                failed = answered is None or answered[0] >= 500
                outcome = Outcome.FAILED if failed else Outcome.FETCHED
            self.crawler.signals.send_catch_log(
                crawler_signals.fetch_finished,
                request=request,
                outcome=outcome,
                duration=duration,
                # a Response goes on to the spider; anything else (a failure, a retry or a
                # redirect as a new Request) leaves nothing of this fetch to process
                response=result if isinstance(result, Response) else None,
                # a retry or a redirect: the URL's final answer is yet to come
                followed_by=result if isinstance(result, Request) else None,
                status=answered[0] if answered is not None else None,
                size=answered[1] if answered is not None else 0,
            )
