"""Item pipeline: flag soft 404s (a ``200`` that is the host's "not found" page), before the
index pipeline, which keeps no document of them.

A page item of a host whose probe was answered (``crawler.middlewares.soft404``) is compared
with that answer (:func:`crawler.content.soft404.is_soft_404`); a match gets
``soft_404 = True`` and is counted (``soft404/pages``); the item still goes to the feed
exports and the crawl database. Items of hosts not probed (yet), and 304s, pass unjudged.
"""

from __future__ import annotations

from typing import Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.content.soft404 import Answer, answer_of, is_soft_404
from crawler.frontier.urls import origin_of


class Soft404Pipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.answers: dict[str, Answer] = {}  # origin -> its answer to the soft-404 probe
        crawler.signals.connect(self._probed, crawler_signals.soft404_probed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Soft404Pipeline:
        if not crawler.settings.getbool("SOFT404_PROBE", defaults.SOFT404_PROBE):
            raise NotConfigured
        return cls(crawler)

    def _probed(self, origin: str, answer: Answer) -> None:
        self.answers[origin] = answer

    def _answer_for(self, url: str) -> Answer | None:
        origin = origin_of(url)
        return self.answers.get(origin) if origin else None

    def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        status = adapter.get("status")
        url = adapter.get("url")
        if not url or status is None or not 200 <= int(status) < 300:
            return item
        final = adapter.get("final_url") or url
        probe = self._answer_for(final) or self._answer_for(url)
        if probe is None:
            return item
        text = adapter.get("main_text") or adapter.get("text") or ""
        page = answer_of(int(status), adapter.get("title") or "", text, url, final)
        if is_soft_404(probe, page):
            adapter["soft_404"] = True
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("soft404/pages")
        return item
