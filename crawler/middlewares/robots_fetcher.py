"""Fetching robots.txt: the per-origin state machine that the gate middleware
(``crawler.middlewares.robots``) consults. It owns everything that happens to a robots.txt
request; the gate only checks page requests against the verdict.

How a host's robots.txt is fetched:

* The scheduler sends ``origin_discovered`` the first time it admits a URL of an origin; the
  fetcher answers with the robots.txt request, which becomes the host's first request: the
  frontier hands out nothing else of that host until it completes, under the host's politeness
  like any other fetch. A fresh copy in the cache (``ROBOTS_CACHE_CLASS``; by default SQLite at
  ``ROBOTSTXT_CACHE_PATH``, in JOBDIR or beside the crawl database, else memory) means no
  request at all.
* The response never reaches the spider: the gate hands robots.txt requests' hooks to
  :meth:`RobotsFetcher.process_response` and friends, which read it and raise ``IgnoreRequest``.
  Up to 5 redirects are followed (RFC 9309 2.3.1.2) while the robots.txt request keeps the
  host's slot. 2xx: its rules apply (the first ``ROBOTSTXT_MAX_SIZE`` bytes); 4xx other than
  429, or more than 5 redirects: no restrictions; 5xx, 429, timeouts and refused connections:
  the whole origin is disallowed for now.
* Any failure while a robots.txt response is processed counts as unreachable, like a 5xx. A
  middleware above the gate that raises on the way back up (``HttpCompressionMiddleware`` on a
  gzip bomb or a plain body labelled gzip) never reaches ``process_exception``: the end of the
  fetch (``fetch_finished``, sent by ``FrontierDownloader`` after the whole chain) fails an
  origin whose fetch is still in flight.
* A request that arrives while its origin has no copy yet (the frontier rejected the robots.txt
  request, ``engine.download``, a race) starts a direct fetch if none is running and waits for
  it; every waiter gets the answer (Scrapy 2.19 hands it to the first waiter only). A wait
  ends after ``ROBOTSTXT_WAIT_TIMEOUT`` seconds at most (the request is then refused as
  unresolved): every request that enters the downloader leaves it. A page allowed after such a
  fetch waits the host's politeness delay after it (the frontier never saw that fetch, so it
  cannot space the two): robots.txt and the page are never closer than a frontier's two fetches.
* Copies expire after ``ROBOTSTXT_CACHE_EXPIRY`` seconds; the next request of the origin queues a
  refresh as the host's next request and is checked against the old copy meanwhile. A refresh
  that fails leaves the last good copy in force.

Unreachable robots.txt ("disallowed for now"): the host is *held* in the frontier (signal
``host_hold``), so its URLs stay queued (on disk with a JOBDIR) and nothing of it is handed out;
robots.txt is fetched again after ``ROBOTSTXT_RETRY_DELAY`` seconds (doubling each time, or the
server's ``Retry-After``), up to ``ROBOTSTXT_RETRY_TIMES`` times, as the host's first request.
A request that still arrives meanwhile (one already in flight) is *parked* (stat
``robotstxt/deferred``) and goes back to the scheduler when a retry succeeds. When the retries
are used up, the host's requests are refused (stat ``robotstxt/denied_unreachable``) and offered
to ``requests_unfetched`` (with a crawl database, remembered there as due, so the next crawl
tries them again).

The per-origin state itself lives in :class:`~crawler.robots.book.RobotsBook`, which alone
changes it; this module drives time (timers, waits) and Scrapy (requests, signals).

Several workers on one shared cache (the Redis backend): a fetch starts only with the book's
claim on the origin, and a failure is recorded for all workers ("unreachable, next try in N s",
or given up). A worker whose robots.txt request meets another's claim or retry delay skips it;
one with requests waiting looks at the shared state every 0.5 s while another worker fetches,
and again when the retry is due, so robots.txt is fetched once per retry period crawl-wide and
every worker holds the host meanwhile.
"""

from __future__ import annotations

import logging
import os
import time
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from crawler import signals as crawler_signals
from crawler.backends.registry import build_backend
from crawler.config import defaults
from crawler.crawldb import crawldb_path
from crawler.download.limits import StoppedAtShutdown
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.urls import origin_of
from crawler.meta import LEASE_META, ROBOTS_META, STOPPED_META
from crawler.robots.book import ELSEWHERE, IN_FLIGHT, OriginState, RobotsBook, Verdict
from crawler.robots.cache import RobotsCache
from crawler.robots.rules import ALLOW_ALL, robots_token

