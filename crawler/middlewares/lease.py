"""Tells the frontier scheduler when the spider is done with a page (spider middleware).

The frontier forgets a URL only when its page's item and links have left the spider and the
pipelines (``Frontier.ack``). Items announce themselves (``item_scraped``, ``item_dropped``,
``item_error``), but a page that yields no item (a 404 filtered by ``HttpErrorMiddleware``, a
noindex page, a callback that yields only links) sends no signal at all. This middleware sits
outermost (lowest order in ``SPIDER_MIDDLEWARES``), so it sees exactly what the scraper gets,
and when the output of a leased page ends, normally or with an error, it sends
``page_output_done`` with the number of items the page yielded: the scheduler acknowledges the
page once that many items have left the pipelines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawler import signals as crawler_signals
from crawler.meta import LEASE_META


class LeaseAckMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeaseAckMiddleware:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        if LEASE_META not in response.meta:
            yield from result
            return
        items = 0
        try:
            for o in result:
                if o is not None and not isinstance(o, Request):
                    items += 1
                yield o
        finally:
            self._done(response, items)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        if LEASE_META not in response.meta:
            async for o in result:
                yield o
            return
        items = 0
        try:
            async for o in result:
                if o is not None and not isinstance(o, Request):
                    items += 1
                yield o
        finally:
            self._done(response, items)

    def _done(self, response: Response, items: int) -> None:
        self.crawler.signals.send_catch_log(
            crawler_signals.page_output_done, response=response, items=items
        )
