"""The Scrapy scheduler: a thin adapter over the Mercator frontier (``SCHEDULER`` setting)."""

from __future__ import annotations

import logging
from time import monotonic
from typing import Any

from scrapy import Request, Spider
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from . import signals as crawler_signals
from .frontier import (
    Entry,
    Frontier,
    MemoryFrontier,
    PolitenessPolicy,
    Prioritizer,
    UrlPolicy,
)
from .waker import EngineWaker

logger = logging.getLogger(__name__)

LEASE_META = "frontier_lease"


def politeness_from_settings(settings: BaseSettings) -> PolitenessPolicy:
    return PolitenessPolicy(
        min_delay=settings.getfloat("FRONTIER_MIN_DELAY", 1.0),
        delay_factor=settings.getfloat("FRONTIER_DELAY_FACTOR", 5.0),
        max_delay=settings.getfloat("FRONTIER_MAX_DELAY", 30.0),
        host_concurrency=settings.getint("FRONTIER_HOST_CONCURRENCY", 1),
        max_crawl_delay=settings.getfloat("FRONTIER_MAX_CRAWL_DELAY", 120.0),
        max_failures=settings.getint("FRONTIER_HOST_MAX_FAILURES", 5),
    )


def url_policy_for(spider: Spider, settings: BaseSettings) -> UrlPolicy:
    """The URL policy of a site spider comes from its config; a plain spider is limited to its
    ``allowed_domains`` when it has them."""
    site = getattr(spider, "site", None)
    if site is None:
        domains = tuple(getattr(spider, "allowed_domains", None) or ())
        return UrlPolicy(
            domains=domains,
            any_host=not domains,
            max_url_length=settings.getint("URL_MAX_LENGTH", 2048),
            max_repeated_segments=settings.getint("URL_MAX_REPEATED_SEGMENTS", 3),
        )
    return UrlPolicy(
        hosts=site.scope.hosts,
        domains=site.scope.domains,
        allow=site.allow,
        deny=site.deny,
        max_depth=site.max_depth,
        max_url_length=site.max_url_length,
        max_repeated_segments=site.max_repeated_segments,
    )


