"""How a spider hands a page's links to the crawl."""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.http import Response

from . import signals as crawler_signals


def follow_links(spider: Spider, response: Response, urls: list[str]) -> list[Request]:
    """Give ``urls`` to the frontier in one call; returns the Requests to yield instead when no
    frontier took them (the crawl runs with another scheduler).

    The frontier tests each link against what it has seen before any Request exists: on real
    sites most links of a page repeat, and building a Request costs about 12 us.
    """
    if not urls:
        return []
    results = spider.crawler.signals.send_catch_log(
        crawler_signals.links_extracted, response=response, urls=urls, spider=spider
    )
    if any(result is True for _, result in results):
        return []
    requests = []
    for url in urls:
        try:
            requests.append(Request(url))
        except ValueError:  # a URL urlsplit accepts but Scrapy cannot encode
            spider.crawler.stats.inc_value("links/invalid")
    return requests
