"""The crawl database: what was fetched, when, with which validators and content fingerprint,
and when each page is due again (an adaptive schedule). Free of Scrapy; the extension in
``crawler/extensions/recrawl.py`` and the site spider use it."""

from .api import CrawlDb, DueUrl, Outlink, PageRecord, RecordResult, Visit
from .schedule import AdaptiveSchedule
from .sqlite import CrawlDbError, SqliteCrawlDb, crawldb_enabled, crawldb_path

__all__ = [
    "AdaptiveSchedule",
    "CrawlDb",
    "CrawlDbError",
    "DueUrl",
    "Outlink",
    "PageRecord",
    "RecordResult",
    "SqliteCrawlDb",
    "Visit",
    "crawldb_enabled",
    "crawldb_path",
]
