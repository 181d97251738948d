"""The Scrapy scheduler: a thin adapter over the Mercator frontier (``SCHEDULER`` setting).

It plugs into Scrapy what has a module of its own: :class:`~crawler.scheduler.admission.Admission`
(URL policy, scope, prioritizer), :class:`~crawler.scheduler.intake.LinkIntake` (pages' links in
bulk), :class:`~crawler.scheduler.leases.LeaseTracker` (leases from hand-out to
acknowledgement), :class:`~crawler.scheduler.stats.FrontierStats` (counts and log lines), the
request codec and the engine waker.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.spidermiddlewares.referer import RefererMiddleware
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import deferred_from_coro

from crawler import signals as crawler_signals
from crawler.backends.registry import build_backend
from crawler.frontier import Frontier, Outcome, Prioritizer
from crawler.frontier.api import FrontierCallbacks
from crawler.frontier.config import FrontierConfig
from crawler.frontier.mercator import FRONT_QUEUES
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.scope import ScopeRegistry
from crawler.frontier.urls import LinkForm
from crawler.meta import CASH_META, LEASE_META, POLICY_META, REQUISITE_META, found_on
from crawler.scheduler import codec as frontier_codec
from crawler.scheduler.address_gate import AddressGate
from crawler.scheduler.admission import Admission
from crawler.scheduler.intake import LinkIntake
from crawler.scheduler.leases import Backlog, LeaseTracker, lease_ttl_from_settings
from crawler.scheduler.requisites import RequisiteGate
from crawler.scheduler.stats import FrontierStats
from crawler.scheduler.waker import EngineWaker, engine_holds, running_engine

__all__ = ["FrontierScheduler", "lease_ttl_from_settings"]

logger = logging.getLogger(__name__)

_ACK_MIDDLEWARE = "crawler.middlewares.lease.LeaseAckMiddleware"
_DNS_MIDDLEWARE = "crawler.middlewares.dns.DnsMiddleware"
_OPERATOR_ENDS = {
    "deadline": "the operator's deadline has passed",
    "byte_budget": "the operator's byte budget is spent",
}


class FrontierScheduler(BaseScheduler):
    """Hands the engine the frontier's next due URL, and tells the frontier when fetches end.

    When every host is waiting out its delay, ``next_request`` returns None and arms a timer for
    the moment the earliest host comes due, so no host waits for the engine's 5-second heartbeat.

    Links arrive two ways: as Requests (seeds, retries, redirects, anything with a callback or
    meta of its own) through ``enqueue_request``, and in bulk from the site spider through the
    ``links_extracted`` signal (see ``crawler.scheduler.intake``).

    With ``JOBDIR`` set, the frontier lives in ``JOBDIR/frontier.sqlite``: a stopped crawl goes
    on where it was when run again with the same JOBDIR.

    A crawl ends when no lease is open and no queued host is due within
    ``TUNING``'s ``idle_horizon`` seconds; hosts still waiting then are reported, not waited
    for.

    While the pages fetched and not yet acknowledged reach ``FRONTIER_MAX_BACKLOG`` (or
    ``TUNING``'s ``max_backlog_bytes``), ``next_request`` hands out nothing (see
    ``crawler.scheduler.leases``), so a killed worker leaves little fetched work behind.
    """

    def __init__(self, crawler: Crawler, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        self.settings = s = crawler.settings
        self.config = config = FrontierConfig.from_settings(s)
        self.frontier: Frontier | None = frontier
        self.spider: Spider | None = None
        self.stats = FrontierStats(
            crawler.stats, politeness_from_settings(s), over_budget=self._over_budget
        )
        self.prioritizer = Prioritizer(config.priority_policy, FRONT_QUEUES)
        self.admission: Admission | None = None
        self.intake: LinkIntake | None = None
        self.leases: LeaseTracker | None = None
        self.address_gate: AddressGate | None = None
        self.requisites: RequisiteGate | None = None
        self.waker = EngineWaker(crawler)
        self.horizon = config.idle_horizon
        given = (s.getpriority("FRONTIER_LEASE_TTL") or 0) > SETTINGS_PRIORITIES["project"]
        self.lease_ttl = lease_ttl_from_settings(s, config.lease_ttl, given)
        self.persistent = False
        self.shared = False  # a shared frontier (Redis): never waited for on this thread
        self._on_reactor: Any = lambda fn, *args: fn(*args)  # a call from a frontier's thread
        self.referer = _referer_policy(s)
        self._join_until = 0.0  # a shared crawl not begun yet: wait for its first URLs until
        self._join_logged = False
        self._renewal: Any = None
        self._ending = False  # closing because of the operator's deadline or byte budget
        self._ending_by_engine = False  # ... and the engine was asked to close with it
        connect = crawler.signals.connect
        connect(self._fetch_finished, crawler_signals.fetch_finished)
        connect(self._host_crawl_delay, crawler_signals.host_crawl_delay)
        connect(self._host_hold, crawler_signals.host_hold)
        connect(self._host_resolved, crawler_signals.host_resolved)
        connect(self._links_extracted, crawler_signals.links_extracted)
        connect(self._seeds_found, crawler_signals.seeds_found)
        connect(self.prioritizer.set_penalty, crawler_signals.host_penalty_changed)
        connect(self._spider_error, signals.spider_error)
        for item_signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            connect(self._item_done, item_signal)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        return cls(crawler)

    def _over_budget(self, url: str, depth: int) -> None:
        self.crawler.signals.send_catch_log(crawler_signals.url_over_budget, url=url, depth=depth)

    def _open_frontier(self, spider: Spider) -> tuple[Frontier, ScopeRegistry]:
        store = build_backend(self.crawler, "frontier_store")
        self.persistent = store.persistent
        self.shared = store.shared
        if store.shared:
            self._join_until = monotonic() + self.config.join_wait
        site = getattr(spider, "site", None)
        frontier = store.open_frontier(
            lease_ttl=self.lease_ttl,
            max_pages_per_host=getattr(site, "max_pages_per_host", None),
            callbacks=FrontierCallbacks(
                on_give_up=self.stats.host_given_up,
                notify=self.waker.wake_now,
                on_added=self.stats.answered_many,
                on_completed=self._completed_later,
                on_seeds=self._seeds_arrived,
                on_scope=self._scope_arrived,
            ),
        )
        return frontier, store.scope()

    def open(self, spider: Spider) -> None:
        self.spider = spider
        if self.frontier is None:
            self.frontier, scope = self._open_frontier(spider)
        else:
            scope = ScopeRegistry()
        frontier = self.frontier
        self.admission = Admission.build(
            spider,
            self.settings,
            frontier,
            scope,
            self.prioritizer,
            self._origin_discovered,
            self._origins_discovering,
            shared=self.shared,
        )
        running = running_engine(self.crawler) is not None  # else: unit tests
        self._on_reactor = _on_reactor(lambda fn, *args: fn(*args), running)
        hosts_later = getattr(frontier, "hosts_later", None)
        if self.shared and hosts_later is not None:  # once the shared frontier is open
            hosts_later(_on_reactor(self.admission.policy.restore_hosts, running))
        s = self.settings
        rule = getattr(getattr(spider, "site", None), "requisites", None)
        self.requisites = RequisiteGate(rule.deny if rule is not None else ())
        self.intake = LinkIntake(
            self.admission,
            frontier,
            self.stats,
            slice_size=self.config.link_slice,
            later=call_later if running else None,  # else pages are taken whole
        )
        backlog = Backlog(
            self.stats,
            max_pages=self.config.max_backlog,
            max_bytes=self.config.max_backlog_bytes,
            # drained: ask the engine at once, not at its next download or 5-second heartbeat
            drained=self.waker.wake_now if running else None,
        )
        self.leases = LeaseTracker(
            frontier,
            self.stats,
            ack=self.intake.ack,
            completed=self._fetch_completed,
            engine_holds=lambda request: engine_holds(self.crawler, request),
            backlog=backlog,
        )
        # politeness per server address needs names resolved where the scheduler hears them
        if s.getwithbase("DOWNLOADER_MIDDLEWARES").get(_DNS_MIDDLEWARE) is not None:
            self.address_gate = AddressGate(
                frontier,
                build_backend(self.crawler, "address_budget", ttl=self.lease_ttl),
                want=self._want_address,
                inc=self.stats.inc,
            )
        connect = self.crawler.signals.connect
        connect(self.leases.reached_downloader, signals.request_reached_downloader)
        connect(self.leases.page_output_done, crawler_signals.page_output_done)
        self.crawler.signals.send_catch_log(
            crawler_signals.frontier_opened, frontier=frontier, spider=spider
        )
        if s.getwithbase("SPIDER_MIDDLEWARES").get(_ACK_MIDDLEWARE) is None:
            logger.warning(
                "%s is not enabled: a page that yields no item is acknowledged to the frontier "
                "only by the lease renewal, up to FRONTIER_LEASE_TTL / 3 seconds late",
                _ACK_MIDDLEWARE,
            )
        if running:  # else (unit tests) call renew_leases
            self._renewal = create_looping_call(self.renew_leases)
            self._renewal.start(self.lease_ttl / 3, now=False)

    def close(self, reason: str) -> None:
        self.waker.cancel()
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()
        frontier = self.frontier
        if frontier is None:
            return
        assert self.intake is not None and self.leases is not None
        self.intake.flush()  # before anything is released, counted or saved
        final = getattr(frontier, "final_reports", None)
        if final is not None:
            final()  # the closing stats: fresh answers, waited for a bounded time
        self.leases.backlog.report()
        if reason != "finished":
            # a clean stop (Ctrl-C, the operator's deadline): what never reached the
            # downloader goes back at once (no delay, no wait for its lease to expire)
            unstarted = self.leases.unstarted()
            if unstarted:
                self.stats.set("frontier/leases_released_at_close", frontier.release(unstarted))
        finished = reason == "finished"
        jobdir = self.settings.get("JOBDIR")
        self.stats.closing(frontier, finished, self.horizon, self.persistent, jobdir)
        if self.address_gate is not None:
            busiest = self.address_gate.budget.busiest(5)
            if busiest:  # names of one server: which addresses held the most
                self.stats.set(
                    "frontier/address/busiest",
                    [f"{a.address}: {a.fetches} fetches, {a.refusals} waits" for a in busiest],
                )
            self.address_gate.close()
        frontier.close()

    # -- the engine's side ---------------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        frontier = self.frontier
        if frontier is None or self.intake is None:
            return False
        refused = getattr(frontier, "refused", "")
        if refused:
            if not self._ending:
                self._end(f"the shared frontier refused the crawl: {refused}", "frontier_refused")
            if self._ending_by_engine:
                return True
        halt = frontier.halted()
        if halt in _OPERATOR_ENDS:
            if not self._ending:
                self._end_by_operator(halt)
            if self._ending_by_engine:
                return True  # not idle: the close with the operator's reason is on its way
        return (
            self.intake.pending or frontier.has_work(self.horizon) or self._waiting_to_join()
        )

    def _waiting_to_join(self) -> bool:
        """A worker started before the one that brings the seeds finds the shared crawl empty:
        it waits (``TUNING``'s ``join_wait``) for URLs instead of ending it as "finished"."""
        if not self._join_until:
            return False
        assert self.frontier is not None
        if monotonic() >= self._join_until or self.frontier.counts().seen:
            self._join_until = 0.0
            return False
        if not self._join_logged:
            self._join_logged = True
            logger.info(
                "The shared crawl holds no URL yet: waiting up to %.0f s for the worker that "
                "brings its seeds (TUNING's join_wait)",
                self._join_until - monotonic(),
            )
        return True

    def _end_by_operator(self, halt: str) -> None:
        """The operator's deadline passed or the byte budget is spent (``scrapy frontier``):
        this worker closes its crawl with that reason; what it holds unstarted goes back."""
        self._end(f"{_OPERATOR_ENDS[halt]} (set with scrapy frontier)", halt)

    def _end(self, why: str, reason: str) -> None:
        self._ending = True
        engine = running_engine(self.crawler)
        if engine is None:
            return
        self._ending_by_engine = True
        log = logger.error if reason == "frontier_refused" else logger.warning
        log("Crawl ends: %s", why)
        call_later(0, lambda: deferred_from_coro(engine.close_spider_async(reason=reason)))

    def enqueue_request(self, request: Request) -> bool:
        admission, frontier = self.admission, self.frontier
        assert admission is not None and frontier is not None
        request.meta.pop(LEASE_META, None)  # a retry or redirect copies its parent's meta
        meta = request.meta
        depth = meta.get("depth", 0)
        seed = bool(meta.get("seed"))
        if seed and admission.admit_seed_host(request.url):
            self._scope_grew()
        first = bool(meta.get("frontier_first"))
        # A page requisite (crawler.scheduler.requisites) asks for a seen-test of its own
        requisite = bool(meta.get(REQUISITE_META)) and not first and not request.dont_filter
        # A host's first request (robots.txt) and a page requisite are exempt from the site's
        # URL filters: only a malformed URL or another scheme stops them.
        reason, url, host, canonical = admission.policy.check(
            request.url, depth, filters=not (first or meta.get(REQUISITE_META))
        )
        if not reason and requisite and self.requisites is not None:
            reason = self.requisites.refusal(canonical)
        if reason:
            self.stats.rejected(reason, request.url, seed)
            return False
        # a shared frontier claims it on its worker thread (add_unseen), answering later
        add_unseen = getattr(frontier, "add_unseen", None) if requisite else None
        if requisite and self.requisites is not None:
            if add_unseen is not None:
                if not self.requisites.remember(canonical):
                    self.stats.inc("requisites/seen")
                    return False
            elif not self.requisites.claim(frontier, canonical):
                self.stats.inc("requisites/seen")
                return False
            else:
                self.stats.inc("requisites/queued")
        payload = frontier_codec.encode(request, self.spider, serialize=self.persistent)
        # OPIC cash and crawl policy: a seed starts them, a retry or redirect keeps its own
        cash, label = meta.get(CASH_META, 0.0), meta.get(POLICY_META, "")
        if seed and not first and not cash:
            cash, label = admission.seed_ranking(host, label)
        entry = admission.entry(
            url, host, depth, payload, request.priority, first, cash=cash, crawl_policy=label,
            referrer=found_on(request), canonical=canonical,
        )
        if add_unseen is not None:
            result = add_unseen(entry, canonical, self._requisite_answered)
        else:
            result = frontier.add(
                entry, force=request.dont_filter or first or requisite, first=first
            )
        return self.stats.submitted(entry, result)

    def _requisite_answered(self, queued: bool) -> None:
        """A shared frontier's answer to a requisite's claim (``add_unseen``), on its worker
        thread: counted on the reactor's."""
        name = "requisites/queued" if queued else "requisites/seen"
        self._on_reactor(self.stats.inc, name)

    def next_request(self) -> Request | None:
        frontier, leases = self.frontier, self.leases
        assert frontier is not None and leases is not None
        if leases.backlog_full():
            return None  # the backlog's drain wakes the engine; a read-ahead waits or goes back
        gate = self.address_gate
        while True:
            lease = frontier.next()
            if lease is None:
                due_in = frontier.due_in()
                if due_in is not None:
                    now = monotonic()
                    self.waker.wake_at(now + due_in, now)
                return None
            entry = lease.entry
            if gate is not None and not gate.admit(
                lease.token, entry.host, monotonic(), entry.priority
            ):
                continue  # handed back, its host held until its turn at its server's address
            try:
                request = frontier_codec.decode(lease.entry, self.spider, self.referer)
                break
            except (ValueError, frontier_codec.PayloadError) as exc:
                frontier.finish(lease.token, None, Outcome.NOT_SENT)
                self.stats.rejected("invalid_url", lease.entry.url)
                logger.debug("Cannot build a request for %s: %s", lease.entry.url, exc)
        if request.meta.get("seed"):
            self._seed_leased(request.url)
        leases.handed_out(lease.token, request, lease.entry.host)
        self.stats.inc("frontier/leased")
        return request

    def _seed_leased(self, url: str) -> None:
        """A seed another worker queued is in scope here too before its page's links come back:
        the shared scope's news (``_scope_arrived``) may reach this worker later than the seed
        (a worker that joined before the one with the seeds leases them at once)."""
        admission = self.admission
        if admission is None or admission.policy.any_host:
            return
        host = admission.policy.check(url, filters=False)[2]
        if host and host not in admission.policy.hosts and admission.widen({host}):
            self._scope_grew()

    def renew_leases(self) -> None:
        if self.leases is not None:
            self.leases.renew()

    # -- what the crawl tells the scheduler (signals) ------------------------------------------

    def _links_extracted(
        self,
        response: Response,
        urls: list[str],
        spider: Spider,
        demote: int = 0,
        forms: dict[str, LinkForm] | None = None,
    ) -> None:
        """A page's links, in bulk. ``demote`` levels are added to their depth (a duplicate
        page's links: lower priority, and the site's max_depth sooner); ``forms``: their
        stateless part, prepared on the content thread (``UrlPolicy.link_form``)."""
        if self.intake is None or spider is not self.spider:
            return
        if demote:
            self.stats.inc("frontier/links_demoted", len(urls))
        meta = response.meta
        depth = meta.get("depth", 0) + 1 + demote
        self.intake.take(
            urls, depth, forms, meta.get(LEASE_META),
            cash=meta.get(CASH_META, 0.0), policy=meta.get(POLICY_META, ""), page=response.url,
        )

    def _fetch_finished(
        self,
        request: Request,
        outcome: Outcome,
        duration: float | None,
        response: Response | None = None,
    ) -> None:
        if self.address_gate is not None:
            sent = outcome is not Outcome.NOT_SENT
            self.address_gate.ended(
                request.meta.get(LEASE_META), monotonic(), (duration or 0.0) if sent else None
            )
        if self.leases is not None:
            size = len(response.body) if response is not None else 0  # for a byte budget
            self.leases.fetch_ended(request, outcome, duration, size, response is not None)

    def _fetch_completed(
        self, request: Request, host: str, delay: float | None, outcome: Outcome
    ) -> None:
        self.crawler.signals.send_catch_log(
            crawler_signals.fetch_completed, request=request, host=host, delay=delay,
            outcome=outcome,
        )

    def _want_address(self, host: str) -> None:
        self.crawler.signals.send_catch_log(crawler_signals.host_address_wanted, host=host)

    def _host_resolved(self, host: str, address: str) -> None:
        if self.address_gate is not None:
            self.address_gate.resolved(host, address)

    def _completed_later(self, token: str, delay: float | None) -> None:
        if self.leases is not None:
            self.leases.completed_later(token, delay)

    def _spider_error(self, failure: Any, response: Any, spider: Spider) -> None:
        """The callback (or a middleware before it) raised and nothing handled it: the spider
        yields nothing more for this page."""
        if isinstance(response, Response) and self.leases is not None:
            self.leases.page_output_done(response, 0)

    def _item_done(self, item: Any, response: Any = None) -> None:
        # an item not from a page (or from an errback) was acknowledged at fetch_finished
        if isinstance(response, Response) and self.leases is not None:
            self.leases.item_done(response)

    def _host_crawl_delay(self, host: str, delay: float | None) -> None:
        if self.frontier is not None and delay is not None:
            self.frontier.set_crawl_delay(host, delay)

    def _host_hold(self, host: str, seconds: float) -> None:
        if self.frontier is not None:
            self.frontier.hold_host(host, seconds)
            now = monotonic()
            self.waker.wake_at(now + seconds, now)

    # -- what the scheduler tells the crawl; what the frontier tells the scheduler ----------------

    def _origin_discovered(self, origin: str, host: str) -> None:
        """The first URL of an origin is about to be queued: a receiver may put requests
        before it (robots.txt), with ``engine.crawl`` and ``meta["frontier_first"]``."""
        self.crawler.signals.send_catch_log(
            crawler_signals.origin_discovered, origin=origin, host=host
        )

    def _origins_discovering(self, origins: list[str]) -> None:
        """A batch's new origins, before each is announced (``origin_discovered``)."""
        self.crawler.signals.send_catch_log(
            crawler_signals.origins_discovering, origins=origins
        )

    def _seeds_found(self, spider: Spider, seeds: list[tuple[str, str]]) -> None:
        """A batch of the spider's seeds, ``(url, source)``: queued in bulk, no Requests."""
        if self.intake is not None and spider is self.spider:
            self.intake.take_seeds(seeds)

    def _seeds_arrived(self, urls: list[str]) -> None:
        """Seeds pushed while the crawl runs (a shared frontier's ``<site>:start_urls``),
        queued in bulk like a seeds file's."""
        if self.spider is None or self.intake is None:
            return
        self.stats.inc("frontier/seeds_pushed", len(urls))
        self.intake.take_seeds([(url, "start_urls") for url in urls], counted=False)

    def _scope_arrived(self, hosts: set[str]) -> None:
        """Hosts other workers brought into scope (their seeds and seed redirects)."""
        if self.admission is not None and self.admission.widen(hosts):
            self._scope_grew()

    def _scope_grew(self) -> None:
        if self.intake is not None:
            self.intake.forget()  # links to the new hosts were remembered as out of scope


def _on_reactor(fn: Any, running: bool) -> Any:
    """``fn`` for a frontier's worker thread to call: it runs on the reactor thread (at once
    without a running engine: unit tests)."""
    if not running:
        return fn
    from twisted.internet import reactor  # the one Scrapy installed

    return lambda *args: reactor.callFromThread(fn, *args)  # type: ignore[attr-defined]


def _referer_policy(settings: Any) -> frontier_codec.RefererPolicy | None:
    """The ``Referer`` a rebuilt request gets, by the crawl's ``REFERRER_POLICY`` as stock
    Scrapy's RefererMiddleware applies it (``scrapy-default``: the page's URL, not on an https
    to http step); None when ``REFERER_ENABLED`` is off. A page's ``Referrer-Policy`` header is
    not known when its links are due (the page is gone by then): the setting decides."""
    if not settings.getbool("REFERER_ENABLED", True):
        return None
    return RefererMiddleware(settings).default_policy().referrer
