"""The crawl record: what the crawl did over time, kept with the crawl for ``scrapy report``.

Everything comes from signals and stats the crawl already has (``fetch_finished`` with its
outcome, duration, status and size; ``host_crawl_delay`` and ``host_hold``; the frontier's
counts, reached through ``frontier_opened`` as the progress line does), so the record adds no
work to the crawl's hot path beyond one signal receiver and one short line per fetch.
"""

from __future__ import annotations

import logging
import math
import os
import socket
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
from crawler.frontier import Frontier, Outcome
from crawler.frontier.politeness import politeness_from_settings
from crawler.report.recordfile import STATS_PREFIXES, RecordWriter

logger = logging.getLogger(__name__)

# Counters and stats are written every this many snapshots (and at the end): a killed crawl
# keeps what it had then.
_COUNTERS_EVERY = 12
# The share of the crawl's CPU the frontier's counts may take (see _pace_counts).
_COUNTS_SHARE = 0.01


def record_path(settings: Any, site: str) -> Path:
    """``RECORD_PATH``, else ``JOBDIR/record.jsonl``, else next to ``STATS_FILE``, else
    ``crawl-record-<site>.jsonl`` in the current directory (``scrapy report`` looks in the
    same places)."""
    explicit = settings.get("RECORD_PATH", defaults.RECORD_PATH)
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

    def line(self, host: int) -> list[Any]:
        return [
            "a", host, self.bucket, self.n, self.errors, self.dur_sum, self.dur_max,
            self.bytes, self.gaps, self.gap_sum, self.gap_min, self.short, self.asked_sum,
        ]  # fmt: skip


