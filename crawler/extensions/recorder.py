"""The crawl record: what the crawl did over time, kept with the crawl for ``scrapy report``.

Everything comes from what the crawl already has: each fetch as the crawl's tally counted it
(:mod:`crawler.extensions.tally`: its status, size, gap and whether it makes a broken link), the
delay the frontier applied after it (``fetch_completed``: the fetch's line is written once that
arrives, or with no delay when it never does), holds (``host_hold``), and the frontier's counts,
reached through ``frontier_opened`` as the progress line does. The record adds no work to the
crawl's hot path beyond one short line per fetch.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.httpobj import urlparse_cached

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.extensions.tally import CrawlTally
from crawler.frontier import Frontier, Outcome
from crawler.frontier.addresses import AddressPolicy
from crawler.meta import found_on
from crawler.report.config import RecordConfig
from crawler.report.recordfile import STATS_PREFIXES, RecordWriter, set_aside
from crawler.report.tally import Tallied
from crawler.report.worker import worker_id

logger = logging.getLogger(__name__)

# Counters and stats are written every this many snapshots (and at the end): a killed crawl
# keeps what it had then.
#: Past record_max_fetches, one line per host and this many seconds.
AGGREGATE_INTERVAL = 60.0
#: Broken links (4xx/5xx answers, failed fetches) kept with their URL; the rest are counted.
MAX_BROKEN = 1_000
_COUNTERS_EVERY = 12
# The share of the crawl's CPU the frontier's counts may take (see _pace_counts).
_COUNTS_SHARE = 0.01


def record_path(settings: Any, site: str) -> Path:
    """``RECORD_PATH``, else ``JOBDIR/record.jsonl``, else next to ``STATS_FILE``, else
    ``crawl-record-<site>.jsonl`` in the current directory (``scrapy report`` looks in the
    same places)."""
    explicit = RecordConfig.from_settings(settings).path
    if explicit:
        return Path(explicit)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return Path(jobdir) / "record.jsonl"
    stats_file = settings.get("STATS_FILE", defaults.STATS_FILE)
    if stats_file:
        p = Path(stats_file)
        return p.with_name(f"{p.stem}.record.jsonl")
    return Path(f"crawl-record-{site}.jsonl")


def _resumable(settings: Any) -> bool:
    """Whether this run may go on an earlier one, so its session belongs in the same record:
    a JOBDIR crawl resumed, or a worker (re)joining a crawl kept in Redis (unless the run
    starts that crawl afresh, FRONTIER_RESET)."""
    if settings.get("JOBDIR"):
        return True
    redis = str(settings.get("FRONTIER_BACKEND") or "").lower() == "redis"
    return redis and not settings.getbool("FRONTIER_RESET")


@dataclass(slots=True)
class _Agg:
    """One host's fetches during one aggregate interval (times in ms)."""

    bucket: int
    n: int = 0
    errors: int = 0
    dur_sum: int = 0
    dur_max: int = 0
    bytes: int = 0
    gaps: int = 0
    gap_sum: int = 0
    gap_min: int | None = None
    short: int = 0
    asked_sum: int = 0
    asked_n: int = 0

    def line(self, host: int) -> list[Any]:
        return [
            "a", host, self.bucket, self.n, self.errors, self.dur_sum, self.dur_max,
            self.bytes, self.gaps, self.gap_sum, self.gap_min, self.short, self.asked_sum,
            self.asked_n,
        ]  # fmt: skip


@dataclass(slots=True)
class _Fetch:
    """A fetch whose line waits for the delay the frontier applied after it (times in ms)."""

    host: str
    start: int
    duration: int
    status: int
    size: int
    depth: int
    gap: float | None
    short: bool
    at: float  # when it ended (wall clock), to write it without a delay once it waited long


