"""URLs cut off only by a host's page budget are kept for a later crawl.

A site's ``max_pages_per_host`` stops a host's URLs from entering the frontier once that many
were admitted. Those links are not seen (the frontier tests the budget first), but the pages
that carried them are done: a rerun with a larger budget would never find them again. So the
scheduler reports each cut (the ``url_over_budget`` signal) and this extension keeps it where
the crawl keeps its state:

* with a crawl database (``CRAWLDB_PATH`` / ``RECRAWL_INTERVAL``): as a URL never fetched and
  due now, so the next run over that database hands it to the frontier with the due pages;
* else with ``JOBDIR``: in ``JOBDIR/over-budget.sqlite``, whose URLs a resumed run queues
  again when it opens (a cut that still does not fit is remembered again; one that was fetched
  meanwhile is refused as seen and forgotten);
* else nowhere: a crawl without state starts from its seeds again anyway.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler

from crawler import signals as crawler_signals
from crawler.frontier import normalize_url

logger = logging.getLogger(__name__)

FILENAME = "over-budget.sqlite"
_COMMIT_EVERY = 500  # cuts between two commits of the JOBDIR file


class BudgetCuts:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        jobdir = crawler.settings.get("JOBDIR")
        self.path: Path | None = Path(jobdir) / FILENAME if jobdir else None
        self.db: Any = None  # the crawl database, once it is open
        self._file: sqlite3.Connection | None = None
        self._pending = 0
        self._closed = False
        connect = crawler.signals.connect
        connect(self.crawldb_opened, crawler_signals.crawldb_opened)
        connect(self.url_over_budget, crawler_signals.url_over_budget)
        connect(self.spider_opened, signals.spider_opened)
        connect(self.spider_closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BudgetCuts:
        return cls(crawler)

    def crawldb_opened(self, db: Any) -> None:
        self.db = db

    def _open_file(self) -> sqlite3.Connection:
        if self._file is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = sqlite3.connect(self.path)
            self._file.execute(
                "CREATE TABLE IF NOT EXISTS cut (url TEXT PRIMARY KEY, depth INTEGER NOT NULL)"
            )
        return self._file

    def spider_opened(self, spider: Spider) -> None:
        """A resumed JOBDIR crawl queues the URLs its earlier runs cut off; the frontier admits
        the ones the budget now allows."""
        if self.path is None or not self.path.exists():
            return
        conn = self._open_file()
        rows = conn.execute("SELECT url, depth FROM cut").fetchall()
        conn.execute("DELETE FROM cut")
        conn.commit()
        if not rows:
            return
        engine = self.crawler.engine
        assert engine is not None
        logger.info("Queueing again %d URLs an earlier run cut off by a page budget", len(rows))
        self._inc("budget/requeued", len(rows))
        for url, depth in rows:
            try:
                request = Request(url, meta={"depth": depth})
            except ValueError:
                continue
            engine.crawl(request)

    def url_over_budget(self, url: str, depth: int) -> None:
        if self._closed:
            return
        if self.db is not None:
            # the crawl database's key (the canonical form); the URL as it will be requested
            key = normalize_url(url)[0]
            if self.db.add_unfetched([(key, depth, None if key == url else url)], time.time()):
                self._inc("budget/remembered")
            return
        if self.path is None:
            return
        conn = self._open_file()
        if conn.execute("INSERT OR IGNORE INTO cut VALUES (?, ?)", (url, depth)).rowcount:
            self._inc("budget/remembered")
        self._pending += 1
        if self._pending >= _COMMIT_EVERY:
            conn.commit()
            self._pending = 0

    def spider_closed(self, spider: Spider, reason: str) -> None:
        self._closed = True
        if self._file is not None:
            self._file.commit()
            self._file.close()
            self._file = None
        remembered = self._stat("budget/remembered")
        if remembered:
            where = "the crawl database" if self.db is not None else str(self.path)
            logger.info(
                "%d URLs were cut off by a page budget (max_pages_per_host); kept in %s, a "
                "rerun with a larger budget fetches them",
                remembered,
                where,
            )

    def _inc(self, key: str, n: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, n)

    def _stat(self, key: str) -> int:
        return self.crawler.stats.get_value(key, 0) if self.crawler.stats is not None else 0