logger = logging.getLogger(__name__)

HOPS_META = "robotstxt_hops"  # redirects followed so far
RETRY_META = "robotstxt_retry"  # a scheduled retry after a failure
DIRECT_META = "robotstxt_direct"  # fetched with engine.download, not through the frontier
MAX_REDIRECTS = 5
_HOLD_MARGIN = 1.0  # seconds a host stays held after its robots.txt retry is enqueued
_SHARED_POLL = 0.5  # seconds between looks at another worker's robots.txt fetch in flight


class RobotsTxtHandled(IgnoreRequest):
    """A robots.txt response or failure was consumed here; it must not reach the spider."""


def is_robots_request(request: Request) -> bool:
    return request.meta.get(ROBOTS_META) is not None


def robots_cache_path(crawler: Crawler) -> str | None:
    """``ROBOTSTXT_CACHE_PATH``; else in JOBDIR, or beside the crawl database, so a resumed crawl
    or a recrawl reuses fresh copies; None: nowhere on disk."""
    settings = crawler.settings
    path = settings.get("ROBOTSTXT_CACHE_PATH")
    if path:
        return str(path)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return os.path.join(jobdir, "robots.sqlite")
    db_path = crawldb_path(settings, getattr(crawler.spidercls, "name", None) or "crawl")
    if not db_path:
        return None
    stem = db_path[: -len(".sqlite")] if db_path.endswith(".sqlite") else db_path
    return f"{stem}-robots.sqlite"


def build_cache(crawler: Crawler) -> RobotsCache:
    """The cache ``ROBOTS_CACHE_CLASS`` names (``crawler.backends.registry``), at the crawl's
    path."""
    return build_backend(crawler, "ROBOTS_CACHE_CLASS", path=robots_cache_path(crawler))


def wait_timeout(settings: BaseSettings) -> float:
    """``ROBOTSTXT_WAIT_TIMEOUT``, by default the longest a robots.txt fetch can take: every
    redirect hop (RFC 9309: up to 5) timing out on every attempt, plus a margin."""
    value = settings.getfloat("ROBOTSTXT_WAIT_TIMEOUT", defaults.ROBOTSTXT_WAIT_TIMEOUT)
    if value > 0:
        return value
    attempts = settings.getint("RETRY_TIMES", 2) + 1
    return settings.getfloat("DOWNLOAD_TIMEOUT", 180.0) * attempts * (1 + MAX_REDIRECTS) + 60.0


