"""The crawl database in a Scrapy crawl: recording fetches, recrawling what is due, continuous mode.

Enabled when ``CRAWLDB_PATH`` is set, or ``RECRAWL_INTERVAL`` / ``RECRAWL_CONTINUOUS`` is (the
file then defaults to ``JOBDIR/crawldb.sqlite``, else ``crawldb-<site>.sqlite`` in the current
directory); otherwise a crawl behaves as if this extension did not exist.

* When the frontier opens, every URL the database knows is marked seen, and the ones that are
  due are scheduled once the spider's seeds are (``seeds_scheduled``), with their stored depth
  and a priority that grows with how often the page changed. So running
  ``scrapy crawl <site>`` again over a finished crawl fetches only what is due, plus anything
  new that the due pages link to.
* This extension is the one writer of the crawl database: every page item that leaves the
  pipelines is recorded (validators, the fingerprint the site spider put in
  ``response.meta[PAGE_FINGERPRINT_META]``, outlinks, and the redirects that led to it), and so is
  every response that makes no item (404, 5xx, unfollowed redirects). Each record reschedules
  the page (:class:`crawler.crawldb.AdaptiveSchedule`). Other components get the database from
  the ``crawldb_opened`` signal.
* ``RECRAWL_CONTINUOUS``: the crawl does not end when the frontier runs dry; pages are handed to
  the engine as they come due, until the crawl is stopped (Ctrl-C, ``CLOSESPIDER_TIMEOUT``...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from itemadapter import ItemAdapter
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.http import Response
from scrapy.utils.asyncio import call_later, create_looping_call

from crawler import signals as crawler_signals
from crawler.backends.registry import build_backend
from crawler.crawldb import (
    CrawlDb,
    DueUrl,
    Outlink,
    PageRecord,
    RecordResult,
    Visit,
    crawldb_enabled,
)
from crawler.crawldb.config import RecrawlConfig
from crawler.frontier import InvalidUrl, normalize_url
from crawler.items import PAGE_FINGERPRINT_META
from crawler.meta import REQUISITE_META, ROBOTS_META
from crawler.net.freshness import NO_HINT, Freshness, freshness_of

logger = logging.getLogger(__name__)


def db_key(url: str) -> str | None:
    """The crawl database's key of a URL: the frontier's normalized form."""
    try:
        return normalize_url(url)[0]
    except InvalidUrl:
        return None


#: Seconds a due URL handed to the crawl is not handed out again.
LEASE = 3600.0
BATCH = 1000  # due URLs taken from the crawl database at a time
COMMIT_INTERVAL = 5.0  # seconds between commits of the crawl database while the crawl runs


class RecrawlExtension:
    def __init__(self, crawler: Crawler, db: CrawlDb, path: str = "") -> None:
        self.crawler = crawler
        self.db = db
        self.path = path
        self.continuous = RecrawlConfig.from_settings(crawler.settings).continuous
        self.lease = LEASE
        self.batch = BATCH
        self.commit_interval = COMMIT_INTERVAL
        self.clock = time.time
        self._due: list[DueUrl] = []
        self._due_seeds: set[str] = set()  # keys of due URLs that came as seeds in bulk
        self._due_key_set: set[str] | None = None
        self._open = True
        self._closing = False
        self._timer: Any = None
        self._timer_at: float | None = None
        self._committer: Any = None
        crawler.signals.connect(self._frontier_opened, crawler_signals.frontier_opened)
        crawler.signals.connect(self._seeds_found, crawler_signals.seeds_found)
        crawler.signals.connect(self._seeds_scheduled, crawler_signals.seeds_scheduled)
        crawler.signals.connect(self._response_received, signals.response_received)
        crawler.signals.connect(self._item_done, signals.item_scraped)
        crawler.signals.connect(self._item_done, signals.item_dropped)
        crawler.signals.connect(self._spider_opened, signals.spider_opened)
        crawler.signals.connect(self._spider_idle, signals.spider_idle)
        crawler.signals.connect(self._spider_closed, signals.spider_closed)
        crawler.signals.connect(self._engine_stopped, signals.engine_stopped)
        crawler.signals.connect(self.remember_unfetched, crawler_signals.requests_unfetched)
        crawler.signals.connect(self._page_unchanged, crawler_signals.page_unchanged)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlExtension:
        if not crawldb_enabled(crawler.settings):
            raise NotConfigured  # no message: Scrapy would log a warning on every crawl
        db = build_backend(crawler, "crawldb")
        return cls(crawler, db, getattr(db, "path", ""))

    # -- start of a crawl -----------------------------------------------------------------------

    def _frontier_opened(self, frontier: Any, spider: Spider) -> None:
        """Known URLs that are not due are seen; the due ones wait for the spider's start(),
        as plain links (so the frontier keeps them as compactly as any discovered link)."""
        now = self.clock()
        if self.continuous:
            self._due = self.db.claim_due(now, self.lease, 10**9)
        else:
            self._due = self.db.due(now)
        due = {d.url for d in self._due}
        self._set("crawldb/known_at_start", len(self.db))
        self._set("crawldb/due_at_start", len(due))
        urls = (u for u in self.db.urls() if u not in due)
        later = getattr(frontier, "mark_seen_later", None)
        if later is None:
            self._marked(len(self.db), len(due), frontier.mark_seen(urls))
            return
        # a shared frontier: queued before any URL of this worker, answered on its thread
        # (the reactor never waits for Redis); the database is read here, on this one
        from twisted.internet import reactor

        known, count = list(urls), len(self.db)
        later(known, lambda new: reactor.callFromThread(self._marked, count, len(due), new))

    def _marked(self, known: int, due: int, new: int) -> None:
        if known:
            logger.info(
                "Crawl database %s: %d URLs known, %d due for refetch (%d marked seen)",
                self.path,
                known,
                due,
                new,
            )

    def _seeds_found(self, spider: Spider, seeds: list[tuple[str, str]]) -> None:
        """A batch of seeds in bulk: remember which of them are due (they keep their seed flag)
        as the batches stream, so no worker keeps a list of millions of seeds for it."""
        if not self._due:
            return
        due_keys = self._due_keys()
        self._due_seeds.update(k for k in (db_key(u) for u, _ in seeds) if k in due_keys)

    def _due_keys(self) -> set[str]:
        if self._due_key_set is None:
            self._due_key_set = {k for k in (db_key(d.url) for d in self._due) if k}
        return self._due_key_set

    def _seeds_scheduled(self, spider: Spider, urls: list[str]) -> None:
        """The seeds are in: the due pages follow them (a seed-scoped site admits their hosts
        only once its seeds did)."""
        engine = self.crawler.engine
        if engine is None:
            return
        for request in self.due_requests(spider, urls):
            engine.crawl(request)

    def due_requests(self, spider: Spider, seeds: Iterable[str] = ()) -> Iterator[Request]:
        """The requests for the URLs that were due when the frontier opened (once). A due seed
        keeps its seed flag (its redirect target joins a seed-scoped site's scope)."""
        seed_keys = self._due_seeds | {k for k in (db_key(u) for u in seeds) if k}
        due, self._due = self._due, []
        self._due_seeds, self._due_key_set = set(), None
        for d in due:
            yield self._request(d, seed=d.url in seed_keys, force=False)

    def _request(self, due: DueUrl, *, seed: bool = False, force: bool = True) -> Request:
        """A refetch with the stored depth. ``force``: past the seen-test (URLs that came due
        while the crawl ran). Pages that changed before carry a priority (Scrapy's convention,
        higher first): the frontier uses it under FRONTIER_PRIORITY_POLICY = "request"; under
        the other policies the order of the due list (most changing first) carries it. Pages
        that never changed stay plain links, which the frontier keeps compactly."""
        meta: dict[str, Any] = {"depth": due.depth}
        if seed:
            meta["seed"] = True
        return Request(due.fetch_url, dont_filter=force, priority=due.priority, meta=meta)

    # -- recording ------------------------------------------------------------------------------

    def previous(self, url: str) -> PageRecord | None:
        key = db_key(url)
        return self.db.get(key) if key and self._open else None

    def validators(self, url: str) -> tuple[str | None, str | None]:
        """(ETag, Last-Modified) stored for ``url``."""
        key = db_key(url)
        return self.db.validators(key) if key and self._open else (None, None)

    def record(
        self,
        url: str,
        status: int,
        *,
        depth: int = 0,
        last_modified: str | None = None,
        etag: str | None = None,
        fingerprint: str | None = None,
        outlinks: list[Outlink] | None = None,
        hint: Freshness = NO_HINT,
    ) -> RecordResult | None:
        """``hint``: the answer's caching directives, for the schedule."""
        key = db_key(url)
        if key is None or not self._open:
            return None
        now = self.clock()
        visit = Visit(
            key,
            status,
            now,
            depth,
            last_modified,
            etag,
            fingerprint,
            outlinks,
            request_url=None if url == key else url,  # the URL requested, when not its key
            max_age=hint.lifetime,
            no_store=hint.no_store,
        )
        result = self.db.record(visit)
        self._inc("crawldb/recorded")
        if result.new:
            self._inc("crawldb/new")
        elif status == 304:
            self._inc("crawldb/not_modified")
        elif result.changed:
            self._inc("crawldb/changed")
        elif 200 <= status < 300 and fingerprint is not None:
            self._inc("crawldb/unchanged")
        if self.continuous:
            self._arm(result.record.next_fetch)
        return result

    def remember_unfetched(self, requests: Iterable[Request]) -> None:
        """Keep URLs the crawl could not fetch (robots.txt unreachable) as due, for next time,
        and say so (``requests_unfetched`` only notifies: nobody else knows they are kept)."""
        if not self._open:
            return
        pairs = [
            (k, r.meta.get("depth", 0), None if r.url == k else r.url)
            for r in requests
            if (k := db_key(r.url))
        ]
        added = self.db.add_unfetched(pairs, self.clock())
        self._inc("crawldb/remembered_unfetched", added)
        if pairs:
            logger.info(
                "%d URLs this crawl could not fetch are kept in the crawl database %s for the "
                "next crawl",
                len(pairs),
                self.path,
            )

    def _page_unchanged(self, request: Request) -> None:
        """A due page its sitemap says did not change since its last fetch was not asked: it
        is recorded as a ``304`` would be (not changed, back when due again)."""
        if self.record(request.url, 304, depth=request.meta.get("depth", 0)) is not None:
            self._inc("crawldb/sitemap_unchanged")

    def _response_received(self, response: Response, request: Request, spider: Spider) -> None:
        """Responses that make no page item (2xx and 304 are recorded with their item)."""
        status = response.status
        if 200 <= status < 300 or status == 304 or request.meta.get(ROBOTS_META):
            return
        if request.meta.get(REQUISITE_META):
            return  # a page requisite is no page of the crawl database
        self.record(response.url, status, depth=request.meta.get("depth", 0))

    def _item_done(self, item: Any, response: Response | None, spider: Spider, **_: Any) -> None:
        """A page item left the pipelines (scraped or dropped): record its fetch, and the
        redirects that led to it."""
        if response is None:
            return
        status = response.status
        if not (200 <= status < 300 or status == 304):
            return
        adapter = ItemAdapter(item)
        meta = response.meta
        depth = meta.get("depth", 0)
        reasons = meta.get("redirect_reasons") or []
        for i, source in enumerate(meta.get("redirect_urls") or ()):
            reason = reasons[i] if i < len(reasons) else None
            self.record(source, reason if isinstance(reason, int) else 301, depth=depth)
        outlinks = None
        if status != 304:
            outlinks = [(o["url"], o["text"]) for o in adapter.get("outlinks") or ()]
        self.record(
            response.url,
            status,
            depth=depth,
            last_modified=adapter.get("last_modified"),
            etag=adapter.get("etag"),
            fingerprint=meta.get(PAGE_FINGERPRINT_META),
            outlinks=outlinks,
            hint=freshness_of(response.headers, self.clock()),
        )

    # -- continuous mode ------------------------------------------------------------------------

    def _spider_opened(self, spider: Spider) -> None:
        self.crawler.signals.send_catch_log(crawler_signals.crawldb_opened, db=self.db)
        if self.commit_interval > 0:
            self._committer = create_looping_call(self.db.commit)
            self._committer.start(self.commit_interval, now=False)
        if self.continuous:
            self._arm(self.db.next_due())

    def _arm(self, when: float | None) -> None:
        if when is None or self._closing:
            return
        if self._timer is not None and self._timer_at is not None and self._timer_at <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = call_later(max(0.05, when - self.clock()), self._tick)

    def _tick(self) -> None:
        self._timer = self._timer_at = None
        engine = self.crawler.engine
        if self._closing or engine is None:
            return
        due = self.db.claim_due(self.clock(), self.lease, self.batch)
        for d in due:
            engine.crawl(self._request(d))
        if due:
            self._inc("crawldb/recrawl_scheduled", len(due))
            logger.debug("%d pages came due and were scheduled", len(due))
        self._arm(self.db.next_due())

    def _spider_idle(self, spider: Spider) -> None:
        if self.continuous and not self._closing:
            raise DontCloseSpider

    # -- end of a crawl -------------------------------------------------------------------------

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._committer is not None and self._committer.running:
            self._committer.stop()
        self.db.commit()
        self._set("crawldb/pages", len(self.db))

    def _engine_stopped(self) -> None:
        """Closed last: the robots.txt middleware may still hand over parked URLs at close."""
        if self._open:
            self._open = False
            self.db.close()

    def _inc(self, key: str, n: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, n)

    def _set(self, key: str, value: Any) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.set_value(key, value)
