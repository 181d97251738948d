"""The same crawl written the usual Scrapy way, for comparison: LinkExtractor, response.follow,
Scrapy's own scheduler and dupefilter. Run outside the project with ``scrapy runspider``."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit

import scrapy
from scrapy.linkextractors import LinkExtractor


class StockSpider(scrapy.Spider):
    name = "stock"

    def __init__(self, seeds: str, allow: str = "", **kwargs):
        super().__init__(**kwargs)
        with open(seeds, encoding="utf-8") as f:
            self.seeds = [line.strip() for line in f if line.strip()]
        self.allowed_domains = sorted({urlsplit(s).hostname for s in self.seeds})
        # scope comes from allowed_domains (OffsiteMiddleware): LinkExtractor(allow_domains=)
        # rejects every URL that has a port, as the loopback test hosts do
        # ``allow``: one regular expression a followed URL must match (a tree's own prefix),
        # the usual way to keep a crawl to part of a host
        self.links = LinkExtractor(allow=allow or ())

    async def start(self):
        for url in self.seeds:
            yield scrapy.Request(url)

    def parse(self, response):
        links = self.links.extract_links(response)
        yield {
            "url": response.url,
            "status": response.status,
            "fetched_at": datetime.now(UTC).isoformat(),
            "depth": response.meta.get("depth", 0),
            "title": response.css("title::text").get(""),
            "text": " ".join(
                " ".join(response.xpath("//body//text()[not(ancestor::script)]").getall()).split()
            ),
            "outlinks": [{"url": link.url, "text": link.text} for link in links],
        }
        for link in links:
            yield response.follow(link)
