"""Scrapy's HttpCompressionMiddleware, with decompression bombs counted as a limit.

Scrapy already stops decompressing at ``DOWNLOAD_MAXSIZE`` and drops the response with a
warning; this adds the ``limits/decompressed_size`` stat and the limits' INFO line, so a
report of what hostile servers did to a crawl is complete.
"""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.httpcompression import (
    HttpCompressionMiddleware,
    _DecompressionMaxSizeExceeded,
)
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from crawler.download.limits import limit_log


class CountingHttpCompressionMiddleware(HttpCompressionMiddleware):
    """See the module docstring; it takes the stock middleware's place (priority 590)."""

    def __init__(self, stats: StatsCollector | None = None, *, crawler: Crawler | None = None):
        super().__init__(stats, crawler=crawler)
        self.crawler = crawler

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        try:
            return super().process_response(request, response)
        except IgnoreRequest as exc:
            if isinstance(exc.__cause__, _DecompressionMaxSizeExceeded) and self.crawler:
                limit_log(self.crawler).fire(
                    "decompressed_size",
                    request.url,
                    f"{len(response.body)} compressed bytes expand past DOWNLOAD_MAXSIZE",
                )
            raise
