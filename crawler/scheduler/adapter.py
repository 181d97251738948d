"""The Scrapy scheduler: a thin adapter over the Mercator frontier (``SCHEDULER`` setting)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.asyncio import CallLaterResult, call_later, create_looping_call
from scrapy.utils.defer import deferred_from_coro

from crawler import signals as crawler_signals
from crawler.backends.memory import FrontierCallbacks
from crawler.backends.registry import build_backend
from crawler.config import defaults
from crawler.frontier import Entry, Frontier, Outcome, Prioritizer, UrlPolicy
from crawler.frontier.buffered import PENDING
from crawler.frontier.scope import ScopeRegistry
from crawler.frontier.urls import LinkForm, origin_of
from crawler.meta import LEASE_META, STOPPED_META
from crawler.scheduler import codec as frontier_codec
from crawler.scheduler.waker import EngineWaker, engine_holds, running_engine
from crawler.sites.policy import url_policy_for

logger = logging.getLogger(__name__)

_ACK_MIDDLEWARE = "crawler.middlewares.lease.LeaseAckMiddleware"
# Decisions that depend on where a link was found: not remembered by the raw-link cache.
_DEPTH_DEPENDENT = frozenset({"too_deep"})


def lease_ttl_from_settings(settings: BaseSettings) -> float:
    """``FRONTIER_LEASE_TTL``, raised if a fetch with all its retries could outlive it (a lease
    must not expire while its fetch may still be running)."""
    ttl = settings.getfloat("FRONTIER_LEASE_TTL", defaults.FRONTIER_LEASE_TTL)
    attempts = 1 + (settings.getint("RETRY_TIMES", 2) if settings.getbool("RETRY_ENABLED") else 0)
    longest = settings.getfloat("DOWNLOAD_TIMEOUT", 180.0) * attempts
    if ttl <= longest:
        raised = 2 * longest
        logger.warning(
            "FRONTIER_LEASE_TTL (%.0fs) must exceed DOWNLOAD_TIMEOUT x (RETRY_TIMES + 1) "
            "(%.0fs); using %.0fs",
            ttl,
            longest,
            raised,
        )
        ttl = raised
    return ttl


@dataclass(slots=True)
class _LinkBatch:
    """A page's links on their way into the frontier (taken whole, or in slices)."""

    urls: list[str]
    depth: int
    forms: dict[str, LinkForm]
    token: str | None  # the page's lease
    pos: int = 0  # links taken so far


@dataclass(slots=True)
class _Held:
    """A lease this process holds: what the adapter knows of its request's progress."""

    request: Request
    deadline: float  # when the frontier expires it unless renewed (this process's clock)
    started: bool = False  # reached the downloader: may have been sent
    completed: bool = False  # the fetch ended; a response is with the spider or pipelines
    items_expected: int | None = None  # set when the spider's output for the page ended
    items_done: int = 0


