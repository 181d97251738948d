"""The Scrapy scheduler: a thin adapter over the Mercator frontier (``SCHEDULER`` setting)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from time import monotonic
from typing import Any

from scrapy import Request, Spider
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.request import request_from_dict

from . import signals as crawler_signals
from .backends import build_backend
from .frontier import (
    Entry,
    Frontier,
    Outcome,
    Prioritizer,
    UrlPolicy,
)
from .frontier.urls import origin_of
from .pipelines.neardup import host_penalty_for
from .waker import EngineWaker

logger = logging.getLogger(__name__)

LEASE_META = "frontier_lease"
# Request meta that a plain link carries and that its rebuilt Request gets back.
_PLAIN_META = frozenset({"depth"})
# Decisions that depend on where a link was found: not remembered by the raw-link cache.
_DEPTH_DEPENDENT = frozenset({"too_deep"})
# Never written to JOBDIR with a queued request: middlewares add them again when it is sent.
_SECRET_HEADERS = frozenset({b"authorization", b"proxy-authorization", b"cookie"})


def url_policy_for(spider: Spider, settings: BaseSettings) -> UrlPolicy:
    """The URL policy of a site spider comes from its config; a plain spider is limited to its
    ``allowed_domains`` when it has them. The trap budgets are settings (a site config sets
    them in its ``[settings]`` table)."""
    traps = {
        "max_query_variants": settings.getint("URL_MAX_QUERY_VARIANTS", 100),
        "max_date_future_days": settings.getint("URL_MAX_DATE_DISTANCE_DAYS", 1095),
        "max_date_past_days": settings.getint("URL_MAX_DATE_PAST_DAYS", 10950),
        "max_hosts_per_domain": settings.getint("URL_MAX_HOSTS_PER_DOMAIN", 100),
    }
    site = getattr(spider, "site", None)
    if site is None:
        domains = tuple(getattr(spider, "allowed_domains", None) or ())
        return UrlPolicy(
            domains=domains,
            any_host=not domains,
            max_url_length=settings.getint("URL_MAX_LENGTH", 2048),
            max_repeated_segments=settings.getint("URL_MAX_REPEATED_SEGMENTS", 3),
            **traps,
        )
    return UrlPolicy(
        hosts=site.scope.hosts,
        domains=site.scope.domains,
        allow=site.allow,
        deny=site.deny,
        max_depth=site.max_depth,
        max_url_length=site.max_url_length,
        max_repeated_segments=site.max_repeated_segments,
        **traps,
    )


def is_plain(request: Request) -> bool:
    """A plain link: a GET of the URL with the spider's default callback and nothing else, so
    the frontier keeps only its URL and depth and rebuilds the Request when it is due."""
    return (
        request.method == "GET"
        and request.callback is None
        and request.errback is None
        and not request.body
        and not request.headers
        and not request.cookies
        and not request.cb_kwargs
        and not request.flags
        and request.priority == 0
        and not request.dont_filter
        and request.meta.keys() <= _PLAIN_META
    )


class FrontierScheduler(BaseScheduler):
    """Hands the engine the frontier's next due URL, and tells the frontier when fetches end.

    When every host is waiting out its delay, ``next_request`` returns None and arms a timer for
    the moment the earliest host comes due, so no host waits for the engine's 5-second heartbeat.

    Links arrive two ways: as Requests (seeds, retries, redirects, anything with a callback or
    meta of its own) through ``enqueue_request``, and in bulk from the site spider through the
    ``links_extracted`` signal, which never builds a Request for a link that is not new.

    With ``JOBDIR`` set, the frontier lives in ``JOBDIR/frontier.sqlite``: a stopped crawl goes
    on where it was when run again with the same JOBDIR.

    A crawl ends when nothing is in flight and no queued host is due within
    ``FRONTIER_IDLE_HORIZON`` seconds; hosts still waiting then are reported, not waited for.
    """

    def __init__(self, crawler: Crawler, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        self.settings = crawler.settings
        self.stats: StatsCollector | None = crawler.stats
        self.frontier: Frontier | None = frontier
        self.spider: Spider | None = None
        self.url_policy: UrlPolicy | None = None
        self.prioritizer: Prioritizer | None = None
        self.waker = EngineWaker(crawler)
        self.horizon = self.settings.getfloat("FRONTIER_IDLE_HORIZON", 300.0)
        self.persistent = False
        self._leased: dict[int, str] = {}
        self._logged_reasons: set[str] = set()
        self._origins: set[str] = set()
        self._raw_seen: set[int] = set()
        self._raw_cache_size = self.settings.getint("FRONTIER_LINK_CACHE_SIZE", 1_000_000)
        self._max_depth = 0
        signals = crawler.signals
        signals.connect(self._fetch_finished, crawler_signals.fetch_finished)
        signals.connect(self._host_crawl_delay, crawler_signals.host_crawl_delay)
        signals.connect(self._host_hold, crawler_signals.host_hold)
        signals.connect(self._links_extracted, crawler_signals.links_extracted)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        return cls(crawler)

    def _build_frontier(self) -> Frontier:
        store = build_backend(self.crawler, "FRONTIER_STORE_CLASS")
        self.persistent = store.persistent
        site = getattr(self.spider, "site", None)
        return store.open_frontier(
            max_pages_per_host=getattr(site, "max_pages_per_host", None),
            on_give_up=self._host_given_up,
        )

    def open(self, spider: Spider) -> None:
        self.spider = spider
        if self.frontier is None:
            self.frontier = self._build_frontier()
        self.url_policy = url_policy_for(spider, self.settings)
        for host in self._load_scope_hosts():
            self.url_policy.add_host(host)
        self.prioritizer = Prioritizer(
            self.settings.get("FRONTIER_PRIORITY_POLICY", "depth"),
            self.settings.getint("FRONTIER_FRONT_QUEUES", 8),
            host_penalty=host_penalty_for(self.crawler),  # hosts of mostly near-duplicates
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
        # Only a crawl that ended by itself has hosts "left behind"; a stopped one keeps them
        # queued (and on disk a full scan of the queue would slow the stop down).
        left = frontier.waiting_hosts(now) if reason == "finished" and len(frontier) else []
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
        self._stat_set("frontier/depth_max", self._max_depth)
        for why, n in counts.extra.items():
            self._stat_set(f"frontier/dropped/{why}", n)
        if self.persistent and counts.queued:
            logger.info(
                "%d URLs stay queued in %s; run the crawl again with the same JOBDIR to go on",
                counts.queued,
                self.settings.get("JOBDIR"),
            )
        frontier.close()
        return None

    # -- the engine's side ---------------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        return self.frontier is not None and self.frontier.has_work(monotonic(), self.horizon)

    def enqueue_request(self, request: Request) -> bool:
        assert self.url_policy is not None
        request.meta.pop(LEASE_META, None)  # a retry or redirect copies its parent's meta
        meta = request.meta
        depth = meta.get("depth", 0)
        seed = bool(meta.get("seed"))
        if seed:
            self._admit_seed_host(request.url)
        first = bool(meta.get("frontier_first"))
        # A host's first request (robots.txt) is exempt from the site's URL filters: only a
        # malformed URL or another scheme stops it.
        reason, url, host = self.url_policy.check(request.url, depth, filters=not first)
        if reason:
            self._rejected(reason, request.url, seed)
            return False
        return self._add(
            url,
            host,
            depth,
            self._payload(request),
            request_priority=request.priority,
            force=request.dont_filter or first,
            first=first,
        )

    def _add(
        self,
        url: str,
        host: str,
        depth: int,
        payload: Any,
        *,
        request_priority: int = 0,
        force: bool = False,
        first: bool = False,
    ) -> bool:
        assert self.frontier is not None and self.prioritizer is not None
        if not first:
            self._discover_origin(url, host)
        priority = self.prioritizer.priority(
            depth=depth, host=host, request_priority=request_priority
        )
        result = self.frontier.add(
            Entry(url, host, priority, depth, payload), force=force, first=first
        )
        if not result.added:
            self._stat_inc(f"frontier/rejected/{result.reason}")
            return False
        self._stat_inc("frontier/enqueued")
        if depth > self._max_depth:
            self._max_depth = depth
        return True

    def _links_extracted(self, response: Response, urls: list[str], spider: Spider) -> bool:
        """Take a page's links in bulk: a link seen before (as written, after joining) costs a
        set lookup; only new ones are normalized, filtered and tested against the seen-set, and
        none becomes a Request until it is due."""
        policy = self.url_policy
        if policy is None or spider is not self.spider:
            return False
        depth = response.meta.get("depth", 0) + 1
        raw_seen = self._raw_seen
        if len(raw_seen) > self._raw_cache_size:
            raw_seen.clear()
        repeated = 0
        for raw in urls:
            h = hash(raw)
            if h in raw_seen:
                repeated += 1
                continue
            reason, url, host = policy.check(raw, depth)
            if reason not in _DEPTH_DEPENDENT:
                raw_seen.add(h)
            if reason:
                self._rejected(reason, raw, False)
                continue
            self._add(url, host, depth, None)
        if repeated:
            self._stat_inc("frontier/links_repeated", repeated)
        return True

    def _payload(self, request: Request) -> Any:
        """What the frontier keeps to rebuild the request: nothing for a plain link, the Request
        itself in memory, or its serialized form on disk."""
        if is_plain(request):
            return None
        if self.persistent:
            data = request.to_dict(spider=self.spider)
            data["headers"] = {
                k: v for k, v in data.get("headers", {}).items() if k.lower() not in _SECRET_HEADERS
            }
            return pickle.dumps(data, protocol=5)
        return request

    def _request(self, entry: Entry) -> Request:
        payload = entry.payload
        if payload is None:
            return Request(entry.url, meta={"depth": entry.depth})
        if isinstance(payload, Request):
            return payload
        return request_from_dict(pickle.loads(payload), spider=self.spider)

    def _discover_origin(self, url: str, host: str) -> None:
        """The first URL of an origin lets others (robots.txt) put requests before it."""
        origin = origin_of(url) or url
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

    def _host_hold(self, host: str, seconds: float) -> None:
        if self.frontier is not None:
            now = monotonic()
            self.frontier.hold_host(host, now + seconds)
            self.waker.wake_at(now + seconds, now)

    def _admit_seed_host(self, url: str) -> None:
        """A seed's host is in scope, and so is the host a seed redirects to."""
        assert self.url_policy is not None
        _, _, host = self.url_policy.check(url)
        if host and host not in self.url_policy.hosts:
            self.url_policy.add_host(host)
            self._raw_seen.clear()  # links to that host were remembered as out of scope
            self._save_scope_hosts()

    def _scope_file(self) -> Path | None:
        jobdir = self.settings.get("JOBDIR")
        return Path(jobdir) / "scope-hosts.txt" if jobdir else None

    def _save_scope_hosts(self) -> None:
        """With a JOBDIR, the hosts seeds brought into scope (redirects included) are kept: a
        resumed crawl does not see those redirects again."""
        path = self._scope_file()
        if path is not None and self.url_policy is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(f"{h}\n" for h in sorted(self.url_policy.hosts)))
            tmp.replace(path)

    def _load_scope_hosts(self) -> list[str]:
        path = self._scope_file()
        if path is None or not path.exists():
            return []
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]

    def next_request(self) -> Request | None:
        assert self.frontier is not None
        now = monotonic()
        while True:
            lease = self.frontier.next(now)
            if lease is None:
                due = self.frontier.next_due(now)
                if due is not None:
                    self.waker.wake_at(due, now)
                return None
            try:
                request = self._request(lease.entry)
                break
            except (ValueError, pickle.UnpicklingError) as exc:
                self.frontier.complete(lease.token, now, None, Outcome.NOT_SENT)
                self._rejected("invalid_url", lease.entry.url, False)
                logger.debug("Cannot build a request for %s: %s", lease.entry.url, exc)
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

    def _rejected(self, reason: str, url: str, seed: bool) -> None:
        self._stat_inc(f"frontier/rejected/{reason}")
        if seed:
            logger.warning("Seed %s rejected: %s", url, _REASONS.get(reason, reason))
        elif reason not in self._logged_reasons:
            self._logged_reasons.add(reason)
            logger.info(
                "URL %s rejected: %s (further URLs rejected for this reason are counted in "
                "the stat frontier/rejected/%s)",
                url[:300],
                _REASONS.get(reason, reason),
                reason,
            )

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
