"""Python's garbage collector, paced so that no full collection walks the whole heap mid-crawl.

CPython collects its oldest generation when enough objects have survived into it, and such a
collection walks every tracked object of the process with the GIL held: the ~115,000 objects
the crawl's imports leave behind, and whatever state the crawl has built (frontier, detector).
``bench/realcrawl.py`` found these full collections to be the longest reactor stalls left:
20-40 per crawl of 3,400 pages, 100-600 ms each, on whichever thread happened to allocate.

Here, every :data:`FREEZE_INTERVAL` seconds the young generations are collected (cyclic garbage
that died young is freed; a few milliseconds) and everything that is left is frozen
(``gc.freeze()``): a later automatic full collection walks only what was created since. The
price is that an object frozen while alive and later part of unreachable cycles is not freed
until everything is unfrozen and collected once, every :data:`FULL_INTERVAL` seconds (a pause of
the old length, that often) and when the spider closes. Objects freed by reference counting,
nearly all of a crawl's garbage, are freed at once as ever.

Python's own full collections are switched off while the pacer runs (the oldest generation's
threshold set out of reach, restored when the spider closes): with everything older than a
second frozen they walk only the last second's survivors, but after a big page that is still
tens of thousands of objects, 25-55 ms with the GIL held (``bench/realcrawl.py --spy``, 5 of
the 10 stalls over 20 ms left in one crawl). Those survivors are frozen at the next tick
instead; cycles among them wait for the next paced full collection like any frozen cycle.

Stats: ``gc/full_collections`` and ``gc/full_max_ms`` (the longest of those pauses).
"""

from __future__ import annotations

import gc
from time import monotonic, perf_counter
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.utils.asyncio import create_looping_call

__all__ = ["GcPacer"]

#: Seconds between two young collections each followed by ``gc.freeze()``: once a second keeps
#: a freeze's own pause to milliseconds (bench/realcrawl.py). Remove the extension from
#: ``EXTENSIONS`` to leave Python's collector as it comes.
FREEZE_INTERVAL = 1.0
#: Seconds between two full collections of everything unfrozen (one pause of the old length,
#: that often), freeing cycles among objects that were alive at a freeze.
FULL_INTERVAL = 300.0
# the oldest generation's threshold while paced: it counts collections of the middle one (~10
# a second), so this is never reached
_OUT_OF_REACH = 1 << 30



class GcPacer:
    """See the module docstring."""

    def __init__(self, crawler: Crawler, interval: float, full_interval: float) -> None:
        self.crawler = crawler
        self.interval = interval
        self.full_interval = full_interval
        self.fulls = 0
        self.full_max = 0.0
        self.frozen = self.freed = 0  # at the last full collection: objects frozen, and freed
        self._last_full = 0.0
        self._task: Any = None
        self._thresholds: tuple[int, int, int] | None = None  # Python's, while switched off

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GcPacer:
        ext = cls(crawler, FREEZE_INTERVAL, FULL_INTERVAL)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        self._last_full = monotonic()
        self.pause_full_collections()
        self._task = create_looping_call(self.tick)
        self._task.start(self.interval, now=True)

    def pause_full_collections(self) -> None:
        """No automatic collection of the oldest generation until :meth:`resume`."""
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            young, middle, _ = self._thresholds
            gc.set_threshold(young, middle, _OUT_OF_REACH)

    def resume(self) -> None:
        """Python's collector thresholds as they were."""
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None

    def tick(self) -> None:
        if self.full_interval > 0 and monotonic() - self._last_full >= self.full_interval:
            self.full()
        gc.collect(1)
        gc.freeze()

    def full(self, counted: bool = True) -> None:
        """Unfreeze and collect everything (the cycles among once-frozen objects)."""
        start = perf_counter()
        self.frozen = gc.get_freeze_count()
        gc.unfreeze()
        self.freed = gc.collect()
        if counted:
            self.full_max = max(self.full_max, perf_counter() - start)
            self.fulls += 1
        self._last_full = monotonic()

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        self.full(counted=False)  # nothing left frozen: the process may run another crawl
        self.resume()
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value("gc/full_collections", self.fulls)
            stats.set_value("gc/full_max_ms", round(self.full_max * 1000, 1))
            # what waited for the last collection: how much of it was garbage
            stats.set_value("gc/frozen_at_close", self.frozen)
            stats.set_value("gc/freed_at_close", self.freed)
