"""Item pipeline: write pages into the full-text index (a thin adapter over crawler.index).

What an item does to the index:

* ``2xx``: its document is replaced (title, main text or else visible text) and its outlinks'
  anchor texts are credited to their targets. A page flagged by the near-duplicate pipeline
  (``duplicate_of``) becomes an alias of its original instead, with no document and no outlinks
  of its own (a mirror's links would only repeat the original's), unless
  ``NEARDUP_INDEX_DUPLICATES``. A ``noindex`` page keeps its outlinks but has no document;
  so does a page whose usage preferences refuse search (``usage_denied``).
  When the request was redirected, the requested URL becomes an alias of the final URL. A page
  naming another URL of its site as canonical (``canonical``, ``crawler.content.canonical``)
  becomes an alias of that URL (a loop of pages naming each other leaves one document).
* ``304``: the document stays as it is; the visit is recorded.
* ``404``/``410``: the document is dropped (links to the URL still count).
* anything else (5xx, an unfollowed 3xx): the visit is recorded, the document kept.

Writes are grouped: a transaction is committed every :data:`BATCH_SIZE` items, every
:data:`COMMIT_INTERVAL` seconds while the crawl runs (so ``scrapy search`` sees a slow crawl's
pages), and at close. A crawl killed mid-way loses the open batch, never the index's
consistency.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.reactor import is_asyncio_reactor_installed, is_reactor_installed

from crawler.backends.registry import backend_class, open_index
from crawler.backends.sqlite.index import default_index_path
from crawler.config import defaults
from crawler.content.canonical import CanonicalChains
from crawler.content.config import NeardupConfig
from crawler.index import Index, PageDocument
from crawler.index.config import IndexConfig
from crawler.offload.components import ContentWorker, index_worker
from crawler.robots.usage import SEARCH

__all__ = ["IndexPipeline"]

logger = logging.getLogger(__name__)

_GONE = frozenset({404, 410})
BATCH_SIZE = 200  # items per index transaction (bench/index.py)
COMMIT_INTERVAL = 5.0  # seconds at most between commits, so a slow crawl is searchable


class IndexPipeline:
    def __init__(
        self,
        crawler: Crawler,
        batch_size: int = BATCH_SIZE,
        commit_interval: float = COMMIT_INTERVAL,
        index_duplicates: bool = defaults.NEARDUP_INDEX_DUPLICATES,
    ) -> None:
        self.crawler = crawler
        self.batch_size = max(1, batch_size)
        self.commit_interval = commit_interval
        self.index_duplicates = index_duplicates
        self.index: Index | None = None
        self._pending = 0
        self._last_commit = time.monotonic()
        self._timer: Any = None
        self._worker: ContentWorker | None = None
        self._canonicals = CanonicalChains()  # canonical loops and chains seen this crawl

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexPipeline:
        s = crawler.settings
        if not IndexConfig.from_settings(s).enabled:
            raise NotConfigured("INDEX_ENABLED is off")
        return cls(
            crawler,
            index_duplicates=NeardupConfig.from_settings(s).index_duplicates,
        )

    # --- Scrapy hooks -----------------------------------------------------------------------

    def open_spider(self) -> Any:
        """Open the index; on the index writer's thread
        (:func:`crawler.offload.components.index_worker`,
        by default the content thread) when the backend allows it (``runs_in_thread``), and
        then every write goes there too, so a page of thousands of links or a long text does
        not hold up the reactor. Returns ``None``, or a coroutine to await."""
        cls = backend_class(self.crawler.settings, "index")
        self._worker = index_worker(self.crawler) if getattr(cls, "runs_in_thread", False) else None
        if self._worker is not None:
            return self._open_offloaded(self._worker)
        self._open()
        return None

    async def _open_offloaded(self, worker: ContentWorker) -> None:
        await maybe_deferred_to_future(worker.run(self._open))

    def _open(self) -> None:
        self.index = open_index(self.crawler.settings)
        logger.info("Indexing into %s", getattr(self.index, "path", None)
                    or default_index_path(self.crawler.settings))
        if self.commit_interval > 0:
            self._start_timer()

    def close_spider(self) -> Any:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        if self._worker is not None:
            return maybe_deferred_to_future(self._worker.run(self._close))
        self._close()
        return None

    def _close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None

    def process_item(self, item: Any) -> Any:
        if self._worker is not None:
            return self._process_offloaded(item, self._worker)
        return self._process(item)

    async def _process_offloaded(self, item: Any, worker: ContentWorker) -> Any:
        # One thread, items in the order they come: the batch and its commit stay consistent.
        return await maybe_deferred_to_future(worker.run(self._process, item))

    def _process(self, item: Any) -> Any:
        if self.index is None:
            self.open_spider()
        assert self.index is not None
        adapter = ItemAdapter(item)
        requested = adapter.get("url")
        url = adapter.get("final_url") or requested
        if not url:
            return item
        try:
            self._write(adapter, url, requested)
        except Exception:
            # Never leave half an item in the open transaction: the batch goes, loudly.
            logger.exception(
                "Index write failed for %s; rolling back the %d pages of this batch",
                url,
                self._pending,
            )
            self.index.rollback()
            stats = self.crawler.stats
            if stats is not None:
                stats.inc_value("index/write_errors")
                stats.inc_value("index/rolled_back", self._pending)
            self._pending = 0
            return item
        self._pending += 1
        if self._pending >= self.batch_size:
            self.commit()
        return item

    # --- the mapping from items to index operations -----------------------------------------

    def _write(self, adapter: ItemAdapter, url: str, requested: str | None) -> None:
        index = self.index
        assert index is not None
        status = adapter.get("status")
        status = int(status) if status is not None else None
        fetched_at = adapter.get("fetched_at")
        site = adapter.get("site") or ""
        if status == 304:
            index.record_visit(url, fetched_at, status)
            self._stat("index/not_modified")
            return
        if status in _GONE:
            index.remove_page(url, status=status, fetched_at=fetched_at)
            self._stat("index/gone")
            return
        if status is not None and not 200 <= status < 300:
            index.record_visit(url, fetched_at, status)
            self._stat("index/visit_only")
            return
        outlinks = [
            (link.get("url", ""), link.get("text", ""))
            for link in adapter.get("outlinks") or ()
            if isinstance(link, dict)
        ]
        duplicate_of = adapter.get("duplicate_of")
        canonical = self._canonical_target(url, adapter.get("canonical"))
        if adapter.get("soft_404"):  # a "not found" page served with 200
            index.remove_page(url, status=status, fetched_at=fetched_at)
            self._stat("index/soft404")
        elif adapter.get("noindex") or SEARCH in (adapter.get("usage_denied") or ()):
            # noindex, or usage preferences refusing search (crawler.robots.usage)
            index.remove_page(url, status=status, fetched_at=fetched_at)
            index.set_links(url, outlinks, site)
            self._stat("index/noindex" if adapter.get("noindex") else "index/usage_denied")
        elif canonical:
            index.add_alias(url, canonical, site=site, status=status, fetched_at=fetched_at)
            self._stat("index/canonical_aliases")
        elif duplicate_of and not self.index_duplicates:
            index.add_alias(url, duplicate_of, site=site, status=status, fetched_at=fetched_at)
            self._stat("index/aliases")
        else:
            text = adapter.get("main_text")
            if text is None:
                text = adapter.get("text") or ""
            index.add_page(
                PageDocument(
                    url=url,
                    site=site,
                    title=adapter.get("title") or "",
                    text=text,
                    status=status,
                    fetched_at=fetched_at,
                    fingerprint=adapter.get("content_fingerprint"),
                    outlinks=outlinks,
                )
            )
            self._stat("index/documents")
        if requested and requested != url:
            index.add_alias(requested, url, site=site, status=status, fetched_at=fetched_at)

    def _canonical_target(self, url: str, canonical: str | None) -> str | None:
        """The URL to make this page an alias of, for the canonical URL it names; None when it
        names none, or when the names loop back to it (it stays a document)."""
        if not canonical or canonical == url:
            return None
        target, how = self._canonicals.target(url, canonical)
        if how != "alias":
            self._stat(f"index/canonical_{how}")
        if target is None:
            logger.info("Canonical loop: %s names %s, which leads back to it; indexed as itself",
                        url, canonical)
        return target

    # --- batching ---------------------------------------------------------------------------

    def commit(self) -> None:
        if self.index is not None and self._pending:
            self.index.commit()
            self._stat("index/commits")
        self._pending = 0
        self._last_commit = time.monotonic()

    def _tick(self) -> None:
        if self._worker is not None:
            self._worker.run(self._commit_if_due).addErrback(
                lambda failure: logger.error("Index commit failed: %s", failure.value)
            )
            return
        self._commit_if_due()

    def _commit_if_due(self) -> None:
        if self._pending and time.monotonic() - self._last_commit >= self.commit_interval:
            self.commit()

    def _start_timer(self) -> None:
        """Commit a slow crawl's pages every few seconds, from the crawl's own event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # No running asyncio loop: outside a crawl (tests, scripts), unless the crawl runs
            # on a non-asyncio Twisted reactor, which LoopingCall serves.
            if not is_reactor_installed() or is_asyncio_reactor_installed():
                return
        self._timer = create_looping_call(self._tick)
        self._timer.start(self.commit_interval, now=False)

    def _stat(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)
