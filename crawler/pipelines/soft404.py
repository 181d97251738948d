"""Item pipeline: flag soft 404s (a ``200`` that is the host's "not found" page), before the
index pipeline, which keeps no document of them.

A page item of a host whose probe was answered (``crawler.middlewares.soft404``) is compared
with that answer (:func:`crawler.content.soft404.is_soft_404`); a match gets
``soft_404 = True`` and is counted (``soft404/pages``); the item still goes to the feed
exports and the crawl database. Items of hosts not probed (yet), and 304s, pass unjudged.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.content.soft404 import Answer, answer_of, is_soft_404
from crawler.frontier.urls import origin_of

# Hosts whose probe answer is kept (~2 KB each): a broad crawl's pages of one host come close
# together (its back queue), so an answer used long ago is rarely needed again.
MAX_HOSTS = 50_000


class Soft404Pipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        # origin -> its 2xx answer to the soft-404 probe, the least recently used first
        self.answers: OrderedDict[str, Answer] = OrderedDict()
        crawler.signals.connect(self._probed, crawler_signals.soft404_probed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Soft404Pipeline:
        if not crawler.settings.getbool("SOFT404_PROBE", defaults.SOFT404_PROBE):
            raise NotConfigured
        return cls(crawler)

    def _probed(self, origin: str, answer: Answer) -> None:
        """Only a 2xx answer can make a page a soft 404; a host that answers 404 keeps
        nothing. At most ``MAX_HOSTS`` are kept, the least recently used going first."""
        if not answer.ok:
            return
        self.answers[origin] = answer
        while len(self.answers) > MAX_HOSTS:
            self.answers.popitem(last=False)

    def _answer_for(self, url: str) -> Answer | None:
        origin = origin_of(url)
        answer = self.answers.get(origin) if origin else None
        if answer is not None:
            self.answers.move_to_end(origin)  # type: ignore[arg-type]
        return answer

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
