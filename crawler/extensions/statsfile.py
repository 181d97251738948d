"""Writes the crawl's final stats to a JSON file (``STATS_FILE``), for scripts and job runners."""

from __future__ import annotations

import datetime
import json
import os
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured


class StatsFile:
    """Stats dumped in the log are for people; this file is for programs (tests, scrapyd
    wrappers, monitoring). Written atomically, so a reader never sees half a file."""

    def __init__(self, crawler: Crawler, path: str) -> None:
        self.crawler = crawler
        self.path = path
        self.reason = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        path = crawler.settings.get("STATS_FILE")
        if not path:
            raise NotConfigured
        ext = cls(crawler, path)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def spider_closed(self, spider: Spider, reason: str) -> None:
        self.reason = reason

    def engine_stopped(self) -> None:
        """Written when the engine stops: every spider_closed handler has set its stats."""
        assert self.crawler.stats is not None
        stats: dict[str, Any] = dict(self.crawler.stats.get_stats())
        stats.setdefault("finish_reason", self.reason or "unknown")
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=1, sort_keys=True, default=_jsonable)
        os.replace(tmp, self.path)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return str(value)
