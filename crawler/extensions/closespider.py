"""Scrapy's ``CloseSpider`` with page requisites left out of ``CLOSESPIDER_PAGECOUNT``.

Stock ``CloseSpider`` counts every response received as a page. An archival crawl
(``[requisites]``) fetches each page's stylesheets, scripts and images too, often ten or more
per page: a page budget of 1,000 would end the crawl after a hundred pages. A requisite
(``REQUISITE_META``) is not a page, so it is not counted; everything else is Scrapy's.
"""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.extensions.closespider import CloseSpider
from scrapy.http import Response

from crawler.meta import REQUISITE_META


class PageCloseSpider(CloseSpider):
    """Replaces ``scrapy.extensions.closespider.CloseSpider`` (``EXTENSIONS`` in settings)."""

    def page_count(self, response: Response, request: Request, spider: Spider) -> None:
        if request.meta.get(REQUISITE_META):
            return
        super().page_count(response, request, spider)
