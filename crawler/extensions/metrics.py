"""``/metrics`` of one worker, for Prometheus (``METRICS_PORT``; off by default).

The scrape is served by prometheus_client's WSGI server on its own thread
(:class:`crawler.metrics.exporter.MetricsServer`) and answers from a snapshot the reactor publishes
every ``metrics_interval`` seconds (a ``TUNING`` knob; a copy of the stats, the frontier's counts,
the stall probe's histogram, the writer queues): a scrape never runs on the reactor and never waits
for it. A shared (Redis) frontier already answers its counts from its own worker thread, so for it
the scrape thread asks it (at most once per interval) and the reactor does not.

Per fetch, on the reactor: the fetch's network time and body bytes by status class, and the
politeness delay the frontier applied after it, are counted (a bisect and a few additions,
:class:`crawler.metrics.families.LocalHistogram`) and written into the crawl's stats as
counters with each snapshot and at close. Being stats, they reach a fleet's merged totals with
the heartbeat, so ``scrapy frontier <site> --metrics-port`` serves them for the whole crawl.

Every series carries ``crawl`` (the crawl's key) and ``worker`` (this process) labels.
``TUNING``'s ``metrics_linger`` seconds: after the crawl ends, keep serving until a scraper has
read the final figures (or that long at most), so a short crawl's last figures are scraped.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object

from crawler import signals as crawler_signals
from crawler.backends.redis.keys import crawl_key
from crawler.extensions.stall import ReactorStallMonitor
from crawler.extensions.tally import CrawlTally
from crawler.frontier import Frontier, FrontierCounts, Outcome
from crawler.metrics.config import MetricsConfig
from crawler.report.tally import Tallied
from crawler.report.worker import worker_id

if TYPE_CHECKING:
    from prometheus_client.core import Metric

logger = logging.getLogger(__name__)

# Named as a setting names it (adapters do not import one another): its uncommitted pages.
_INDEX_PIPELINE = "crawler.pipelines.index.IndexPipeline"


@dataclass(slots=True)
class Snapshot:
    """What the reactor published at ``taken`` (``time.time()``)."""

    taken: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    counts: FrontierCounts | None = None
    stall: dict[int, int] = field(default_factory=dict)
    queues: dict[str, float] = field(default_factory=dict)
    index_pending: float = 0.0
    crawldb_pending: float = 0.0
    slots_held_long: float = 0.0


class WorkerMetrics:
    """See the module docstring."""

    def __init__(self, crawler: Crawler, config: MetricsConfig) -> None:
        self.crawler = crawler
        s = crawler.settings
        self.interval = config.snapshot_interval
        self.linger = config.linger
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        self.labels = {
            "crawl": crawl_key(s, site),
            "worker": worker_id(s.get("JOBDIR"), s.get("RECORD_WORKER_ID")),
        }
        self.disk_path = s.get("JOBDIR") or os.getcwd()
        self.memory_limit = s.getint("MEMUSAGE_LIMIT_MB") * 1024 * 1024
        self.slots = float(s.getint("CONCURRENT_REQUESTS"))
        # a request in the downloader for over half its timeout holds its slot "long": the
        # share of slots that hanging hosts take (crawler_download_slots_held_long)
        self.held_long = s.getfloat("DOWNLOAD_TIMEOUT") / 2
        # imported here: a crawl without METRICS_PORT does not load prometheus_client
        from crawler.metrics import families
        from crawler.metrics.exporter import MetricsServer
        from crawler.metrics.redis_calls import install as count_redis_calls

        self.fam = families
        # counted here per fetch, written into the stats with each snapshot and at close
        self._fetch = families.LocalHistogram(families.FETCH_HISTOGRAM)
        self._delay = families.LocalHistogram(families.DELAY_HISTOGRAM)
        self._bytes: dict[str, int] = {}
        self.server = MetricsServer(config.bind_host, config.port, self.families)
        self.frontier: Frontier | None = None
        self.snapshot = Snapshot()
        self.redis = count_redis_calls()
        self._counts: tuple[float, FrontierCounts] | None = None  # asked from the scrape thread
        self._task: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WorkerMetrics:
        config = MetricsConfig.from_settings(crawler.settings)  # built once
        if not config.enabled:
            raise NotConfigured
        ext = cls(crawler, config)
        connect = crawler.signals.connect
        connect(ext.frontier_opened, crawler_signals.frontier_opened)
        connect(ext.fetch_completed, crawler_signals.fetch_completed)
        connect(ext.spider_opened, signals.spider_opened)
        connect(ext.spider_closed, signals.spider_closed)
        connect(ext.engine_stopped, signals.engine_stopped)
        return ext

    # -- the reactor's side -------------------------------------------------------------------

    def frontier_opened(self, frontier: Frontier, spider: Spider) -> None:
        self.frontier = frontier

    def spider_opened(self, spider: Spider) -> None:
        tally = self.crawler.get_extension(CrawlTally)
        if tally is not None:
            tally.listen(self.fetched)
        try:
            port = self.server.start()
        except OSError as exc:
            logger.error(
                "Metrics not served: %s:%s: %s (METRICS_PORT)",
                self.server.host, self.server.requested_port, exc,
            )
            return
        logger.info("Metrics at http://%s:%d/metrics", self.server.host, port)
        self._task = create_looping_call(self.publish)
        self._task.start(self.interval, now=True)

    def fetched(
        self, request: Request, tallied: Tallied, duration: float,
        response: Response | None, followed_by: Request | None, status: int | None, size: int,
    ) -> None:
        self._fetch.observe(duration)
        if size:
            key = self.fam.status_class(status)
            self._bytes[key] = self._bytes.get(key, 0) + size

    def fetch_completed(
        self, request: Request, host: str, delay: float | None, outcome: Outcome
    ) -> None:
        if delay is not None:
            self._delay.observe(delay)

    def _write_stats(self) -> None:
        """What this extension counts, into the crawl's stats (so the stats file, the
        heartbeat's totals and the snapshot have it)."""
        stats = self.crawler.stats
        assert stats is not None
        self._fetch.write(stats)
        self._delay.write(stats)
        for key, n in self._bytes.items():
            stats.set_value(self.fam.BYTES_PREFIX + key, n)
        stats.set_value(self.fam.ROUND_TRIPS, self.redis.round_trips)  # the heartbeat sums them
        stats.set_value(self.fam.REDIS_ERRORS, self.redis.errors)

    def publish(self) -> None:
        """A new snapshot for the scrape thread (a few dict copies; the frontier's counts
        when they are cheap on this thread)."""
        stats = self.crawler.stats
        assert stats is not None
        self._write_stats()
        frontier = self.frontier
        counts = None
        if frontier is not None and not _counts_off_reactor(frontier):
            counts = frontier.counts()
        monitor = self.crawler.get_extension(ReactorStallMonitor)
        self.snapshot = Snapshot(
            taken=time.time(),
            stats=dict(stats.get_stats()),
            counts=counts,
            stall=dict(monitor.histogram) if monitor is not None else {},
            queues=_thread_queues(self.crawler),
            index_pending=_index_pending(self.crawler),
            crawldb_pending=_crawldb_pending(self.crawler),
            slots_held_long=_held_long(self.crawler, self.held_long),
        )

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        self._write_stats()  # before the stats file and the heartbeat's last beat

    async def engine_stopped(self) -> None:
        if self.server.port == 0:
            return
        self.publish_final()
        if self.linger > 0:
            from twisted.internet.threads import deferToThread

            await maybe_deferred_to_future(
                deferToThread(self.server.wait_final_scraped, self.linger)
            )
        self.server.close()

    def publish_final(self) -> None:
        """The crawl's last figures: the frontier is closed now, so its counts are the last
        ones asked, with what it said at close."""
        last = self.snapshot.counts or (self._counts[1] if self._counts else None)
        self.frontier = None
        self.publish()
        stats = self.snapshot.stats
        if last is not None:
            last.queued = int(stats.get("frontier/queued_at_close", last.queued))
            last.seen = int(stats.get("frontier/seen", last.seen))
            last.in_flight = last.hosts_busy = last.hosts_ready = 0
        self.snapshot.counts = last
        self._counts = None
        self.server.final()

    # -- the scrape thread's side -------------------------------------------------------------

    def families(self) -> Iterator[Metric]:
        snap = self.snapshot
        labels = self.labels
        yield from self.fam.stats_families(snap.stats, labels)
        counts = snap.counts if snap.counts is not None else self._shared_counts()
        if counts is not None:
            yield from self.fam.frontier_families(counts, labels)
        yield self.fam.stall_family(snap.stall, labels)
        yield self.fam.labelled_gauge(
            "thread_queue_jobs", "Jobs queued or running on the crawl's worker threads",
            "thread", snap.queues, labels,
        )
        values = [
            ("index_pending_pages", "Pages given to the index and not committed yet",
             snap.index_pending),
            ("crawldb_pending_records", "Crawl-database records not written yet",
             snap.crawldb_pending),
            ("snapshot_age_seconds", "Seconds since the reactor last published these "
             "figures (grows while the reactor is stuck)", max(0.0, time.time() - snap.taken)),
            ("process_resident_memory_bytes", "Resident memory of this worker", _rss()),
            ("download_slots", "Download slots (CONCURRENT_REQUESTS)", self.slots),
            ("download_slots_held_long", "Download slots held by a request in the downloader "
             "for over half of DOWNLOAD_TIMEOUT (hanging hosts)", snap.slots_held_long),
        ]
        if self.memory_limit:
            values.append(("memory_limit_bytes", "MEMUSAGE_LIMIT_MB", self.memory_limit))
        try:
            disk = os.statvfs(self.disk_path)
            values.append(("disk_free_bytes", "Free space where the crawl writes (JOBDIR, "
                           "else the current folder)", disk.f_bavail * disk.f_frsize))
            values.append(("disk_size_bytes", "Size of that file system",
                           disk.f_blocks * disk.f_frsize))
        except OSError:
            pass
        yield from self.fam.gauges(values, labels)

    def _shared_counts(self) -> FrontierCounts | None:
        """A shared frontier's counts, asked from this thread at most once per interval (it
        answers from its own worker thread; the reactor is not involved)."""
        frontier = self.frontier
        if frontier is None:
            return self._counts[1] if self._counts else None
        now = time.monotonic()
        if self._counts is None or now - self._counts[0] >= self.interval:
            self._counts = (now, frontier.counts())
        return self._counts[1]