class FrontierScheduler(BaseScheduler):
    """Hands the engine the frontier's next due URL, and tells the frontier when fetches end.

    When every host is waiting out its delay, ``next_request`` returns None and arms a timer for
    the moment the earliest host comes due, so no host waits for the engine's 5-second heartbeat.

    A crawl ends when nothing is in flight and no queued host is due within
    ``FRONTIER_IDLE_HORIZON`` seconds; hosts still waiting then are reported, not waited for.
    """

    def __init__(self, crawler: Crawler, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        self.settings = crawler.settings
        self.stats: StatsCollector | None = crawler.stats
        self.frontier: Frontier | None = frontier
        self.url_policy: UrlPolicy | None = None
        self.prioritizer: Prioritizer | None = None
        self.waker = EngineWaker(crawler)
        self.horizon = self.settings.getfloat("FRONTIER_IDLE_HORIZON", 300.0)
        self._leased: dict[int, str] = {}
        self._logged_reasons: set[str] = set()
        self._origins: set[str] = set()
        crawler.signals.connect(self._fetch_finished, crawler_signals.fetch_finished)
        crawler.signals.connect(self._host_crawl_delay, crawler_signals.host_crawl_delay)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        return cls(crawler)

    def _build_frontier(self) -> Frontier:
        s = self.settings
        back = s.getint("FRONTIER_BACK_QUEUES", 0) or 3 * s.getint("CONCURRENT_REQUESTS", 16)
        site = getattr(self.crawler.spider, "site", None)
        return MemoryFrontier(
            politeness_from_settings(s),
            front_queues=s.getint("FRONTIER_FRONT_QUEUES", 8),
            back_queues=back,
            max_pages_per_host=getattr(site, "max_pages_per_host", None),
            refill_batch=s.getint("FRONTIER_REFILL_BATCH", 256),
            on_give_up=self._host_given_up,
        )

    def open(self, spider: Spider) -> None:
        if self.frontier is None:
            self.frontier = self._build_frontier()
        self.url_policy = url_policy_for(spider, self.settings)
        self.prioritizer = Prioritizer(
            self.settings.get("FRONTIER_PRIORITY_POLICY", "depth"),
            self.settings.getint("FRONTIER_FRONT_QUEUES", 8),
        )
        self.crawler.signals.send_catch_log(
            crawler_signals.frontier_opened, frontier=self.frontier, spider=spider
        )
        return None

    def close(self, reason: str) -> None:
        self.waker.cancel()
        frontier = self.frontier
        if frontier is None:
            return None
        now = monotonic()
        left = frontier.waiting_hosts(now)
        if left:
            queued = sum(r.queued for r in left)
            shown = ", ".join(
                f"{r.host} ({r.queued} URLs, {r.reason}, due in {r.due_in:.0f}s)" for r in left[:10]
            )
            logger.warning(
                "Crawl ended with %d URLs of %d hosts not due within %.0fs: %s%s",
                queued,
                len(left),
                self.horizon,
                shown,
                " ..." if len(left) > 10 else "",
            )
        counts = frontier.counts(now)
        self._stat_set("frontier/queued_at_close", counts.queued)
        self._stat_set("frontier/hosts", counts.hosts)
        self._stat_set("frontier/seen", counts.seen)
        self._stat_set("frontier/hosts_waiting_at_close", len(left))
        for why, n in counts.extra.items():
            self._stat_set(f"frontier/dropped/{why}", n)
        frontier.close()
        return None

    # -- the engine's side ---------------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        return self.frontier is not None and self.frontier.has_work(monotonic(), self.horizon)

    def enqueue_request(self, request: Request) -> bool:
        assert self.frontier is not None and self.url_policy is not None
        assert self.prioritizer is not None
        request.meta.pop(LEASE_META, None)  # a retry or redirect copies its parent's meta
        meta = request.meta
        depth = meta.get("depth", 0)
        seed = bool(meta.get("seed"))
        if seed:
            self._admit_seed_host(request.url)
        reason, url, host = self.url_policy.check(request.url, depth)
        if reason:
            self._rejected(reason, request, seed)
            return False
        entry = Entry(
            url=url,
            host=host,
            priority=self.prioritizer.priority(
                depth=depth, host=host, request_priority=request.priority
            ),
            depth=depth,
            payload=request,
        )
        first = bool(meta.get("frontier_first"))
        if not first:
            self._discover_origin(url, host)
        result = self.frontier.add(entry, force=request.dont_filter or first, first=first)
        if not result.added:
            self._stat_inc(f"frontier/rejected/{result.reason}")
            return False
        self._stat_inc("frontier/enqueued")
        return True

    def _discover_origin(self, url: str, host: str) -> None:
        """The first URL of an origin lets others (robots.txt) put requests before it."""
        origin = url[: url.find("/", url.find("//") + 2)] if url.count("/") > 2 else url
        if origin in self._origins:
            return
        self._origins.add(origin)
        results = self.crawler.signals.send_catch_log(
            crawler_signals.origin_discovered, origin=origin, host=host
        )
        for _, result in results:
            for request in result if isinstance(result, list) else [result]:
                if isinstance(request, Request):
                    request.meta["frontier_first"] = True
                    self.enqueue_request(request)

    def _host_crawl_delay(self, host: str, delay: float | None) -> None:
        if self.frontier is not None and delay is not None:
            self.frontier.set_crawl_delay(host, delay)

    def _admit_seed_host(self, url: str) -> None:
        """A seed's host is in scope, and so is the host a seed redirects to."""
        assert self.url_policy is not None
        _, _, host = self.url_policy.check(url)
        if host:
            self.url_policy.add_host(host)

    def next_request(self) -> Request | None:
        assert self.frontier is not None
        now = monotonic()
        lease = self.frontier.next(now)
        if lease is None:
            due = self.frontier.next_due(now)
            if due is not None:
                self.waker.wake_at(due, now)
            return None
        request: Request = lease.entry.payload
        request.meta[LEASE_META] = lease.token
        self._leased[lease.token] = lease.entry.host
        self._stat_inc("frontier/leased")
        return request

    def _fetch_finished(self, request: Request, outcome: str, duration: float | None) -> None:
        token = request.meta.get(LEASE_META)
        if token is None or self._leased.pop(token, None) is None:
            return  # not handed out by this scheduler (engine.download, another crawl)
        assert self.frontier is not None
        self.frontier.complete(token, monotonic(), duration, outcome)
        self._stat_inc(f"frontier/fetch/{outcome}")

    # -- reporting ---------------------------------------------------------------------------------

    def _host_given_up(self, host: str, reason: str, dropped: int) -> None:
        if reason == "host_dead":
            logger.warning(
                "Giving up host %s after %d consecutive failed fetches; %d queued URLs dropped",
                host,
                self.settings.getint("FRONTIER_HOST_MAX_FAILURES", 5),
                dropped,
            )
        else:
            logger.warning(
                "Skipping host %s: its Crawl-delay exceeds FRONTIER_MAX_CRAWL_DELAY (%.0fs); "
                "%d queued URLs dropped",
                host,
                self.settings.getfloat("FRONTIER_MAX_CRAWL_DELAY", 120.0),
                dropped,
            )
        self._stat_inc(f"frontier/hosts_given_up/{reason}")

    def _rejected(self, reason: str, request: Request, seed: bool) -> None:
        self._stat_inc(f"frontier/rejected/{reason}")
        if seed:
            logger.warning("Seed %s rejected: %s", request.url, _REASONS.get(reason, reason))
        elif reason not in self._logged_reasons:
            self._logged_reasons.add(reason)
            logger.info(
                "URL %s rejected: %s (further URLs rejected for this reason are counted in "
                "the stat frontier/rejected/%s)",
                request.url[:300],
                _REASONS.get(reason, reason),
                reason,
            )
        else:
            logger.debug("URL %s rejected: %s", request.url[:300], reason)

    def _stat_inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)

    def _stat_set(self, key: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(key, value)


_REASONS = {
    "invalid_url": "malformed URL",
    "scheme": "not an http or https URL",
    "out_of_scope": "host outside the site's scope",
    "too_deep": "deeper than the site's max_depth",
    "too_long": "longer than the maximum URL length",
    "denied": "matches a deny pattern",
    "not_allowed": "matches no allow pattern",
    "repeated_segments": "a path segment repeats too often (spider trap)",
}
