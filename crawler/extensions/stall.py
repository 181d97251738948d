"""How long the reactor was kept from its timers: the longest stall of a crawl, as stats.

Everything a crawl does on the reactor thread (parsing a page, main text, near-duplicates, index
and crawl-database writes) runs between two timer callbacks; while it runs, hosts that came due
wait, and politeness efficiency drops ("5 ready, 1 in flight" in the progress line). A timer asked
for every :data:`INTERVAL` seconds fires late by exactly the time the reactor spent
elsewhere, so its lateness is the stall.

Stats at close: ``reactor/stall_max_ms`` (the longest), ``reactor/stall_p99_ms``,
``reactor/stalls_over_20ms`` and ``reactor/stalls_over_100ms`` (how many),
``reactor/stall_samples`` and ``reactor/stall_worst`` (the five longest, with the seconds since
the spider opened, and the CPU time the crawl process used meanwhile).

A stall is either the crawl's own work (the process on a CPU all along) or the machine's: on a
loaded machine the kernel leaves the whole process off the CPU for a while, which no code of the
crawl can shorten. ``reactor/stall_max_busy_ms`` is the longest stall during which the process
used at least half of its length in CPU time (all its threads), i.e. the longest the crawl kept
its own reactor waiting; ``reactor/stalls_busy_over_20ms`` counts those over 20 ms.

Costs one timer callback and one ``getrusage`` per interval (~100 per second at the default, a
few microseconds each). Works the same under stock Scrapy (``bench/realcrawl.py`` adds it to a
stock crawl through ``EXTENSIONS``).
"""

from __future__ import annotations

import resource
from time import perf_counter
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler

__all__ = ["ReactorStallMonitor"]

#: Seconds between the probe's timers. 10 ms resolves the 20 ms stalls that matter for
#: politeness; a tuning constant, not a setting (remove the extension from ``EXTENSIONS`` to
#: turn the probe off).
INTERVAL = 0.01
_BUCKET_MS = 1  # histogram resolution
_WORST = 5  # the longest stalls kept, with when they happened


class ReactorStallMonitor:
    """Re-arms a ``callLater(interval)`` and records how late each one fires."""

    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.interval = interval
        self.max_ms = 0.0
        self.samples = 0
        self.histogram: dict[int, int] = {}  # lateness in whole ms -> count
        self.worst: list[tuple[float, float, float]] = []  # the longest: (ms, seconds in, CPU ms)
        self.busy_max_ms = 0.0
        self.busy_over_20 = 0
        self._start = 0.0
        self._due = 0.0
        self._cpu = 0.0
        self._call: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReactorStallMonitor:
        ext = cls(crawler, INTERVAL)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        self._start = perf_counter()
        self._cpu = _process_cpu()
        self._arm()

    def _arm(self) -> None:
        from twisted.internet import reactor  # here: a module-level import installs the default

        self._due = perf_counter() + self.interval
        self._call = reactor.callLater(self.interval, self._fired)  # type: ignore[attr-defined]

    def _fired(self) -> None:
        late_ms = max(0.0, (perf_counter() - self._due) * 1000.0)
        cpu = _process_cpu()
        cpu_ms, self._cpu = (cpu - self._cpu) * 1000.0, cpu  # since the timer was armed
        self.samples += 1
        if late_ms > self.max_ms:
            self.max_ms = late_ms
        if cpu_ms >= late_ms / 2:
            self.busy_max_ms = max(self.busy_max_ms, late_ms)
            self.busy_over_20 += late_ms >= 20.0
        if late_ms >= 20.0:
            self.worst.append(
                (round(late_ms, 1), round(self._due - self._start, 2), round(cpu_ms))
            )
            if len(self.worst) > 2 * _WORST:
                self.worst = sorted(self.worst, reverse=True)[:_WORST]
        bucket = int(late_ms) // _BUCKET_MS
        self.histogram[bucket] = self.histogram.get(bucket, 0) + 1
        self._arm()

    def percentile(self, share: float) -> float:
        """The lateness (ms, to the bucket) that ``share`` of the samples do not exceed."""
        if not self.samples:
            return 0.0
        need = share * self.samples
        seen = 0
        for bucket in sorted(self.histogram):
            seen += self.histogram[bucket]
            if seen >= need:
                return float((bucket + 1) * _BUCKET_MS)
        return self.max_ms

    def over(self, ms: float) -> int:
        return sum(n for b, n in self.histogram.items() if b * _BUCKET_MS >= ms)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        stats = self.crawler.stats
        if stats is None:
            return
        stats.set_value("reactor/stall_max_ms", round(self.max_ms, 1))
        stats.set_value("reactor/stall_p99_ms", self.percentile(0.99))
        stats.set_value("reactor/stalls_over_20ms", self.over(20))
        stats.set_value("reactor/stalls_over_100ms", self.over(100))
        stats.set_value("reactor/stall_samples", self.samples)
        stats.set_value("reactor/stall_max_busy_ms", round(self.busy_max_ms, 1))
        stats.set_value("reactor/stalls_busy_over_20ms", self.busy_over_20)
        # when they happened tells start-up (imports, opening stores) from crawling
        stats.set_value(
            "reactor/stall_worst",
            [f"{ms} ms at {at} s (CPU {cpu} ms)"
             for ms, at, cpu in sorted(self.worst, reverse=True)[:_WORST]],
        )


def _process_cpu() -> float:
    """User + system seconds of every thread of this process (children not included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