def _counts_off_reactor(frontier: Frontier) -> bool:
    """A frontier that works on its own thread (the shared one) answers ``counts`` there."""
    return bool(getattr(frontier, "completes_later", False))


def _thread_queues(crawler: Crawler) -> dict[str, float]:
    from crawler.offload.components import OffloadWorkers

    workers = crawler.get_extension(OffloadWorkers)
    threads = getattr(workers, "_workers", None) or {}
    return {name: float(worker.pending) for name, worker in list(threads.items())}


def _held_long(crawler: Crawler, seconds: float) -> float:
    held = getattr(getattr(crawler.engine, "downloader", None), "held_longer_than", None)
    return float(held(seconds)) if held is not None else 0.0


def _index_pending(crawler: Crawler) -> float:
    pipeline = crawler.get_item_pipeline(load_object(_INDEX_PIPELINE))
    return float(getattr(pipeline, "_pending", 0) or 0)


def _crawldb_pending(crawler: Crawler) -> float:
    from crawler.extensions.recrawl import RecrawlExtension

    ext = crawler.get_extension(RecrawlExtension)
    db = getattr(ext, "db", None)
    pending = getattr(db, "_pending", None)
    return float(len(pending)) if pending is not None else 0.0


def _rss() -> float:
    try:
        with open("/proc/self/statm", "rb") as f:
            return float(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        import resource

        return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