class CrawlRecordExtension:
    """Snapshots every ``record_interval`` seconds (``TUNING``) and one line per fetch (then per
    host and interval past ``record_max_fetches``), appended to the record file (see
    ``crawler/report/recordfile.py`` for the format).

    The delay asked after a fetch is the one the frontier applied (``fetch_completed``): a
    fetch's line waits for it, and is written without one when it has not come by the next
    snapshot but one (a request the frontier never handed out).
    """

    def __init__(self, crawler: Crawler, config: RecordConfig | None = None) -> None:
        settings = crawler.settings
        config = config or RecordConfig.from_settings(settings)
        self.crawler = crawler
        self.interval = config.interval
        self.max_fetches = config.max_fetches
        self.agg_ms = round(1000 * AGGREGATE_INTERVAL)
        self.max_broken = MAX_BROKEN
        self.worker = worker_id(  # one worker across stops and resumes (its JOBDIR)
            settings.get("JOBDIR"), config.worker_id
        )
        self.politeness = {
            "min_delay": settings.getfloat("FRONTIER_MIN_DELAY", defaults.FRONTIER_MIN_DELAY),
            "delay_factor": settings.getfloat(
                "FRONTIER_DELAY_FACTOR", defaults.FRONTIER_DELAY_FACTOR
            ),
            "max_delay": settings.getfloat("FRONTIER_MAX_DELAY", defaults.FRONTIER_MAX_DELAY),
            "host_concurrency": settings.getint(
                "FRONTIER_HOST_CONCURRENCY", defaults.FRONTIER_HOST_CONCURRENCY
            ),
            "ip_concurrency": settings.getint(
                "FRONTIER_IP_CONCURRENCY", defaults.FRONTIER_IP_CONCURRENCY
            ),
            "ip_delay": AddressPolicy.from_settings(settings).delay,
        }  # the settings, for a reader of the record: the delays are the frontier's
        self.frontier: Frontier | None = None
        self.writer: RecordWriter | None = None
        self._task: Any = None
        self._ticks = 0
        self._counts_every = 1
        self._waiting: dict[Request, _Fetch] = {}  # fetches waiting for their delay
        self._early: dict[Request, float] = {}  # delays that came before their fetch's end
        self._aggs: dict[int, _Agg] = {}
        self.fetches = 0
        self.failed = 0
        self.http_errors = 0
        self.broken = 0
        self.content_types: dict[str, int] = {}
        self._addresses: dict[str, str] = {}
        self.depths: dict[int, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlRecordExtension:
        config = RecordConfig.from_settings(crawler.settings)  # built once
        if not config.enabled:
            raise NotConfigured
        ext = cls(crawler, config)
        connect = crawler.signals.connect
        connect(ext.frontier_opened, crawler_signals.frontier_opened)
        connect(ext.spider_opened, signals.spider_opened)
        connect(ext.spider_closed, signals.spider_closed)
        connect(ext.engine_stopped, signals.engine_stopped)
        connect(ext.fetch_completed, crawler_signals.fetch_completed)
        connect(ext.host_hold, crawler_signals.host_hold)
        connect(ext.host_resolved, crawler_signals.host_resolved)
        return ext

    # -- lifecycle -------------------------------------------------------------------------

    def frontier_opened(self, frontier: Frontier, spider: Spider) -> None:
        self.frontier = frontier

    def spider_opened(self, spider: Spider) -> None:
        path = record_path(self.crawler.settings, spider.name)
        header = {
            "worker": self.worker,
            "site": spider.name,
            "interval": self.interval,
            "aggregate_interval": self.agg_ms / 1000,
            "max_fetches": self.max_fetches,
            "politeness": self.politeness,
        }
        try:
            if not _resumable(self.crawler.settings):
                kept = set_aside(path)
                if kept is not None:
                    logger.info("Crawl record: the previous crawl's record moved to %s", kept)
            self.writer = RecordWriter(path, header, time.time())
        except OSError as exc:
            logger.warning("No crawl record: cannot write %s (%s)", path, exc)
            return
        logger.info("Crawl record: %s (scrapy report %s)", path, path)
        tally = self.crawler.get_extension(CrawlTally)
        if tally is None:
            logger.warning("The crawl record has no fetches: the CrawlTally extension is off")
        else:
            tally.listen(self.fetch_tallied)
        self._task = create_looping_call(self.snapshot)
        self._task.start(self.interval, now=True)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        if self.writer is not None:
            self._write_waiting(None)
            self.snapshot(final=True)
            self._flush_aggregates(None)
            self._write_counters()

    def engine_stopped(self) -> None:
        """The final stats are complete once the engine has stopped (as for STATS_FILE)."""
        writer = self.writer
        if writer is None:
            return
        assert self.crawler.stats is not None
        stats = self.crawler.stats.get_stats()
        reason = str(stats.get("finish_reason", ""))
        writer.write(["end", writer.ms(time.time()), reason, _plain(stats)])
        writer.close()
        self.writer = None

    # -- what the crawl says -----------------------------------------------------------------

    def host_resolved(self, host: str, address: str) -> None:
        """The report holds the names of one server against its IP delay."""
        writer = self.writer
        if writer is not None and address and self._addresses.get(host) != address:
            self._addresses[host] = address
            writer.write(["ip", writer.host(host), address])

    def host_hold(self, host: str, seconds: float) -> None:
        writer = self.writer
        if writer is not None:
            writer.write(["hold", writer.host(host), writer.ms(time.time()),
                          round(seconds * 1000)])

    def fetch_tallied(
        self,
        request: Request,
        tallied: Tallied,
        duration: float,
        response: Response | None,
        followed_by: Request | None,
        status: int | None,
        size: int,
    ) -> None:
        """A fetch as the crawl's tally counted it: its line waits for its delay."""
        writer = self.writer
        if writer is None:
            return
        now = time.time()
        end_ms = writer.ms(now)
        dur_ms = round(duration * 1000)
        code = status or 0
        depth = request.meta.get("depth", 0)
        if response is not None:
            ctype = response.headers.get(b"Content-Type")
            key = ctype.split(b";", 1)[0].strip().lower().decode("latin-1") if ctype else "-"
            self.content_types[key] = self.content_types.get(key, 0) + 1
            self.depths[depth] = self.depths.get(depth, 0) + 1
        if code == 0:
            self.failed += 1
        elif code >= 400:
            self.http_errors += 1
        if tallied.broken:
            self._broken(writer, end_ms, request, code)
        fetch = _Fetch(urlparse_cached(request).hostname or "", end_ms - dur_ms, dur_ms, code,
                       size, depth, tallied.gap, tallied.short, now)
        delay = self._early.pop(request, None)
        if delay is not None:
            self._write_fetch(fetch, delay)
        else:
            self._waiting[request] = fetch

    def fetch_completed(
        self, request: Request, host: str, delay: float | None, outcome: Outcome
    ) -> None:
        if self.writer is None or outcome == Outcome.NOT_SENT:
            return
        fetch = self._waiting.pop(request, None)
        if fetch is not None:
            self._write_fetch(fetch, delay)
        elif delay is not None:
            self._early[request] = delay

    def _write_waiting(self, before: float | None) -> None:
        """Write the fetches whose delay never came (ended before ``before``; all: None)."""
        for request, fetch in list(self._waiting.items()):
            if before is None or fetch.at < before:
                del self._waiting[request]
                self._write_fetch(fetch, None)
        self._early.clear()  # a delay whose fetch the tally never counted (a stopped one)

    def _write_fetch(self, fetch: _Fetch, delay: float | None) -> None:
        writer = self.writer
        assert writer is not None
        h = writer.host(fetch.host)
        asked = None if delay is None else round(delay * 1000)
        self.fetches += 1
        if self.fetches <= self.max_fetches:
            # the one line per page: ints only, written without json.dumps
            writer.write_text(
                f'["f",{h},{fetch.start},{fetch.duration},{fetch.status},{fetch.size},'
                f'{"null" if asked is None else asked},{fetch.depth}]\n'
            )
            return
        self._aggregate(writer, h, fetch, asked)

    def _aggregate(self, writer: RecordWriter, h: int, fetch: _Fetch, asked: int | None) -> None:
        """Past record_max_fetches: the host's fetches summed per interval, with the gaps the
        crawl's tally measured, since single fetches are no longer written."""
        start = fetch.start
        bucket = start - start % self.agg_ms
        agg = self._aggs.get(h)
        if agg is not None and agg.bucket != bucket:
            writer.write(agg.line(h))
            agg = None
        if agg is None:
            agg = self._aggs[h] = _Agg(bucket)
        agg.n += 1
        agg.errors += fetch.status == 0 or fetch.status >= 400
        agg.dur_sum += fetch.duration
        agg.dur_max = max(agg.dur_max, fetch.duration)
        agg.bytes += fetch.size
        if asked is not None:
            agg.asked_sum += asked
            agg.asked_n += 1
        if fetch.gap is not None:
            gap = round(fetch.gap * 1000)
            agg.gaps += 1
            agg.gap_sum += gap
            agg.gap_min = gap if agg.gap_min is None else min(agg.gap_min, gap)
            agg.short += fetch.short

    def _flush_aggregates(self, now_ms: int | None) -> None:
        """Write the intervals that are over (all of them at the end)."""
        writer = self.writer
        if writer is None or not self._aggs:
            return
        for h, agg in list(self._aggs.items()):
            if now_ms is None or agg.bucket + self.agg_ms <= now_ms:
                writer.write(agg.line(h))
                del self._aggs[h]

    def _broken(self, writer: RecordWriter, t: int, request: Request, code: int) -> None:
        self.broken += 1
        if self.broken > self.max_broken:
            return
        writer.write(["b", t, request.url, code, found_on(request) or None])

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot(self, final: bool = False) -> None:
        writer = self.writer
        if writer is None:
            return
        stats = self.crawler.stats
        assert stats is not None
        get = stats.get_value
        rejected = sum(
            v
            for k, v in stats.get_stats().items()
            if k.startswith("frontier/rejected/") and k != "frontier/rejected/seen"
        )
        line: list[Any] = [
            "s",
            writer.ms(time.time()),
            get("response_received_count", 0),
            get("downloader/response_bytes", 0),
            get("item_scraped_count", 0),
        ]
        frontier = self.frontier
        if frontier is not None and (final or self._ticks % self._counts_every == 0):
            try:
                began = time.process_time()
                c = frontier.counts()
                line += [c.queued, c.seen, c.in_flight]
                line += [c.hosts_ready, c.hosts_waiting, c.hosts_busy]
                self._pace_counts(time.process_time() - began)
            except Exception:  # a shared frontier that is gone must not stop the crawl
                logger.debug("frontier counts unavailable", exc_info=True)
                line += [None] * 6
        else:
            line += [None] * 6
        line += [self.failed, self.http_errors, rejected]
        if not final:
            self._write_waiting(time.time() - 2 * self.interval)
        writer.write(line)
        self._ticks += 1
        if self._ticks % _COUNTERS_EVERY == 0:
            self._write_counters()
        self._flush_aggregates(line[1])
        writer.flush()

    def _pace_counts(self, took: float) -> None:
        """The embedded frontier counts its hosts one by one: with a million hosts that takes
        a noticeable fraction of a second. Ask no more often than keeps it under 1 % of the
        crawl's time (the figures between are left out, not repeated)."""
        self._counts_every = max(1, math.ceil(took / (_COUNTS_SHARE * self.interval)))

    def _write_counters(self) -> None:
        writer = self.writer
        if writer is None:
            return
        assert self.crawler.stats is not None
        kept = {
            k: v
            for k, v in self.crawler.stats.get_stats().items()
            if k.startswith(STATS_PREFIXES)
        }
        writer.write(
            [
                "c",
                writer.ms(time.time()),
                {
                    "content_types": self.content_types,
                    "depth": {str(d): n for d, n in self.depths.items()},
                    "fetches": self.fetches,
                    "broken": self.broken,
                    "stats": _plain(kept),
                },
            ]
        )


def _plain(stats: dict[str, Any]) -> dict[str, Any]:
    """Stats as JSON values (datetimes become ISO strings)."""
    out: dict[str, Any] = {}
    for k, v in stats.items():
        if isinstance(v, bool | int | float | str) or v is None:
            out[k] = v
        elif hasattr(v, "isoformat"):
            out[k] = v.isoformat()
        else:
            out[k] = str(v)
    return out