class CrawlRecordExtension:
    """Snapshots every ``RECORD_INTERVAL`` seconds and one line per fetch (then per host and
    interval past ``RECORD_MAX_FETCHES``), appended to the record file (see
    ``crawler/report/recordfile.py`` for the format).

    The delay asked after a fetch is the frontier's politeness rule applied to what this
    extension hears: the fetch's duration, the host's robots.txt Crawl-delay and any hold
    (Retry-After, robots.txt unavailable) still running when the fetch ended.
    """

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.interval = settings.getfloat("RECORD_INTERVAL", defaults.RECORD_INTERVAL)
        self.max_fetches = settings.getint("RECORD_MAX_FETCHES", defaults.RECORD_MAX_FETCHES)
        agg = settings.getfloat("RECORD_AGGREGATE_INTERVAL", defaults.RECORD_AGGREGATE_INTERVAL)
        self.agg_ms = round(1000 * agg)
        self.max_broken = settings.getint("RECORD_MAX_BROKEN", defaults.RECORD_MAX_BROKEN)
        self.worker = settings.get("RECORD_WORKER_ID", defaults.RECORD_WORKER_ID) or (
            f"{socket.gethostname()}:{os.getpid()}"
        )
        if self.interval <= 0 or self.agg_ms <= 0:
            raise NotConfigured("RECORD_INTERVAL and RECORD_AGGREGATE_INTERVAL must be > 0")
        self.policy = politeness_from_settings(settings)
        self.frontier: Frontier | None = None
        self.writer: RecordWriter | None = None
        self._task: Any = None
        self._ticks = 0
        self._counts_every = 1
        self._crawl_delay: dict[str, float] = {}
        self._hold_until: dict[str, float] = {}
        self._last_end: dict[str, tuple[int, int]] = {}  # host -> (end ms, asked ms)
        self._aggs: dict[int, _Agg] = {}
        self.fetches = 0
        self.failed = 0
        self.http_errors = 0
        self.broken = 0
        self.content_types: dict[str, int] = {}
        self.depths: dict[int, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlRecordExtension:
        if not crawler.settings.getbool("RECORD_ENABLED", defaults.RECORD_ENABLED):
            raise NotConfigured
        ext = cls(crawler)
        connect = crawler.signals.connect
        connect(ext.frontier_opened, crawler_signals.frontier_opened)
        connect(ext.spider_opened, signals.spider_opened)
        connect(ext.spider_closed, signals.spider_closed)
        connect(ext.engine_stopped, signals.engine_stopped)
        connect(ext.fetch_finished, crawler_signals.fetch_finished)
        connect(ext.host_crawl_delay, crawler_signals.host_crawl_delay)
        connect(ext.host_hold, crawler_signals.host_hold)
        return ext

    # -- lifecycle -------------------------------------------------------------------------

    def frontier_opened(self, frontier: Frontier, spider: Spider) -> None:
        self.frontier = frontier

    def spider_opened(self, spider: Spider) -> None:
        path = record_path(self.crawler.settings, spider.name)
        p = self.policy
        header = {
            "worker": self.worker,
            "site": spider.name,
            "interval": self.interval,
            "aggregate_interval": self.agg_ms / 1000,
            "max_fetches": self.max_fetches,
            "politeness": {
                "min_delay": p.min_delay,
                "delay_factor": p.delay_factor,
                "max_delay": p.max_delay,
                "host_concurrency": p.host_concurrency,
            },
        }
        try:
            self.writer = RecordWriter(path, header, time.time())
        except OSError as exc:
            logger.warning("No crawl record: cannot write %s (%s)", path, exc)
            return
        logger.info("Crawl record: %s (scrapy report %s)", path, path)
        self._task = create_looping_call(self.snapshot)
        self._task.start(self.interval, now=True)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        if self.writer is not None:
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

    def host_crawl_delay(self, host: str, delay: float | None) -> None:
        if delay is None:
            self._crawl_delay.pop(host, None)
        else:
            self._crawl_delay[host] = delay

    def host_hold(self, host: str, seconds: float) -> None:
        now = time.time()
        until = now + seconds
        if until > self._hold_until.get(host, 0.0):
            self._hold_until[host] = until
        writer = self.writer
        if writer is not None:
            writer.write(["hold", writer.host(host), writer.ms(now), round(seconds * 1000)])

    def fetch_finished(
        self,
        request: Request,
        outcome: Outcome,
        duration: float | None,
        response: Response | None = None,
        followed_by: Request | None = None,
        status: int | None = None,
        size: int = 0,
    ) -> None:
        writer = self.writer
        if writer is None or outcome == Outcome.NOT_SENT:
            return  # never reached the network: no politeness, nothing to chart
        now = time.time()
        parts = urlparse_cached(request)
        host = parts.hostname or ""
        asked = self.policy.delay(duration, self._crawl_delay.get(host))
        hold = self._hold_until.get(host)
        if hold is not None:
            if hold > now + asked:
                asked = hold - now
            elif hold < now:
                del self._hold_until[host]
        dur_ms = round((duration or 0.0) * 1000)
        end_ms = writer.ms(now)
        start_ms = end_ms - dur_ms
        asked_ms = round(asked * 1000)
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
        if (code == 0 or code >= 400) and followed_by is None and parts.path != "/robots.txt":
            self._broken(writer, end_ms, request, code)
        h = writer.host(host)
        self.fetches += 1
        if self.fetches <= self.max_fetches:
            # the one line per page: ints only, written without json.dumps
            writer.write_text(f'["f",{h},{start_ms},{dur_ms},{code},{size},{asked_ms},{depth}]\n')
            self._last_end[host] = (end_ms, asked_ms)
            return
        self._aggregate(writer, h, host, start_ms, end_ms, dur_ms, code, size, asked_ms)

    def _aggregate(
        self,
        writer: RecordWriter,
        h: int,
        host: str,
        start_ms: int,
        end_ms: int,
        dur_ms: int,
        code: int,
        size: int,
        asked_ms: int,
    ) -> None:
        """Past RECORD_MAX_FETCHES: the host's fetches summed per interval, with the gaps
        against the delay asked measured here, since single fetches are no longer written."""
        bucket = start_ms - start_ms % self.agg_ms
        agg = self._aggs.get(h)
        if agg is not None and agg.bucket != bucket:
            writer.write(agg.line(h))
            agg = None
        if agg is None:
            agg = self._aggs[h] = _Agg(bucket)
        agg.n += 1
        agg.errors += code == 0 or code >= 400
        agg.dur_sum += dur_ms
        agg.dur_max = max(agg.dur_max, dur_ms)
        agg.bytes += size
        agg.asked_sum += asked_ms
        last = self._last_end.get(host)
        if last is not None and start_ms >= last[0]:
            gap = start_ms - last[0]
            agg.gaps += 1
            agg.gap_sum += gap
            agg.gap_min = gap if agg.gap_min is None else min(agg.gap_min, gap)
            agg.short += gap < last[1]
        self._last_end[host] = (end_ms, asked_ms)

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
        referer = request.headers.get(b"Referer")
        writer.write(
            ["b", t, request.url, code, referer.decode("latin-1") if referer else None]
        )

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