class RobotsFetcher:
    """Makes robots.txt requests and reads their answers; see the module docstring."""

    def __init__(self, crawler: Crawler, cache: RobotsCache | None = None) -> None:
        s = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.token = robots_token(s)
        self.wait_timeout = wait_timeout(s)
        self.book = RobotsBook(
            cache if cache is not None else build_cache(crawler),
            self.token,
            expiry=s.getfloat("ROBOTSTXT_CACHE_EXPIRY", defaults.ROBOTSTXT_CACHE_EXPIRY),
            max_size=s.getint("ROBOTSTXT_MAX_SIZE", defaults.ROBOTSTXT_MAX_SIZE),
            retry_delay=s.getfloat("ROBOTSTXT_RETRY_DELAY", defaults.ROBOTSTXT_RETRY_DELAY),
            retry_times=s.getint("ROBOTSTXT_RETRY_TIMES", defaults.ROBOTSTXT_RETRY_TIMES),
            max_retry_delay=s.getfloat(
                "ROBOTSTXT_MAX_RETRY_DELAY", defaults.ROBOTSTXT_MAX_RETRY_DELAY
            ),
            claim_seconds=self.wait_timeout,  # a dead worker's fetch holds the others this long
        )
        self.clock = time.time
        self._waiters: dict[str, list[Deferred[bool]]] = {}
        self._timers: dict[str, Any] = {}
        self._delays: dict[str, float] = {}
        self.politeness = politeness_from_settings(s)
        self._direct_started: dict[str, float] = {}  # origin -> when its direct fetch began
        self._rest_until: dict[str, float] = {}  # origin -> end of the rest after that fetch
        self._resting: set[Deferred[None]] = set()
        self._closing = False
        crawler.signals.connect(self._origin_discovered, crawler_signals.origin_discovered)
        crawler.signals.connect(self._spider_idle, signals.spider_idle)
        crawler.signals.connect(self._spider_closed, signals.spider_closed)
        crawler.signals.connect(self._request_dropped, signals.request_dropped)
        crawler.signals.connect(self._fetch_finished, crawler_signals.fetch_finished)
        crawler.signals.connect(self._end_rests, crawler_signals.crawl_stopping)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsFetcher:
        return cls(crawler)

    # -- the frontier's first request of a host ---------------------------------------------------

    def _origin_discovered(self, origin: str, host: str) -> Request | None:
        key = origin_of(origin + "/") or origin
        st = self.book.discovered(key, host)
        now = self.clock()
        if self.book.fresh(key, now):
            self._inc("robotstxt/cache_hit")
            self._send_delay(st)
            return None
        if not self.book.needs_fetch(key, now):
            return None
        self.book.queued(key)
        return self._robots_request(key)

    def _robots_request(
        self, origin: str, url: str | None = None, hops: int = 0, **meta: Any
    ) -> Request:
        return Request(
            url or f"{origin}/robots.txt",
            meta={
                ROBOTS_META: origin,
                HOPS_META: hops,
                "dont_redirect": True,  # followed here, within RFC 9309's limit
                "dont_retry": True,  # a failure is "disallowed for now", retried here
                "dont_obey_robotstxt": True,
                **meta,
            },
            dont_filter=True,
            priority=1000,
        )

    # -- what the gate asks -----------------------------------------------------------------------

    async def settle(self, request: Request, origin: str) -> Verdict | None:
        """The verdict for a page request: ALLOW, DENY or UNAVAILABLE, fetching robots.txt and
        waiting for it first if need be. None: still unresolved (the crawl is closing, or the
        wait timed out)."""
        for _ in range(3):
            verdict = self.book.verdict(origin, request.url)
            if verdict is Verdict.ALLOW or verdict is Verdict.DENY:
                self._maybe_refresh(origin)
                if verdict is Verdict.ALLOW:
                    await self._rest_after_direct_fetch(origin)
                return verdict
            if verdict is Verdict.UNAVAILABLE:
                return verdict
            if self._closing:
                break
            if verdict is Verdict.FETCH:
                self._fetch_directly(origin)
                if self.book.state(origin).fetching not in (IN_FLIGHT, ELSEWHERE):
                    continue  # it ended already (failed at once), or is known to be failing
            if not await self._wait(origin):
                self._inc("robotstxt/wait_timeout")
                logger.warning(
                    "robots.txt of %s still unresolved after %.0fs: refusing %s",
                    origin,
                    self.wait_timeout,
                    request.url,
                )
                break
        return None

    def park(self, request: Request, origin: str) -> bool:
        """An UNAVAILABLE origin: park a frontier request until a retry succeeds (True).
        Anything else (an ``engine.download``, or no retry left) is refused for this crawl
        (False); a frontier request is then offered to ``requests_unfetched``."""
        st = self.book.state(origin)
        leased = LEASE_META in request.meta
        if st.gave_up or st.retry_at is None or not leased:
            if leased:
                self._remember([request])
            return False
        self.book.park(origin, request.replace(dont_filter=True))
        if origin not in self._timers:  # learned from another worker: look again when due
            self._timers[origin] = call_later(
                max(0.05, st.retry_at - self.clock()), self._recheck, origin
            )
        return True

    def _maybe_refresh(self, origin: str) -> None:
        """An expired copy stays in force; its refresh becomes the host's next request."""
        if self._closing or not self.book.needs_fetch(origin, self.clock()):
            return
        self.book.queued(origin)
        self._inc("robotstxt/refresh")
        self._crawl(self._robots_request(origin, frontier_first=True))

    def _fetch_directly(self, origin: str) -> None:
        """Fetch robots.txt with ``engine.download``: the frontier never handed out the
        robots.txt request (its URL policy rejected it) or the request did not come through
        the frontier at all."""
        if self.book.state(origin).fetching == IN_FLIGHT:
            return
        if not self.book.start_fetch(origin, direct=True, now=self.clock()):
            self._inc("robotstxt/skipped_shared")
            self._follow(origin)  # another worker fetches it, or it is failing
            return
        self._inc("robotstxt/direct")
        self._direct_started[origin] = self.clock()
        request = self._robots_request(origin, **{DIRECT_META: True})
        engine = self.crawler.engine
        assert engine is not None
        d = deferred_from_coro(engine.download_async(request))
        d.addBoth(self._direct_done, origin)

    def _direct_done(self, result: Any, origin: str) -> None:
        if isinstance(result, Failure) and result.check(StoppedAtShutdown):
            self.book.abandoned(origin)
            return
        if self.book.state(origin).fetching == IN_FLIGHT:  # ended without an answer
            reason = result.getErrorMessage() if isinstance(result, Failure) else "no answer"
            self._failed(origin, None, reason)

    async def _wait(self, origin: str) -> bool:
        """Wait for the fetch of ``origin``'s robots.txt to end. False when it did not end
        within ``wait_timeout``: a safety net, so that a fetch whose end went unnoticed cannot
        keep a request (and with it the engine's close) waiting for ever."""
        d: Deferred[bool] = Deferred()
        self._waiters.setdefault(origin, []).append(d)
        self._inc("robotstxt/waited")
        timer = call_later(self.wait_timeout, self._wait_expired, origin, d)
        try:
            return await maybe_deferred_to_future(d)
        finally:
            timer.cancel()

    def _wait_expired(self, origin: str, d: Deferred[bool]) -> None:
        waiters = self._waiters.get(origin, [])
        if d in waiters:
            waiters.remove(d)
            if not waiters:
                del self._waiters[origin]
            d.callback(False)

    def _wake(self, origin: str) -> None:
        started = self._direct_started.pop(origin, None)
        if started is not None:
            self._rest_until[origin] = self._direct_rest_end(origin, started)
        for d in self._waiters.pop(origin, ()):
            d.callback(True)

    def _direct_rest_end(self, origin: str, started: float) -> float:
        """When a page may follow the direct fetch of ``origin``'s robots.txt that began at
        ``started`` and ends now: the politeness delay after a fetch that long, and never
        sooner than the file's own Crawl-delay (capped where the frontier would skip the host
        anyway)."""
        now = self.clock()
        rules = self.book.state(origin).rules
        crawl_delay = rules.crawl_delay() if rules is not None else None
        if crawl_delay is not None:
            crawl_delay = min(crawl_delay, self.politeness.max_crawl_delay)
        return now + self.politeness.delay(now - started, crawl_delay)

    async def _rest_after_direct_fetch(self, origin: str) -> None:
        """Hold a page until its host has rested after a robots.txt fetch the frontier did
        not schedule (a direct fetch): without it the page followed at once."""
        until = self._rest_until.get(origin)
        if until is None:
            return
        wait = until - self.clock()
        if wait <= 0 or self._closing:
            self._rest_until.pop(origin, None)
            return
        self._inc("robotstxt/direct_rest")
        d: Deferred[None] = Deferred()
        self._resting.add(d)
        timer = call_later(wait, self._end_rest, d)
        try:
            await maybe_deferred_to_future(d)
        finally:
            timer.cancel()

    def _end_rest(self, d: Deferred[None]) -> None:
        if d in self._resting:
            self._resting.discard(d)
            d.callback(None)

    def _end_rests(self) -> None:
        """A stop or the close: resting pages go on at once (the download handler refuses
        them if the crawl is stopping, and their leases go back)."""
        for d in list(self._resting):
            self._end_rest(d)

    # -- robots.txt requests and their answers (handed over by the gate) ---------------------------

    def process_request(self, request: Request) -> None:
        """A robots.txt request enters the downloader: the fetch is in flight, unless it is a
        frontier request that another fetch made pointless (raises :class:`RobotsTxtHandled`)."""
        origin = request.meta[ROBOTS_META]
        meta = request.meta
        hop = bool(meta.get(HOPS_META))
        frontier_request = not hop and not meta.get(DIRECT_META)
        # what other workers of a shared crawl did meanwhile (a copy, a failure): one read
        st = self.book.sync(origin, self.clock()) if frontier_request else self.book.state(origin)
        if frontier_request:
            # A frontier request: skip it when another fetch got there first, or when a failed
            # fetch is waiting out its retry delay and this is not the retry.
            waiting = st.retry_at is not None and st.retry_at > self.clock()
            if (
                self.book.fresh(origin, self.clock())
                or st.fetching == IN_FLIGHT
                or (waiting and not meta.get(RETRY_META))
            ):
                self.book.unqueued(origin)
                self._inc("robotstxt/skipped")
                raise RobotsTxtHandled(f"robots.txt of {origin} already known or in flight")
        # A hop is awaited by its owner's _answer, which reads how it ended.
        if not self.book.start_fetch(origin, None if hop else request, now=self.clock()):
            self._inc("robotstxt/skipped_shared")
            self._follow(origin)
            raise RobotsTxtHandled(f"robots.txt of {origin} is another worker's, or failing")
        self._inc("robotstxt/request_count")

    def _fetch_finished(self, request: Request, outcome: Any, duration: float | None) -> None:
        """The downloader is done with ``request``, however it ended. A robots.txt fetch that
        is still in flight then ended without an answer read here: a middleware above the gate
        raised on the way back up (a gzip bomb, a plain body labelled gzip), so neither
        :meth:`process_response` nor :meth:`process_exception` heard of it. RFC 9309
        2.3.1.4: unreachable, the host is held and robots.txt tried again."""
        origin = request.meta.get(ROBOTS_META)
        if origin is None or request.meta.get(HOPS_META):
            return
        if request.meta.get(STOPPED_META):
            self.book.abandoned(origin)  # cut by a stop: not the server's fault
            return
        st = self.book.state(origin)
        if st.fetching == IN_FLIGHT and st.owner is request:
            self._inc("robotstxt/unprocessable")
            self._failed(origin, None, "its response could not be processed")

    async def process_response(self, request: Request, response: Response) -> Response:
        """Read a robots.txt answer; always raises :class:`RobotsTxtHandled`."""
        origin = request.meta[ROBOTS_META]
        self._inc("robotstxt/response_count")
        self._inc(f"robotstxt/response_status_count/{response.status}")
        try:
            await self._answer(request, response, origin)
        except Exception as exc:  # never leave the origin in flight: its waiters would hang
            logger.exception("Error reading robots.txt of %s", origin)
            if self.book.state(origin).fetching == IN_FLIGHT:
                self._failed(origin, None, repr(exc))
        raise RobotsTxtHandled(f"robots.txt of {origin} read")

    async def _answer(self, request: Request, response: Response, origin: str) -> None:
        status = response.status
        logger.debug(
            "robots.txt for %s: %s answered %d (%d bytes)",
            origin,
            request.url,
            status,
            len(response.body),
        )
        if 300 <= status < 400 and status != 304:
            hops = request.meta.get(HOPS_META, 0)
            location = response.headers.get(b"Location")
            target = urljoin(request.url, location.decode("latin-1")) if location else None
            if target and hops < MAX_REDIRECTS and origin_of(target) is not None:
                self._inc("robotstxt/redirect")
                hop = self._robots_request(origin, target, hops + 1)
                engine = self.crawler.engine
                assert engine is not None
                try:
                    await engine.download_async(hop)
                except IgnoreRequest:
                    pass  # RobotsTxtHandled: the hop's own answer was read
                except Exception as exc:
                    self._failed(origin, None, f"redirect to {target}: {exc!r}")
                if self.book.state(origin).fetching == IN_FLIGHT:
                    self._failed(origin, None, f"redirect to {target} gave no answer")
                return
            # RFC 9309 2.3.1.2: more than five redirects: unavailable (no restrictions).
            self.book.fetched(origin, status, b"", self.clock(), kind=ALLOW_ALL)
            logger.info("robots.txt of %s: too many redirects, no restrictions", origin)
            self._resolved(origin)
            return
        record = self.book.fetched(origin, status, response.body, self.clock())
        if record is None:
            self._failed(origin, _retry_after(response), f"HTTP {status}")
            return
        self._resolved(origin)
        # A redirect to another origin's own /robots.txt (http -> https, apex -> www) read
        # that origin's file too: it need not be fetched again.
        target = origin_of(request.url)
        if (
            request.meta.get(HOPS_META)
            and target not in (None, origin)
            and urlsplit(request.url).path == "/robots.txt"
            and not urlsplit(request.url).query
        ):
            assert target is not None
            other = self.book.state(target)
            if not self.book.fresh(target, self.clock()) and other.fetching != IN_FLIGHT:
                self.book.fetched(target, status, response.body, self.clock())
                self._resolved(target)

    def process_exception(self, request: Request, exception: Exception) -> None:
        """A robots.txt download failed, or a middleware refused it; raises
        :class:`RobotsTxtHandled` (unless it is that already)."""
        origin = request.meta[ROBOTS_META]
        if isinstance(exception, RobotsTxtHandled):
            return None
        if request.meta.get(STOPPED_META):
            # cut by a stop (Ctrl-C): nothing is known of the origin; the claim is given up
            # so another worker or the resumed crawl fetches it
            self.book.abandoned(origin)
        elif isinstance(exception, IgnoreRequest):
            # Another middleware refused the robots.txt request (address safety): it will
            # refuse the origin's pages as well; nothing to retry.
            self._refused(origin, str(exception))
        else:
            self._inc(f"robotstxt/exception_count/{type(exception).__name__}")
            self._failed(origin, None, str(exception) or type(exception).__name__)
        raise RobotsTxtHandled(f"robots.txt of {origin} failed: {exception!r}")

    # -- outcomes ---------------------------------------------------------------------------------

    def _refused(self, origin: str, why: str) -> None:
        self.book.refused(origin)
        self._inc("robotstxt/refused")
        logger.debug("robots.txt of %s not fetched: %s", origin, why)
        self._wake(origin)
        if self.book.state(origin).parked:
            self._give_up(origin, f"its robots.txt request was refused ({why})")

    def _resolved(self, origin: str) -> None:
        st = self.book.state(origin)
        assert st.rules is not None
        self._inc(f"robotstxt/kind/{st.rules.kind}")
        if st.truncated:
            self._inc("robotstxt/truncated")
            logger.info(
                "robots.txt of %s is over %d bytes; the rest is ignored",
                origin,
                self.book.max_size,
            )
        self._cancel_timer(origin)
        self._send_delay(st)
        self._wake(origin)
        parked = self.book.take_parked(origin)
        if parked:
            self._inc("robotstxt/requeued", len(parked))
            logger.info(
                "robots.txt of %s read; %d parked requests go back to the frontier",
                origin,
                len(parked),
            )
            for request in parked:
                self._crawl(request)

    def _failed(self, origin: str, retry_after: float | None, reason: str) -> None:
        st = self.book.state(origin)
        delay = self.book.failed(origin, self.clock(), retry_after)
        self._inc("robotstxt/unreachable")
        self._wake(origin)
        if st.rules is not None:
            logger.info(
                "robots.txt of %s could not be refreshed (%s); the copy from %s stays in force",
                origin,
                reason,
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.rules.record.fetched_at)),
            )
            return
        if delay is not None:
            logger.info(
                "robots.txt of %s unreachable (%s): the host is disallowed for now, retrying "
                "in %.1fs",
                origin,
                reason,
                delay,
            )
            self._cancel_timer(origin)
            self._timers[origin] = call_later(delay, self._retry, origin)
            # The host's URLs stay queued in the frontier (on disk with a JOBDIR) rather than
            # being handed out only to be parked here; the hold outlasts the retry timer so
            # the robots.txt retry, a first request, goes out before any of them.
            host = st.host or (urlsplit(origin).hostname or "")
            self.crawler.signals.send_catch_log(
                crawler_signals.host_hold, host=host, seconds=delay + _HOLD_MARGIN
            )
        else:
            self._give_up(origin, f"robots.txt unreachable ({reason}) after {st.failures} tries")

    def _follow(self, origin: str) -> None:
        """Act on what the book learned of the origin from other workers: their copy, their
        fetch in flight (look again shortly), their failure (wait for the retry), or their
        giving up."""
        if self._closing:
            return
        st = self.book.state(origin)
        if st.rules is not None:
            self._resolved(origin)
            return
        if st.gave_up:
            self._cancel_timer(origin)
            self._wake(origin)
            if st.parked:
                self._give_up(origin, "its robots.txt stayed unreachable for another worker")
            return
        now = self.clock()
        if st.fetching == ELSEWHERE:
            wait = min(_SHARED_POLL, (st.retry_at or now) - now)
        elif st.unreachable and st.retry_at is not None:
            self._wake(origin)  # waiters now get "disallowed for now" (and are parked)
            wait = st.retry_at - now
        else:
            self._wake(origin)
            return
        self._cancel_timer(origin)
        self._timers[origin] = call_later(max(0.05, wait), self._recheck, origin)

    def _recheck(self, origin: str) -> None:
        """Look at another worker's fetch again; once it is neither in flight nor waiting out
        a retry delay, this worker's waiting requests go on (and fetch it if need be)."""
        self._timers.pop(origin, None)
        if self._closing:
            return
        st = self.book.sync(origin, self.clock())
        if st.fetching == IN_FLIGHT:
            return
        if (
            st.rules is not None
            or st.gave_up
            or st.fetching == ELSEWHERE
            or (st.retry_at is not None and st.retry_at > self.clock())
        ):
            self._follow(origin)
            return
        self._wake(origin)
        if st.parked:
            self._retry(origin)

    def _retry(self, origin: str) -> None:
        self._timers.pop(origin, None)
        before = self.book.state(origin).retry_at
        st = self.book.sync(origin, self.clock())  # another worker may have retried already
        if st.rules is not None and st.fetching != IN_FLIGHT:
            self._resolved(origin)
            return
        if st.gave_up or st.fetching == ELSEWHERE:
            self._follow(origin)
            return
        if st.retry_at is not None and before is not None and st.retry_at > before + 0.05:
            self._follow(origin)  # another worker's newer failure: its retry comes later
            return
        if self._closing or st.rules is not None or st.fetching:
            return
        if st.direct:
            self._fetch_directly(origin)
            return
        self.book.queued(origin)
        self._crawl(self._robots_request(origin, frontier_first=True, **{RETRY_META: True}))

    def _give_up(self, origin: str, why: str) -> None:
        self._cancel_timer(origin)
        parked = self.book.give_up(origin)
        kept = self._remember(parked)
        logger.warning(
            "Giving up %s for this crawl: %s; its requests are refused%s (%d were waiting)",
            origin,
            why,
            " and kept in the crawl database for the next crawl" if kept else "",
            len(parked),
        )
        self._inc("robotstxt/dropped", len(parked))

    def _request_dropped(self, request: Request, spider: Spider | None = None) -> None:
        """The scheduler refused a robots.txt retry or refresh (the host was given up)."""
        origin = request.meta.get(ROBOTS_META)
        if origin is None:
            return
        self.book.unqueued(origin)
        st = self.book.state(origin)
        if st.rules is None and st.parked:
            self._give_up(origin, "the frontier refused its robots.txt request")

    # -- crawl life -------------------------------------------------------------------------------

    def _spider_idle(self, spider: Spider) -> None:
        if not self._closing and self.book.retry_pending():
            raise DontCloseSpider

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        self._closing = True
        self._end_rests()
        for origin in list(self._timers):
            self._cancel_timer(origin)
        for origin in list(self._waiters):
            self._wake(origin)
        parked = self.book.all_parked()
        if parked:
            kept = self._remember(parked)
            logger.warning(
                "%d requests still parked at close (robots.txt unreachable)%s",
                len(parked),
                "; kept in the crawl database for the next crawl" if kept else "",
            )
            self._set("robotstxt/parked_at_close", len(parked))
        self.book.cache.close()

    def _remember(self, requests: list[Request]) -> bool:
        """Offer requests this crawl will not fetch to whoever keeps them for the next one."""
        results = self.crawler.signals.send_catch_log(
            crawler_signals.requests_unfetched, requests=requests
        )
        return any(result is True for _, result in results)

    # -- helpers ----------------------------------------------------------------------------------

    def _send_delay(self, st: OriginState) -> None:
        if st.rules is None:
            return
        delay = st.rules.crawl_delay()
        if delay is None or self._delays.get(st.origin) == delay:
            return
        self._delays[st.origin] = delay
        host = st.host or (urlsplit(st.origin).hostname or "")
        self._inc("robotstxt/crawl_delay")
        self.crawler.signals.send_catch_log(
            crawler_signals.host_crawl_delay, host=host, delay=delay
        )

    def _crawl(self, request: Request) -> None:
        engine = self.crawler.engine
        if engine is not None and not self._closing:
            engine.crawl(request)

    def _cancel_timer(self, origin: str) -> None:
        timer = self._timers.pop(origin, None)
        if timer is not None:
            timer.cancel()

    def _inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)

    def _set(self, key: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(key, value)


def _retry_after(response: Response) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date), if any."""
    value = response.headers.get(b"Retry-After")
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
