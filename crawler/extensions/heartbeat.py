"""A Redis worker's heartbeat: its counters merged into the crawl's totals, its pages/s, and a
summary of the whole crawl from the last worker to end.

Not scrapy-redis's ``RedisStatsCollector``: that one costs 2-3 round trips per increment and
breaks LogStats at close in Scrapy 2.19. Here the worker's own stats stay local and every
``heartbeat_interval`` seconds (a ``TUNING`` knob) the counters that moved are sent as deltas
with the heartbeat, in one transaction on the heartbeat's own thread (a
:class:`~crawler.offload.components.ContentWorker`): the reactor never waits on Redis, not even
at close, where the engine waits for the last beat and the whole crawl's summary.

While Redis is away (a restart, a cluster failover) a beat is not sent, and the counters that
moved go with the first beat after (one line when Redis goes away, one when it is back:
:class:`~crawler.backends.redis.outage.RedisOutage`). The last beat, at close, waits up to
``REDIS_OUTAGE_WAIT`` seconds from the outage's start for Redis to come back; past that this
worker's last counters are not in the crawl's totals (said in one line).
``scrapy frontier <site>`` reads them.

Each beat's answer carries the operator's controls (pause, deadline, byte budget, blocks), so
what the operator did with ``scrapy frontier`` leaves a line in every worker's log within a
heartbeat interval ("Operator: crawl paused", "Operator: host example.org blocked"), and a
running worker of a paused crawl shows as "paused" in ``scrapy frontier`` status.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.defer import maybe_deferred_to_future

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.backends.redis.keys import crawl_key
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.backends.redis.status import Fleet
from crawler.backends.registry import backend_class
from crawler.config.typed import FeatureConfig, knob, setting
from crawler.extensions.tally import CrawlTally
from crawler.offload.components import ContentWorker
from crawler.report.worker import worker_id

logger = logging.getLogger(__name__)


class HeartbeatConfig(FeatureConfig):
    """How often a worker beats (0: never), and how long its last beat waits for Redis."""

    interval: float = knob("heartbeat_interval")
    outage_wait: float = setting("REDIS_OUTAGE_WAIT")

HOSTS_SENT = 10  # the busiest hosts of this worker's tally, in each heartbeat
# Stats that are states, not counts: summed over workers they would mean nothing.
_NOT_SUMMED_PREFIXES = ("frontier/busiest/", "frontier/dropped/", "memusage/")
_NOT_SUMMED = frozenset(
    {
        "frontier/queued_at_close",
        "frontier/hosts",
        "frontier/seen",
        "frontier/hosts_waiting_at_close",
        "frontier/depth_max",
        "elapsed_time_seconds",
    }
)


def counters(stats: Mapping[str, Any]) -> dict[str, float]:
    """The stats that add up across workers: numbers, less the states."""
    return {
        k: v
        for k, v in stats.items()
        if isinstance(v, (int, float))
        and not isinstance(v, bool)
        and k not in _NOT_SUMMED
        and not k.startswith(_NOT_SUMMED_PREFIXES)
    }


def control_changes(
    before: Mapping[str, str], after: Mapping[str, str], blocked_before: list[str],
    blocked_after: list[str],
) -> list[str]:
    """What changed in the operator's controls, one phrase each."""
    lines = []
    if before.get("paused") != after.get("paused"):
        lines.append("crawl paused: no new requests until resume" if after.get("paused") == "1"
                     else "crawl resumed")
    if before.get("deadline") != after.get("deadline"):
        when = after.get("deadline")
        lines.append(
            "deadline set: the crawl ends at "
            + datetime.fromtimestamp(float(when)).isoformat(timespec="seconds")
            if when else "deadline cleared"
        )
    if before.get("budget") != after.get("budget"):
        lines.append(f"byte budget set to {after['budget']} bytes" if after.get("budget")
                     else "byte budget cleared")
    for name in sorted(set(blocked_after) - set(blocked_before)):
        kind, _, value = name.partition(":")
        lines.append(f"{'domain' if kind == 'd' else 'host'} {value} blocked: its URLs are "
                     "dropped and refused")
    for name in sorted(set(blocked_before) - set(blocked_after)):
        kind, _, value = name.partition(":")
        lines.append(f"{'domain' if kind == 'd' else 'host'} {value} unblocked")
    return lines


