"""A periodic progress line about the frontier, in place of Scrapy's LogStats."""

from __future__ import annotations

import logging
from time import monotonic
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import call_later, create_looping_call

from crawler import signals as crawler_signals
from crawler.config.typed import FeatureConfig, knob
from crawler.extensions.tally import CrawlTally
from crawler.frontier import Frontier
from crawler.report.tally import busiest_line

logger = logging.getLogger(__name__)

# The first line comes this soon (or at the interval, when shorter): a crawl that printed
# nothing in its first 30 s looked stuck.
FIRST_LINE_AFTER = 5.0


class ProgressConfig(FeatureConfig):
    """How often the progress line is logged: ``TUNING``'s ``progress_interval`` (0: never;
    ``scrapy parse`` turns it off, a test shortens it)."""

    interval: float = knob("progress_interval")


class FrontierProgress:
    """Every ``progress_interval`` seconds (``TUNING``): pages/s, the frontier's size, hosts ready,
    waiting and in flight, and the real gap (end of one fetch to the start of the next) the
    busiest hosts got, which is what a site owner sees of our politeness: from the crawl's
    tally (:mod:`crawler.extensions.tally`), or the frontier's own figures without one."""

    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.interval = interval
        self.frontier: Frontier | None = None
        self._task: Any = None
        self._first: Any = None
        self._last_pages = 0
        self._last_time = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierProgress:
        interval = ProgressConfig.from_settings(crawler.settings).interval
        if interval <= 0:
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.frontier_opened, crawler_signals.frontier_opened)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        return ext

    def frontier_opened(self, frontier: Frontier, spider: Spider) -> None:
        self.frontier = frontier

    def spider_opened(self, spider: Spider) -> None:
        self._last_time = monotonic()
        self._task = create_looping_call(self.log)
        self._task.start(self.interval, now=False)
        if self.interval > FIRST_LINE_AFTER:
            self._first = call_later(FIRST_LINE_AFTER, self.log)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._first is not None:
            self._first.cancel()  # a crawl over within seconds: its final line is enough
        if self._task is not None and self._task.running:
            self._task.stop()
        self.log(final=True)

    def log(self, final: bool = False) -> None:
        assert self.crawler.stats is not None
        tally = self.crawler.get_extension(CrawlTally)
        pages = self.crawler.stats.get_value("pages/ok", 0)
        now = monotonic()
        rate = (pages - self._last_pages) / max(now - self._last_time, 1e-9)
        self._last_pages, self._last_time = pages, now
        frontier = self.frontier
        if frontier is None:
            logger.info("Crawled %d pages (%.1f pages/s)", pages, rate)
            return
        c = frontier.counts()
        if tally is not None:
            busiest = tally.busiest(3)
        else:
            busiest = [(h, n, g) for h, n, g in frontier.busiest_hosts(3)]
        gaps = busiest_line(busiest, sep=", ")
        eta = "" if final else eta_text(c.queued, rate)
        logger.info(
            "Crawled %d pages (%.1f pages/s); frontier %d queued, %d seen; hosts %d ready, "
            "%d waiting, %d in flight; busiest: %s%s",
            pages,
            rate,
            c.queued,
            c.seen,
            c.hosts_ready,
            c.hosts_waiting,
            c.hosts_busy,
            gaps or "-",
            eta,
        )
        if final:
            stats = self.crawler.stats
            for i, (host, n, gap) in enumerate(frontier.busiest_hosts(3)):
                stats.set_value(f"frontier/busiest/{i + 1}", f"{host} {n} fetches, gap {gap:.3f}s")


def eta_text(queued: int, rate: float) -> str:
    """``; queue empty in ~4m at this rate`` when it can be known: URLs are queued and pages
    came in since the last line. A lower bound while pages still bring new links."""
    if queued <= 0 or rate <= 0:
        return ""
    seconds = max(1.0, queued / rate)
    if seconds < 60:
        when = f"{seconds:.0f}s"
    elif seconds < 3600:
        when = f"{seconds / 60:.0f}m"
    else:
        when = f"{seconds / 3600:.1f}h"
    return f"; queue empty in ~{when} at this rate"