class FrontierScheduler(BaseScheduler):
    """Hands the engine the frontier's next due URL, and tells the frontier when fetches end.

    When every host is waiting out its delay, ``next_request`` returns None and arms a timer for
    the moment the earliest host comes due, so no host waits for the engine's 5-second heartbeat.

    Links arrive two ways: as Requests (seeds, retries, redirects, anything with a callback or
    meta of its own) through ``enqueue_request``, and in bulk from the site spider through the
    ``links_extracted`` signal, which never builds a Request for a link that is not new.

    With ``JOBDIR`` set, the frontier lives in ``JOBDIR/frontier.sqlite``: a stopped crawl goes
    on where it was when run again with the same JOBDIR.

    A crawl ends when no lease is open and no queued host is due within
    ``FRONTIER_IDLE_HORIZON`` seconds; hosts still waiting then are reported, not waited for.

    Leases: a handed-out request carries its lease token in ``meta[LEASE_META]``. When its fetch
    ends (``fetch_finished``) the lease is completed (the host's slot rests); it is acknowledged
    (the URL forgotten, on disk for good) when nothing of the fetch is left to process: at once
    for a fetch without a response for the spider (failure, denial, retry, redirect), else
    once the spider's output for the page has ended (``LeaseAckMiddleware``, or
    ``spider_error``) and every item it yielded has left the pipelines. Every
    ``FRONTIER_LEASE_TTL / 3`` seconds the leases the engine still works on are renewed, and
    one the engine is done with but that was never acknowledged is acknowledged then; the
    frontier expires the rest (their URLs come back).
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
        self.horizon = self.settings.getfloat(
            "FRONTIER_IDLE_HORIZON", defaults.FRONTIER_IDLE_HORIZON
        )
        self.persistent = False
        self.scope = ScopeRegistry()
        self.lease_ttl = lease_ttl_from_settings(self.settings)
        self._held: dict[str, _Held] = {}
        self._renewal: Any = None
        self._logged_reasons: set[str] = set()
        self._origins: set[str] = set()
        self._raw_seen: set[int] = set()
        self._raw_cache_size = self.settings.getint(
            "FRONTIER_LINK_CACHE_SIZE", defaults.FRONTIER_LINK_CACHE_SIZE
        )
        self._max_depth = 0
        # Links of big pages not yet taken (see _drain), oldest first; the pages' lease tokens
        # with how many of their batches wait, and those whose acknowledgement waits for them.
        self._slice = max(1, self.settings.getint(
            "FRONTIER_LINK_SLICE", defaults.FRONTIER_LINK_SLICE
        ))
        self._backlog: deque[_LinkBatch] = deque()
        self._backlog_pages: dict[str, int] = {}
        self._ack_waiting: set[str] = set()
        self._drain_call: CallLaterResult | None = None
        self._later: Callable[..., CallLaterResult] | None = None  # call_later in a crawl
        self._ending = False  # closing because of the operator's deadline or byte budget
        connect = crawler.signals.connect
        connect(self._fetch_finished, crawler_signals.fetch_finished)
        connect(self._host_crawl_delay, crawler_signals.host_crawl_delay)
        connect(self._host_hold, crawler_signals.host_hold)
        connect(self._links_extracted, crawler_signals.links_extracted)
        connect(self._link_preparer, crawler_signals.link_preparer_wanted)
        connect(self._request_reached_downloader, signals.request_reached_downloader)
        connect(self._page_output_done, crawler_signals.page_output_done)
        connect(self._spider_error, signals.spider_error)
        for item_signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            connect(self._item_done, item_signal)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        return cls(crawler)

    def _build_frontier(self) -> Frontier:
        store = build_backend(self.crawler, "FRONTIER_STORE_CLASS")
        self.persistent = store.persistent
        self.scope = store.scope()
        site = getattr(self.spider, "site", None)
        return store.open_frontier(
            lease_ttl=self.lease_ttl,
            max_pages_per_host=getattr(site, "max_pages_per_host", None),
            callbacks=FrontierCallbacks(
                on_give_up=self._host_given_up,
                notify=self._frontier_news,
                on_added=self._added,
                on_seeds=self._seeds_arrived,
                on_scope=self._scope_arrived,
            ),
        )

    def _host_penalty(self) -> Callable[[str], int] | None:
        """Whoever judges hosts (the near-duplicate pipeline) answers ``host_penalty_wanted``."""
        results = self.crawler.signals.send_catch_log(crawler_signals.host_penalty_wanted)
        return next((r for _, r in results if callable(r)), None)

    def open(self, spider: Spider) -> None:
        self.spider = spider
        if self.frontier is None:
            self.frontier = self._build_frontier()
        self.url_policy = url_policy_for(spider, self.settings)
        for host in self.scope.load():
            self.url_policy.add_host(host)
        # hosts admitted by an earlier run (JOBDIR) or other workers: the per-domain budget
        self.url_policy.restore_hosts(self.frontier.hosts())
        self.prioritizer = Prioritizer(
            self.settings.get("FRONTIER_PRIORITY_POLICY", defaults.FRONTIER_PRIORITY_POLICY),
            self.settings.getint("FRONTIER_FRONT_QUEUES", defaults.FRONTIER_FRONT_QUEUES),
            host_penalty=self._host_penalty(),  # hosts of mostly near-duplicates
        )
        self.crawler.signals.send_catch_log(
            crawler_signals.frontier_opened, frontier=self.frontier, spider=spider
        )
        if self.settings.getwithbase("SPIDER_MIDDLEWARES").get(_ACK_MIDDLEWARE) is None:
            logger.warning(
                "%s is not enabled: a page that yields no item is acknowledged to the frontier "
                "only by the lease renewal, up to FRONTIER_LEASE_TTL / 3 seconds late",
                _ACK_MIDDLEWARE,
            )
        if running_engine(self.crawler) is not None:  # else (unit tests) call renew_leases
            self._later = call_later  # else links are taken whole (nothing runs a later turn)
            self._renewal = create_looping_call(self.renew_leases)
            self._renewal.start(self.lease_ttl / 3, now=False)
        return None

    def close(self, reason: str) -> None:
        self.waker.cancel()
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()
        frontier = self.frontier
        if frontier is None:
            return None
        self._flush_links()  # before anything is released, counted or saved
        if reason != "finished":
            # a clean stop (Ctrl-C, the operator's deadline): what never reached the
            # downloader goes back at once (no delay, no wait for its lease to expire)
            unstarted = [t for t, held in self._held.items() if not held.started]
            if unstarted:
                self._stat_set("frontier/leases_released_at_close", frontier.release(unstarted))
        # Only a crawl that ended by itself has hosts "left behind"; a stopped one keeps them
        # queued (and on disk a full scan of the queue would slow the stop down).
        left = frontier.waiting_hosts() if reason == "finished" and len(frontier) else []
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
        counts = frontier.counts()
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
        frontier = self.frontier
        if frontier is None:
            return False
        halt = frontier.halted()
        if halt in _OPERATOR_ENDS and not self._ending:
            self._end_by_operator(halt)
        # links still to take (see _drain): the crawl is not idle
        return bool(self._backlog) or frontier.has_work(self.horizon)

    def _end_by_operator(self, halt: str) -> None:
        """The operator's deadline passed or the byte budget is spent (``scrapy frontier``):
        this worker closes its crawl with that reason; what it holds unstarted goes back."""
        self._ending = True
        engine = running_engine(self.crawler)
        if engine is None:
            return
        logger.warning("Crawl ends: %s (set with scrapy frontier)", _OPERATOR_ENDS[halt])
        call_later(0, lambda: deferred_from_coro(engine.close_spider_async(reason=halt)))

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
            frontier_codec.encode(request, self.spider, serialize=self.persistent),
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
        assert self.frontier is not None
        entry = self._entry(url, host, depth, payload, request_priority, first)
        result = self.frontier.add(entry, force=force, first=first)
        return self._counted(entry, result, depth)

    def _entry(
        self,
        url: str,
        host: str,
        depth: int,
        payload: Any,
        request_priority: int,
        first: bool,
        origin: str | None = None,
    ) -> Entry:
        assert self.prioritizer is not None
        if not first:
            self._discover_origin(url, host, origin)
        priority = self.prioritizer.priority(
            depth=depth, host=host, request_priority=request_priority
        )
        return Entry(url, host, priority, depth, payload)

    def _counted(self, entry: Entry, result: Any, depth: int) -> bool:
        if result.reason != PENDING:  # a shared frontier answers later, through _added
            self._count_added(entry, result.added, result.reason)
        if not result.added:
            return False
        if depth > self._max_depth:
            self._max_depth = depth
        return True

    def _count_added(self, entry: Entry, added: bool, reason: str) -> None:
        if added:
            self._stat_inc("frontier/enqueued")
        elif reason == "seen":
            self._stat_inc("frontier/rejected/seen")  # the common case: no log line
        else:
            if reason == "host_budget":  # kept for a rerun with a larger budget
                self.crawler.signals.send_catch_log(
                    crawler_signals.url_over_budget, url=entry.url, depth=entry.depth
                )
            self._rejected(reason, entry.url, False)  # page budget, given-up host: said once

    def _added(self, entries: list[Entry], results: list[Any]) -> None:
        """A shared frontier's answers to queued adds."""
        for entry, result in zip(entries, results, strict=True):
            self._count_added(entry, result.added, result.reason)

    def _frontier_news(self) -> None:
        """A shared frontier has leases ready: ask the engine for requests now."""
        now = monotonic()
        self.waker.wake_at(now, now)

    def _seeds_arrived(self, urls: list[str]) -> None:
        """Seeds pushed while the crawl runs (a shared frontier's ``<site>:start_urls``)."""
        if self.spider is None:
            return
        for url in urls:
            try:
                request = Request(url, meta={"seed": True})
            except ValueError:
                self._rejected("invalid_url", url, True)
                continue
            self._stat_inc("frontier/seeds_pushed")
            self.enqueue_request(request)

    def _scope_arrived(self, hosts: set[str]) -> None:
        """Hosts other workers brought into scope (their seeds and seed redirects)."""
        policy = self.url_policy
        if policy is None:
            return
        new = hosts - set(policy.hosts)
        for host in new:
            policy.add_host(host)
        if new:
            self._raw_seen.clear()  # links to those hosts were remembered as out of scope

    def _link_preparer(self) -> Callable[[list[str]], dict[str, LinkForm]] | None:
        """Answer to ``link_preparer_wanted``: the spider prepares its pages' links on the
        content thread with :meth:`prepare_links`."""
        return self.prepare_links if self.url_policy is not None else None

    def prepare_links(self, urls: list[str]) -> dict[str, LinkForm]:
        """The stateless part of taking ``urls`` (:meth:`UrlPolicy.link_form`: canonical form,
        host, origin, the fixed filters' verdict) for the links :meth:`_links_extracted` will
        not find in its raw-link cache.

        Called on the content thread while the reactor may be taking other pages' links: it
        only tests the cache (a set membership test is atomic under the GIL) and reads the
        URL length limit. A link the cache takes in meanwhile is prepared for nothing; one the
        cache forgets meanwhile (cleared when full or when the scope grows) is normalized on the
        reactor: the forms are a shortcut, never a verdict of their own, so the crawl queues
        and counts the same with or without them.
        """
        policy = self.url_policy
        if policy is None:
            return {}
        raw_seen = self._raw_seen
        longest = policy.max_url_length
        link_form = policy.link_form
        return {
            raw: link_form(raw)
            for raw in urls
            if len(raw) <= longest and hash(raw) not in raw_seen
        }

    def _links_extracted(
        self,
        response: Response,
        urls: list[str],
        spider: Spider,
        demote: int = 0,
        forms: dict[str, LinkForm] | None = None,
    ) -> bool:
        """Take a page's links in bulk: a link seen before (as written, after joining) costs a
        set lookup; only new ones are normalized, filtered and tested against the seen-set, and
        none becomes a Request until it is due. ``demote`` levels are added to their depth (a
        duplicate page's links: lower priority, and the site's max_depth sooner). ``forms``:
        :meth:`prepare_links`' answer for these links, computed on the content thread, so
        that here only the stateful part is left (scope, trap budgets, seen-test, queue)."""
        policy = self.url_policy
        if policy is None or spider is not self.spider:
            return False
        depth = response.meta.get("depth", 0) + 1 + demote
        if demote:
            self._stat_inc("frontier/links_demoted", len(urls))
        batch = _LinkBatch(urls, depth, forms or {}, response.meta.get(LEASE_META))
        if not self._backlog and (self._later is None or len(urls) <= self._slice):
            self._take(batch, len(urls))
            return True
        # A page of thousands of new links: a slice now, the rest in later reactor turns, after
        # the links of pages that came before it (the order of the seen-test stays the pages').
        self._backlog.append(batch)
        if batch.token is not None:
            self._backlog_pages[batch.token] = self._backlog_pages.get(batch.token, 0) + 1
        if self._drain_call is None:
            self._drain()
        return True

    def _take(self, batch: _LinkBatch, budget: int) -> int:
        """Take up to ``budget`` of ``batch``'s links from where it stands; returns how many."""
        policy = self.url_policy
        assert policy is not None
        raw_seen = self._raw_seen
        if batch.pos == 0 and len(raw_seen) > self._raw_cache_size:
            raw_seen.clear()  # once a page, as when pages were taken whole
        urls, depth, forms = batch.urls, batch.depth, batch.forms
        part = urls[batch.pos : batch.pos + budget] if batch.pos or budget < len(urls) else urls
        batch.pos += len(part)
        repeated = 0
        entries = []
        for raw in part:
            h = hash(raw)
            if h in raw_seen:
                repeated += 1
                continue
            form = forms.get(raw)
            reason, url, host = policy.check(raw, depth, form=form)
            if reason not in _DEPTH_DEPENDENT:
                raw_seen.add(h)
            if reason:
                self._rejected(reason, raw, False)
                continue
            origin = form[3] if form is not None else None
            entries.append(self._entry(url, host, depth, None, 0, False, origin))
        if entries:
            assert self.frontier is not None
            # one call for the page's links: one round trip (per 1,000) to a shared frontier
            for entry, result in zip(entries, self.frontier.add_many(entries), strict=True):
                self._counted(entry, result, depth)
        if repeated:
            self._stat_inc("frontier/links_repeated", repeated)
        return len(part)

    def _drain(self, everything: bool = False) -> None:
        """Take ``FRONTIER_LINK_SLICE`` links of the backlog (all of it with ``everything``)
        and come back in the next reactor turn for the rest: a page of 5,000 new links costs
        the reactor 30-200 ms in one piece; in slices, due hosts are served in between."""
        self._drain_call = None
        backlog = self._backlog
        budget = self._slice
        while backlog and (everything or budget > 0):
            batch = backlog[0]
            budget -= self._take(batch, len(batch.urls) if everything else budget)
            if batch.pos >= len(batch.urls):
                backlog.popleft()
                self._batch_done(batch)
        if backlog and self._later is not None:
            self._drain_call = self._later(0, self._drain)

    def _batch_done(self, batch: _LinkBatch) -> None:
        """All of a page's links are in the frontier: its lease may be acknowledged now."""
        token = batch.token
        if token is None:
            return
        left = self._backlog_pages.pop(token, 1) - 1
        if left:
            self._backlog_pages[token] = left
        elif token in self._ack_waiting:
            self._ack_waiting.discard(token)
            assert self.frontier is not None
            self.frontier.ack(token)

    def _flush_links(self) -> None:
        """Take the whole backlog now (the crawl closes: nothing may stay behind)."""
        if self._drain_call is not None:
            self._drain_call.cancel()
            self._drain_call = None
        if self._backlog:
            self._drain(everything=True)

    def _discover_origin(self, url: str, host: str, origin: str | None = None) -> None:
        """The first URL of an origin lets others (robots.txt) put requests before it.
        ``origin``: ``origin_of(url) or url``, when :meth:`UrlPolicy.link_form` computed it."""
        if origin is None:
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
            self.frontier.hold_host(host, seconds)
            now = monotonic()
            self.waker.wake_at(now + seconds, now)

    def _admit_seed_host(self, url: str) -> None:
        """A seed's host is in scope, and so is the host a seed redirects to."""
        assert self.url_policy is not None
        _, _, host = self.url_policy.check(url)
        if host and host not in self.url_policy.hosts:
            self.url_policy.add_host(host)
            self._raw_seen.clear()  # links to that host were remembered as out of scope
            self.scope.add(host)

    def next_request(self) -> Request | None:
        frontier = self.frontier
        assert frontier is not None
        while True:
            lease = frontier.next()
            if lease is None:
                due_in = frontier.due_in()
                if due_in is not None:
                    now = monotonic()
                    self.waker.wake_at(now + due_in, now)
                return None
            try:
                request = frontier_codec.decode(lease.entry, self.spider)
                break
            except (ValueError, frontier_codec.PayloadError) as exc:
                frontier.finish(lease.token, None, Outcome.NOT_SENT)
                self._rejected("invalid_url", lease.entry.url, False)
                logger.debug("Cannot build a request for %s: %s", lease.entry.url, exc)
        request.meta[LEASE_META] = lease.token
        self._held[lease.token] = _Held(request, monotonic() + frontier.lease_ttl)
        self._stat_inc("frontier/leased")
        return request

    # -- the lease lifecycle -------------------------------------------------------------------

    def _held_for(self, meta: dict[str, Any]) -> tuple[str, _Held] | tuple[None, None]:
        token = meta.get(LEASE_META)
        held = self._held.get(token) if token is not None else None
        return (token, held) if held is not None else (None, None)

    def _request_reached_downloader(self, request: Request) -> None:
        _, held = self._held_for(request.meta)
        if held is not None:
            held.started = True

    def _fetch_finished(
        self,
        request: Request,
        outcome: Outcome,
        duration: float | None,
        response: Response | None = None,
    ) -> None:
        token, held = self._held_for(request.meta)
        if held is None or held.completed:
            return  # not handed out by this scheduler (engine.download, another crawl)
        assert self.frontier is not None and token is not None
        if request.meta.get(STOPPED_META):
            # cut short by a stop: back to the frontier (not completed, not acknowledged), so
            # a resumed crawl or another worker fetches it; the host rests its delay first
            del self._held[token]
            self.frontier.release([token], rest=True)
            self._stat_inc("frontier/leases_released_at_stop")
            return
        held.completed = True
        size = len(response.body) if response is not None else 0  # for a byte budget
        self.frontier.complete(token, duration, outcome, size=size)
        self._stat_inc(f"frontier/fetch/{outcome}")
        if response is None:
            self._ack(token)  # nothing of this fetch goes to the spider

    def _page_output_done(self, response: Response, items: int) -> None:
        token, held = self._held_for(response.meta)
        if held is None or held.items_expected is not None:
            return
        held.items_expected = items
        if held.items_done >= items:
            self._ack(token)

    def _spider_error(self, failure: Any, response: Any, spider: Spider) -> None:
        """The callback (or a middleware before it) raised and nothing handled it: the spider
        yields nothing more for this page."""
        if isinstance(response, Response):
            self._page_output_done(response, 0)

    def _item_done(self, item: Any, response: Any = None) -> None:
        if not isinstance(response, Response):
            return  # an item not from a page (or from an errback: acked at fetch_finished)
        token, held = self._held_for(response.meta)
        if held is None:
            return
        held.items_done += 1
        if held.items_expected is not None and held.items_done >= held.items_expected:
            self._ack(token)

    def _ack(self, token: str) -> None:
        assert self.frontier is not None
        self._held.pop(token, None)
        if token in self._backlog_pages:
            # some of the page's links wait in the backlog: acknowledged once they are added,
            # so a stop or a lost worker never forgets a page whose links were not queued
            self._ack_waiting.add(token)
            return
        self.frontier.ack(token)

    def renew_leases(self) -> None:
        """The safety net: keep alive the leases the engine still works on; acknowledge those
        the engine is done with (a path that sent no signal we know of, stat
        ``frontier/acked_late``); let the frontier expire the rest."""
        frontier = self.frontier
        if frontier is None:
            return
        now = monotonic()
        alive = []
        for token, held in list(self._held.items()):
            holds = engine_holds(self.crawler, held.request)
            if holds is None or holds:
                alive.append(token)
                held.deadline = now + frontier.lease_ttl
            elif held.completed:
                self._ack(token)
                self._stat_inc("frontier/acked_late")
            elif held.deadline <= now:
                del self._held[token]  # expired: its URL is back in the frontier
        if alive:
            frontier.renew(alive)
        expired = frontier.expire()
        if expired:
            self._stat_inc("frontier/leases_expired", expired)
            logger.warning("%d leases expired: their URLs are queued again", expired)

    # -- reporting ---------------------------------------------------------------------------------

    def _host_given_up(self, host: str, reason: str, dropped: int) -> None:
        if reason == "host_dead":
            ratio = self.settings.getfloat(
                "FRONTIER_HOST_MAX_FAILURE_RATIO", defaults.FRONTIER_HOST_MAX_FAILURE_RATIO
            )
            logger.warning(
                "Giving up host %s after %d failed fetches in a row or %s%% of its last %d "
                "(FRONTIER_HOST_MAX_FAILURES, FRONTIER_HOST_MAX_FAILURE_RATIO); "
                "%d queued URLs dropped",
                host,
                self.settings.getint(
                    "FRONTIER_HOST_MAX_FAILURES", defaults.FRONTIER_HOST_MAX_FAILURES
                ),
                f"{100 * ratio:g}",
                self.settings.getint(
                    "FRONTIER_HOST_FAILURE_WINDOW", defaults.FRONTIER_HOST_FAILURE_WINDOW
                ),
                dropped,
            )
        else:
            logger.warning(
                "Skipping host %s: its Crawl-delay exceeds FRONTIER_MAX_CRAWL_DELAY (%.0fs); "
                "%d queued URLs dropped",
                host,
                self.settings.getfloat(
                    "FRONTIER_MAX_CRAWL_DELAY", defaults.FRONTIER_MAX_CRAWL_DELAY
                ),
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


_OPERATOR_ENDS = {
    "deadline": "the operator's deadline has passed",
    "byte_budget": "the operator's byte budget is spent",
}

_REASONS = {
    "host_blocked": "the operator blocked the host (scrapy frontier block)",
    "invalid_url": "malformed URL",
    "scheme": "not an http or https URL",
    "out_of_scope": "host outside the site's scope",
    "too_deep": "deeper than the site's max_depth",
    "too_long": "longer than the maximum URL length",
    "denied": "matches a deny pattern",
    "not_allowed": "matches no allow pattern",
    "repeated_segments": "a path segment repeats too often (spider trap)",
    "query_variants": "too many query variants of one path (URL_MAX_QUERY_VARIANTS)",
    "date_distance": "a date in the path far from today (calendar trap)",
    "domain_hosts": "too many hosts of one registered domain (URL_MAX_HOSTS_PER_DOMAIN)",
    "host_budget": "the host's page budget is used up (max_pages_per_host)",
    "host_dead": "the host was given up after failed fetches",
    "host_skipped": "the host asks for a Crawl-delay over FRONTIER_MAX_CRAWL_DELAY",
}