class FleetHeartbeat:
    """See the module docstring. Runs only for a Redis frontier (``FRONTIER_BACKEND=redis``)."""

    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.interval = interval
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        self.key = crawl_key(crawler.settings, site)
        self.fleet: Fleet | None = None
        self.outage: RedisOutage | None = None
        self._thread: ContentWorker | None = None
        self._task: Any = None
        self._busy = False
        self._last = (0, time.monotonic())
        self._rate = 0.0
        self._controls: tuple[dict[str, str], list[str]] | None = None  # as last said

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FleetHeartbeat:
        s = crawler.settings
        interval = HeartbeatConfig.from_settings(s).interval
        if interval <= 0 or not issubclass(
            backend_class(s, "frontier_store"), RedisFrontierStore
        ):
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        s = self.crawler.settings
        # fail fast: a beat while Redis is away (a restart, a failover) is not sent, its counters
        # go with the next; redis-py's retries would hold a cluster's transaction for seconds
        client = redis_client(s, fail_fast=True)
        name = worker_id(s.get("JOBDIR"), s.get("RECORD_WORKER_ID"))
        fleet = self.fleet = Fleet(client, self.key, name)
        self.outage = RedisOutage(
            "fleet heartbeat",
            lambda: client.exists(fleet.keys.totals),
            meanwhile="beats wait, the counters go with the first one after",
            wait=HeartbeatConfig.from_settings(self.crawler.settings).outage_wait,
            log=logger,
        )
        self._thread = ContentWorker("fleet-heartbeat")
        self._task = create_looping_call(self._tick)
        self._task.start(self.interval, now=True)

    def _beat_args(self, state: str) -> tuple[dict[str, float], dict[str, Any]]:
        stats = self.crawler.stats
        assert stats is not None
        values = stats.get_stats()
        pages = int(values.get("pages/ok", 0))
        last_pages, last_time = self._last
        now = time.monotonic()
        if now - last_time >= 0.5:
            self._rate = (pages - last_pages) / (now - last_time)
            self._last = (pages, now)
        beat: dict[str, Any] = {"state": state, "pages": pages, "rate": round(self._rate, 2)}
        tally = self.crawler.get_extension(CrawlTally)
        if tally is not None:  # its busiest hosts, for `scrapy frontier` to merge
            beat["hosts"] = {
                host: t.counts() for host, t in tally.hosts.busiest(HOSTS_SENT, by="fetches")
            }
        return counters(values), beat

    def _tick(self) -> None:
        if self._busy or self.fleet is None or self._thread is None:
            return  # the last beat is still on its way (Redis slow)
        self._busy = True
        totals, beat = self._beat_args("running")
        d = self._thread.run(self._send, self.fleet, totals, beat)
        d.addErrback(lambda f: logger.warning("Heartbeat not sent: %s", f.getErrorMessage()))
        d.addBoth(self._done)

    def _send(self, fleet: Fleet, totals: dict[str, float], beat: dict[str, Any]) -> None:
        """On the heartbeat's thread: one beat, or none while Redis is away (the counters that
        moved go with the next one)."""
        assert self.outage is not None
        with contextlib.suppress(RedisUnavailable):
            self.outage.call(lambda: fleet.beat(totals, beat), wait=0)
            self._say_controls(fleet.controls, fleet.blocked)

    def _say_controls(self, controls: dict[str, str], blocked: list[str]) -> None:
        """One log line per change of the operator's controls since the last beat (at the
        first beat: the ones in force)."""
        before_ctl, before_blocked = self._controls or ({}, [])
        first = self._controls is None
        self._controls = (controls, blocked)
        for line in control_changes(before_ctl, controls, before_blocked, blocked):
            logger.info("Operator%s: %s (scrapy frontier)", " (in force)" if first else "", line)

    def _done(self, _: Any) -> None:
        self._busy = False

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        fleet, thread = self.fleet, self._thread
        if fleet is None or thread is None:
            return
        totals, beat = self._beat_args("ended")
        beat["reason"] = reason
        try:  # the engine waits for it; the reactor does not
            summary = await maybe_deferred_to_future(
                thread.run(self._last_beat, fleet, totals, beat)
            )
            if summary is not None:
                self._summary(*summary)
        except Exception as exc:
            logger.warning("Could not send the last heartbeat to Redis: %s", exc)
        finally:
            self._close(thread)

    def _last_beat(
        self, fleet: Fleet, totals: dict[str, float], beat: dict[str, Any]
    ) -> tuple[dict[str, float], dict[str, Any], bool] | None:
        """On the heartbeat's thread: the last beat (waiting for Redis up to the outage's
        wait), then the crawl's totals, its workers and whether no other is still running
        (this worker is the last: it logs the summary)."""
        outage = self.outage
        assert outage is not None
        try:
            now = outage.call(lambda: fleet.beat(totals, beat))
            self._say_controls(fleet.controls, fleet.blocked)  # one set since the last beat
            workers = outage.call(fleet.workers)
            others = [
                w
                for wid, w in workers.items()
                if wid != fleet.worker_id
                and w.get("state") in ("running", "paused")
                and now - float(w.get("beat", 0)) < 3 * self.interval + 5
            ]
            return outage.call(fleet.totals), workers, not others
        except RedisUnavailable as exc:
            logger.warning(
                "Redis still away at close (%s): this worker's last counters may not be in "
                "the crawl's totals", exc.cause,
            )
            return None

    def _close(self, thread: ContentWorker) -> None:
        if self.outage is not None:
            self.outage.close()
        thread.close(timeout=5)
        if self.fleet is not None:
            self.fleet.client.close()

    def _summary(self, t: dict[str, float], workers: dict[str, Any], last: bool) -> None:
        """Every worker keeps the pages the whole crawl fetched so far (``fleet/pages``: its
        exit status says whether the crawl failed, not whether its own share did); the last
        worker to end also says what the whole crawl did."""
        pages = sum(v for k, v in t.items() if k.startswith("pages/status/"))
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value("fleet/pages", int(pages))
        if not last:
            return
        if stats is not None:
            stats.set_value("fleet/workers", len(workers))
        logger.info(
            "Whole crawl %r (last of %d workers to end): %d pages (%d OK), %d bytes, %d items, "
            "%d robots.txt fetches; totals in Redis {%s}:totals, `scrapy frontier %s` for more",
            self.key,
            len(workers),
            pages,
            int(t.get("pages/ok", 0)),
            int(t.get("downloader/response_bytes", 0)),
            int(t.get("item_scraped_count", 0)),
            int(t.get("robotstxt/request_count", 0)),
            self.key,
            self.key,
        )
