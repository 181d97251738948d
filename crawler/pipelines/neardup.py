"""Item pipeline: flag exact and near-duplicate pages (a thin adapter over the detector).

For every page item with content it sets ``content_fingerprint`` (of the normalized main text),
and for a duplicate ``duplicate_of`` (the original's URL) and ``similarity`` (estimated Jaccard,
1.0 for an exact duplicate). The item still goes on to the feed exports; the index pipeline
turns a duplicate into an alias of its original instead of a document (unless
``NEARDUP_INDEX_DUPLICATES``).

The text compared is the item's ``main_text`` (boilerplate removed by the spider with
:func:`crawler.content.maintext.main_text`); an item without one falls back to ``text``, the
whole visible text, which makes different pages of a template-heavy site look alike
(``bench/neardup.py`` section 3 shows how much).

Settings (class attributes are the defaults until they are in ``crawler/settings.py``):
``NEARDUP_ENABLED``, ``NEARDUP_SHINGLE_SIZE``, ``NEARDUP_NUM_PERM``, ``NEARDUP_THRESHOLD``,
``NEARDUP_INDEX_DUPLICATES`` (read by the index pipeline), ``NEARDUP_HOST_MIN_PAGES``,
``NEARDUP_LINK_DEMOTION`` (a duplicate page's links go that many levels deeper). With
``JOBDIR`` set, the detector's records (originals with their sketches, duplicates, template
blocks) are appended to ``JOBDIR/neardup.journal`` (msgpack) at most every
``NEARDUP_JOURNAL_INTERVAL`` seconds and at close, and replayed at open: a resumed crawl still
knows its originals, and a ``kill -9`` loses only the last interval's pages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import msgpack
from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from crawler import signals as crawler_signals
from crawler.backends.registry import build_backend
from crawler.config import defaults
from crawler.content.neardup import Decision, NearDuplicateDetector
from crawler.offload.components import ContentWorker, content_worker

__all__ = ["NearDuplicatePipeline"]

logger = logging.getLogger(__name__)

STATE_FILE = "neardup.journal"


class NearDuplicatePipeline:
    # A host whose checked pages are at least this share duplicates loses 1 front queue of
    # priority, at least the second share 2 (see host_penalty).
    PENALTY_STEPS: ClassVar[tuple[float, ...]] = (0.5, 0.8)

    def __init__(
        self,
        detector: NearDuplicateDetector,
        crawler: Crawler | None = None,
        host_min_pages: int = defaults.NEARDUP_HOST_MIN_PAGES,
        state_path: Path | None = None,
        journal_interval: float = defaults.NEARDUP_JOURNAL_INTERVAL,
    ) -> None:
        self.detector = detector
        self.crawler = crawler
        self.host_min_pages = host_min_pages
        self.state_path = state_path
        self.journal_interval = journal_interval
        self._last_write = time.monotonic()
        self.link_demotion = 0  # set from NEARDUP_LINK_DEMOTION by from_crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDuplicatePipeline:
        s = crawler.settings
        if not s.getbool("NEARDUP_ENABLED", defaults.NEARDUP_ENABLED):
            raise NotConfigured("NEARDUP_ENABLED is off")
        detector = build_backend(crawler, "NEARDUP_STORE_CLASS")
        jobdir = s.get("JOBDIR")
        pipeline = cls(
            detector,
            crawler,
            host_min_pages=s.getint("NEARDUP_HOST_MIN_PAGES", defaults.NEARDUP_HOST_MIN_PAGES),
            state_path=Path(jobdir) / STATE_FILE if jobdir else None,
            journal_interval=s.getfloat(
                "NEARDUP_JOURNAL_INTERVAL", defaults.NEARDUP_JOURNAL_INTERVAL
            ),
        )
        crawler.signals.connect(pipeline._host_penalty_wanted, crawler_signals.host_penalty_wanted)
        pipeline.link_demotion = s.getint("NEARDUP_LINK_DEMOTION", defaults.NEARDUP_LINK_DEMOTION)
        if pipeline.link_demotion:
            crawler.signals.connect(
                pipeline._link_demotion_wanted, crawler_signals.link_demotion_wanted
            )
        return pipeline

    def _link_demotion_wanted(self, item: Any) -> int:
        """The spider asks before it queues the page's links: the item is judged now (its
        verdict stays on it; ``process_item`` does not judge it again), and a duplicate's links
        go ``NEARDUP_LINK_DEMOTION`` levels deeper."""
        decision = self._judge(ItemAdapter(item))
        if decision is None or decision.duplicate_of is None:
            return 0
        self._stat("neardup/links_demoted_pages")
        return self.link_demotion

    def _host_penalty_wanted(self) -> Callable[[str], int]:
        """The frontier's prioritizer asks how much to push a host down (``host_penalty``)."""
        return self.host_penalty

    # --- Scrapy hooks -----------------------------------------------------------------------

    def open_spider(self) -> None:
        if self.state_path is None or not self.state_path.exists():
            return
        drain = getattr(self.detector, "drain", None)
        if drain is None:
            return  # a shared store (Redis) keeps its own state
        try:
            with self.state_path.open("rb") as f:
                unpacker = msgpack.Unpacker(f, raw=False, use_list=False)
                header = next(unpacker, None)
                if header is None or tuple(header[1]) != tuple(self.detector.params):
                    logger.warning(
                        "Near-duplicate journal %s was made with other NEARDUP_* settings; "
                        "starting afresh", self.state_path,
                    )
                    self.state_path.unlink()
                    return
                good = [unpacker.tell()]
                applied = self.detector.replay(_complete(unpacker, good))
            size = self.state_path.stat().st_size
            if good[0] < size:  # a record cut short by a kill: cut it off before appending
                logger.warning("Near-duplicate journal %s ends with %d bytes of a partial "
                               "record (a kill?); dropped", self.state_path, size - good[0])
                with self.state_path.open("r+b") as f:
                    f.truncate(good[0])
        except (OSError, ValueError, msgpack.UnpackException) as exc:
            logger.warning("Ignoring unreadable near-duplicate journal %s: %s",
                           self.state_path, exc)
            return
        drain()  # what replay recorded is on disk already
        logger.info(
            "Near-duplicate journal loaded from %s: %d records, %d URLs, %d originals",
            self.state_path, applied, len(self.detector), self.detector.originals,
        )

    def close_spider(self) -> None:
        self._write_journal()

    def _write_journal(self) -> None:
        """Append what the detector recorded since the last write (one ``write`` call)."""
        self._last_write = time.monotonic()
        drain = getattr(self.detector, "drain", None)
        if self.state_path is None or drain is None:
            return
        records = drain()
        if not records:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        packer = msgpack.Packer(use_bin_type=True)
        new = not self.state_path.exists()
        chunk = b"".join(packer.pack(r) for r in records)
        if new:
            chunk = packer.pack(("params", list(self.detector.params))) + chunk
        with self.state_path.open("ab") as f:
            f.write(chunk)

    def process_item(self, item: Any) -> Any:
        """Check ``item``; on the crawl's content thread (:mod:`crawler.offload.components`) when
        the
        detector says it may run there (``runs_in_thread``), so a long main text does not hold
        up the reactor. Returns the item, or a coroutine that returns it. An item the spider
        already had judged (``link_demotion_wanted``, on that same thread) is passed on."""
        if ItemAdapter(item).get("content_fingerprint") is not None:
            return item
        if getattr(self.detector, "runs_in_thread", False):
            worker = content_worker(self.crawler)
            if worker is not None:
                return self._process_offloaded(item, worker)
        return self._process(item)

    async def _process_offloaded(self, item: Any, worker: ContentWorker) -> Any:
        # One worker thread: checks run one at a time, in the order items arrive, and the
        # journal is drained between two of them.
        await maybe_deferred_to_future(worker.run(self._process, item))
        return item

    def _process(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        if adapter.get("content_fingerprint") is None:  # else judged when the spider asked
            self._judge(adapter)
        return item

    def _judge(self, adapter: ItemAdapter) -> Decision | None:
        """Judge a page item and set its verdict fields; None for an item without content."""
        status = adapter.get("status")
        if status is not None and not 200 <= int(status) < 300:
            return None  # a 304 keeps what was decided before; errors have no content
        url = adapter.get("final_url") or adapter.get("url")
        if not url:
            return None
        text = adapter.get("main_text")
        if text is None:
            text = adapter.get("text") or ""
        # A noindex page is compared but never becomes an original: its content will not be
        # in the index, so it must not be what indexable copies are aliased to.
        decision = self.detector.check(
            url, text, add=not adapter.get("noindex"), title=adapter.get("title") or None
        )
        _set(adapter, "content_fingerprint", decision.fingerprint)
        if decision.duplicate_of is not None:
            _set(adapter, "duplicate_of", decision.duplicate_of)
            _set(adapter, "similarity", decision.similarity)
        self._stat(f"neardup/{decision.kind}")
        if time.monotonic() - self._last_write >= self.journal_interval:
            self._write_journal()
        return decision

    # --- the frontier's view ----------------------------------------------------------------

    def host_duplicate_ratio(self, host: str) -> float:
        """Share of ``host``'s fetched pages that were duplicates (0 below the minimum count)."""
        return self.detector.host_duplicate_ratio(host, self.host_min_pages)

    def host_penalty(self, host: str) -> int:
        """How many front queues to push ``host``'s URLs down: 0, 1 or 2 (mostly duplicates)."""
        ratio = self.host_duplicate_ratio(host)
        return sum(ratio >= step for step in self.PENALTY_STEPS)

    def _stat(self, key: str) -> None:
        if self.crawler is not None and self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)


def _complete(unpacker: msgpack.Unpacker, good: list[int]) -> Iterator[Any]:
    """The journal's complete records; ``good[0]`` follows the end of the last one."""
    try:
        for record in unpacker:
            yield record
            good[0] = unpacker.tell()
    except (ValueError, msgpack.UnpackException):
        return


def _set(adapter: ItemAdapter, field: str, value: Any) -> None:
    """Set ``field`` if the item type declares it (a plain dict always does)."""
    if isinstance(adapter.item, dict) or field in adapter.field_names():
        adapter[field] = value
