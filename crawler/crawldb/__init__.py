"""The crawl database: what was fetched, when, with which validators and content fingerprint,
and when each page is due again (an adaptive schedule). Free of Scrapy; the extension in
``crawler/extensions/recrawl.py`` and the site spider use it."""

from crawler.crawldb.api import (
    CrawlDb,
    CrawlDbError,
    DueUrl,
    Outlink,
    PageRecord,
    RecordResult,
    Visit,
    crawldb_enabled,
    crawldb_path,
)
from crawler.crawldb.schedule import AdaptiveSchedule

__all__ = [
    "AdaptiveSchedule",
    "CrawlDb",
    "CrawlDbError",
    "DueUrl",
    "Outlink",
    "PageRecord",
    "RecordResult",
    "Visit",
    "crawldb_enabled",
    "crawldb_path",
]
