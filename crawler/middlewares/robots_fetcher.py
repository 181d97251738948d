"""Fetching robots.txt: the per-origin state machine that the gate middleware
(``crawler.middlewares.robots``) consults. It owns everything that happens to a robots.txt
request; the gate only checks page requests against the verdict.

How a host's robots.txt is fetched:

* The scheduler sends ``origin_discovered`` the first time it admits a URL of an origin; the
  fetcher schedules the robots.txt request at once (``engine.crawl``, ``frontier_first``), so
  it is queued before that URL as the host's first request: the frontier hands out nothing
  else of that host until it completes, under the host's politeness like any other fetch. A
  fresh copy in the cache (``robots_cache``; by default SQLite at
  ``ROBOTSTXT_CACHE_PATH``, in JOBDIR or beside the crawl database, else memory) means no
  request at all.
* The response never reaches the spider: the gate hands robots.txt requests' hooks to
  :meth:`RobotsFetcher.process_response` and friends, which read it and raise ``IgnoreRequest``.
  Up to 5 redirects are followed (RFC 9309 2.3.1.2) while the robots.txt request keeps the
  host's slot. 2xx: its rules apply (its first 500 KiB, read even from a body longer than
  ``DOWNLOAD_MAXSIZE``: the download stops there, ``read_up_to``); 4xx other than 429, or
  more than 5 redirects: no restrictions; 5xx, 429, timeouts, refused connections and download
  limits (too slow, endless headers): the whole origin is disallowed for now.
* Any failure while a robots.txt response is processed counts as unreachable, like a 5xx. A
  middleware above the gate that raises on the way back up (``HttpCompressionMiddleware`` on a
  plain body labelled gzip) never reaches ``process_exception``: the end of the
  fetch (``fetch_finished``, sent by ``FrontierDownloader`` after the whole chain) fails an
  origin whose fetch is still in flight.
* A request that arrives while its origin has no copy yet (the frontier rejected the robots.txt
  request, ``engine.download``, a race) starts a direct fetch if none is running and waits for
  it (``crawler.middlewares.robots_waits``): every request that enters the downloader leaves it.
* Copies expire after ``ROBOTSTXT_CACHE_EXPIRY`` seconds; the next request of the origin queues a
  refresh as the host's next request and is checked against the old copy meanwhile. The
  refresh carries the copy's validators; a 304 that names the copy renews it, one that names
  another file has it fetched again without validators (:meth:`RobotsFetcher._fetch_again`).

What a fetch's end means for the origin (rules in force, "disallowed for now" with its holds,
retries and parked requests, giving up, other workers' fetches followed) is
:class:`~crawler.middlewares.robots_outcomes.OriginOutcomes`'. The per-origin state itself lives
in :class:`~crawler.robots.book.RobotsBook`, which alone changes it; these modules drive time
(timers, waits) and Scrapy (requests, signals). Several workers on one shared cache (the Redis
backend): a fetch starts only with the book's claim on the origin; a worker whose robots.txt
request meets another's claim or retry delay skips it.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro
from twisted.python.failure import Failure

from crawler import signals as crawler_signals
from crawler.config.agent import agent_problem
from crawler.download.limits import DownloadLimitExceeded, StoppedAtShutdown
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.urls import origin_of
from crawler.meta import LEASE_META, READ_UP_TO_FLAG, ROBOTS_META, STOPPED_META
from crawler.middlewares.redirect import redirect_target
from crawler.middlewares.robots_outcomes import OriginOutcomes
from crawler.middlewares.robots_requests import (
    AGAIN_META,
    DIRECT_META,
    HOPS_META,
    MAX_REDIRECTS,
    RETRY_META,
    RobotsTxtHandled,
    build_cache,
    retry_after,
    robots_request,
    wait_timeout,
)
from crawler.middlewares.robots_waits import OriginWaits
from crawler.net.freshness import NO_HINT, freshness_of
from crawler.robots.book import ELSEWHERE, IN_FLIGHT, RobotsBook, Verdict
from crawler.robots.cache import RobotsCache, robots_lifetime
from crawler.robots.config import RobotsConfig
from crawler.robots.rules import ALLOW_ALL, robots_token

logger = logging.getLogger(__name__)

_HOLD_MARGIN = 1.0  # seconds a host stays held after its robots.txt retry is enqueued
_SHARED_POLL = 0.5  # seconds between looks at another worker's robots.txt fetch in flight


class RobotsFetcher:
    """Makes robots.txt requests and reads their answers; see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        cache: RobotsCache | None = None,
        config: RobotsConfig | None = None,
    ) -> None:
        s = crawler.settings
        config = config or RobotsConfig.from_settings(s)  # one line per bad value
        self.crawler = crawler
        self.stats = crawler.stats
        self.token = robots_token(s)
        problem = agent_problem(s.get("USER_AGENT"), config.user_agent)
        if problem:  # `scrapy crawl` refuses it; a crawl started otherwise is told
            logger.warning("robots.txt groups naming this crawler will not apply: %s", problem)
        self.wait_timeout = wait_timeout(s)
        self.book = RobotsBook(
            cache if cache is not None else build_cache(crawler),
            self.token,
            expiry=config.cache_expiry,
            retry_delay=config.retry_delay,
            retry_times=config.retry_times,
            claim_seconds=self.wait_timeout,  # a dead worker's fetch holds the others this long
            max_origins=config.book_size,
        )
        self.clock = time.time
        self.waits = OriginWaits(
            self.wait_timeout,
            politeness_from_settings(s),
            self._crawl_delay,
            self._inc,
            lambda: self.clock(),
        )
        self.outcomes = OriginOutcomes(
            crawler, self.book, self.waits, self._fetch_directly, self._inc, lambda: self.clock()
        )
        crawler.signals.connect(self._origin_discovered, crawler_signals.origin_discovered)
        crawler.signals.connect(self._origins_discovering, crawler_signals.origins_discovering)
        crawler.signals.connect(self._spider_idle, signals.spider_idle)
        crawler.signals.connect(self._spider_closed, signals.spider_closed)
        crawler.signals.connect(self.outcomes.request_dropped, signals.request_dropped)
        crawler.signals.connect(self._fetch_finished, crawler_signals.fetch_finished)
        crawler.signals.connect(self.waits.end_rests, crawler_signals.crawl_stopping)

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: RobotsConfig | None = None) -> RobotsFetcher:
        return cls(crawler, config=config)

    # -- the frontier's first request of a host ---------------------------------------------------

    def _origin_discovered(self, origin: str, host: str) -> None:
        """The scheduler is about to queue the origin's first URL: robots.txt goes first, as
        the host's first request, scheduled now (``engine.crawl`` enqueues at once) so that it
        is queued before that URL."""
        key = origin_of(origin + "/") or origin
        book = self.book
        with book.batch():  # one read of the cached copy for all these steps
            st = book.discovered(key, host)
            now = self.clock()
            if book.fresh(key, now):
                self._inc("robotstxt/cache_hit")
                self.outcomes.send_delay(st)
                self.outcomes.announce(st)
                return
            if not book.needs_fetch(key, now):
                return
            book.queued(key)
        self.outcomes.crawl(robots_request(key, frontier_first=True))

    def _origins_discovering(self, origins: list[str]) -> None:
        """A batch of origins is about to be announced (a seeds file's new hosts): their
        cached copies in one read, not one (or five) per origin."""
        self.book.prefetch(origin_of(o + "/") or o for o in origins)

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
                    await self.waits.rest_after_direct_fetch(origin, self.outcomes.closing)
                return verdict
            if verdict is Verdict.UNAVAILABLE:
                return verdict
            if self.outcomes.closing:
                break
            if verdict is Verdict.FETCH:
                self._fetch_directly(origin)
                if self.book.state(origin).fetching not in (IN_FLIGHT, ELSEWHERE):
                    continue  # it ended already (failed at once), or is known to be failing
            if not await self.waits.wait(origin):
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
        (False); a frontier request is then announced with ``requests_unfetched``."""
        st = self.book.state(origin)
        leased = LEASE_META in request.meta
        if st.gave_up or st.retry_at is None or not leased:
            if leased:
                self.outcomes.unfetched([request])
            return False
        self.book.park(origin, request.replace(dont_filter=True))
        self.outcomes.watch_retry(origin, st.retry_at)
        return True

    def _maybe_refresh(self, origin: str) -> None:
        """An expired copy stays in force; its refresh becomes the host's next request."""
        if self.outcomes.closing or not self.book.needs_fetch(origin, self.clock()):
            return
        self.book.queued(origin)
        self._inc("robotstxt/refresh")
        self.outcomes.crawl(robots_request(origin, frontier_first=True))

    def _fetch_directly(self, origin: str) -> None:
        """Fetch robots.txt with ``engine.download``: the frontier never handed out the
        robots.txt request (its URL policy rejected it) or the request did not come through
        the frontier at all."""
        if self.book.state(origin).fetching == IN_FLIGHT:
            return
        if not self.book.start_fetch(origin, direct=True, now=self.clock()):
            self._inc("robotstxt/skipped_shared")
            self.outcomes.follow(origin)  # another worker fetches it, or it is failing
            return
        self._inc("robotstxt/direct")
        self.waits.direct_fetch_started(origin)
        request = robots_request(origin, **{DIRECT_META: True})
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
            self.outcomes.failed(origin, None, reason)

    # -- robots.txt requests and their answers (handed over by the gate) ---------------------------

    def process_request(self, request: Request) -> None:
        """A robots.txt request enters the downloader: the fetch is in flight, unless it is a
        frontier request that another fetch made pointless (raises :class:`RobotsTxtHandled`)."""
        origin = request.meta[ROBOTS_META]
        meta = request.meta
        # a part of the fetch in flight: a redirect's hop, or the fetch without validators
        # after a 304 that named another file
        hop = bool(meta.get(HOPS_META) or meta.get(AGAIN_META))
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
            self.outcomes.follow(origin)
            raise RobotsTxtHandled(f"robots.txt of {origin} is another worker's, or failing")
        self._inc("robotstxt/request_count")
        if not hop:  # a refresh asks whether the copy in force changed (RFC 9110 13.1)
            etag, last_modified = self.book.validators(origin)
            # sent back as received: the header's bytes (read as Latin-1), not re-encoded as
            # Scrapy encodes a str (UTF-8), which changes an ETag's obs-text and no 304 comes
            if etag:
                request.headers[b"If-None-Match"] = etag.encode("latin-1")
            if last_modified:
                request.headers[b"If-Modified-Since"] = last_modified.encode("latin-1")

    def _fetch_finished(self, request: Request, outcome: Any, duration: float | None) -> None:
        """The downloader is done with ``request``, however it ended. A robots.txt fetch that
        is still in flight then ended without an answer read here: a middleware above the gate
        raised on the way back up (a plain body labelled gzip), so neither
        :meth:`process_response` nor :meth:`process_exception` heard of it. RFC 9309
        2.3.1.4: unreachable, the host is held and robots.txt tried again."""
        origin = request.meta.get(ROBOTS_META)
        if origin is None or request.meta.get(HOPS_META) or request.meta.get(AGAIN_META):
            return
        if request.meta.get(STOPPED_META):
            self.book.abandoned(origin)  # cut by a stop: not the server's fault
            return
        st = self.book.state(origin)
        if st.fetching == IN_FLIGHT and st.owner is request:
            self._inc("robotstxt/unprocessable")
            self.outcomes.failed(origin, None, "its response could not be processed")

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
                self.outcomes.failed(origin, None, repr(exc))
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
            target = redirect_target(request.url, location) if location else None
            if target and hops < MAX_REDIRECTS and origin_of(target) is not None:
                self._inc("robotstxt/redirect")
                hop = robots_request(origin, target, hops + 1)
                await self._follow_up(hop, origin, f"redirect to {target}")
                return
            # RFC 9309 2.3.1.2: more than five redirects: unavailable (no restrictions).
            self.book.fetched(origin, status, b"", self.clock(), kind=ALLOW_ALL)
            logger.info("robots.txt of %s: too many redirects, no restrictions", origin)
            self.outcomes.resolved(origin)
            return
        now = self.clock()
        hint = freshness_of(response.headers, now)
        # an answer's validators are its URL's: a redirect's target is never asked for with
        # them (a refresh asks the origin's /robots.txt), so they are kept for a direct answer
        validators = _validators(response)
        own = ("", "") if request.meta.get(HOPS_META) else validators
        if status == 304 and _conditional(request) and not self.book.names_copy(origin, own):
            await self._fetch_again(origin)
            return
        if status == 304 and _conditional(request):
            # not modified: the copy in force stays, fresh again as the answer says (its
            # headers update the file's, RFC 9111 4.3.4); a 304 that says nothing of it
            # leaves the file's own lifetime (its max-age stands), not ROBOTSTXT_CACHE_EXPIRY
            renewal = None if hint == NO_HINT else robots_lifetime(hint, self.book.expiry)
            if self.book.renewed(origin, now, lifetime=renewal, validators=own):
                self._inc("robotstxt/not_modified")
                self.outcomes.resolved(origin)
                return
        lifetime = robots_lifetime(hint, self.book.expiry, status)
        cut = READ_UP_TO_FLAG in response.flags  # the file's beginning only
        record = self.book.fetched(
            origin, status, response.body, now, lifetime=lifetime, cut=cut, validators=own
        )
        if record is None:
            self.outcomes.failed(origin, retry_after(response), f"HTTP {status}")
            return
        if self.book.state(origin).truncated:  # counted per download cut, not per renewal
            self._inc("robotstxt/truncated")
            logger.info(
                "robots.txt of %s is over %d bytes; the rest is ignored", origin, self.book.max_size
            )
        self.outcomes.resolved(origin)
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
                self.book.fetched(
                    target, status, response.body, now, lifetime=lifetime, cut=cut,
                    validators=validators,
                )
                self.outcomes.resolved(target)

    async def _fetch_again(self, origin: str) -> None:
        """A refresh's 304 named another file than the copy (RFC 9111 4.3.4: it must not
        renew it). The copy is not the file the server has now, and the 304 carries no body
        to replace it with: robots.txt is fetched again at once without validators, as
        RFC 2616 10.3.5 had a cache repeat such a request unconditionally. Once: a request
        without validators asks for no 304, and one it still gets is read as unreachable (the
        copy stays in force, RFC 9309 2.4) rather than asked again.

        Not "no stored response selected" alone (answer the 304 as a failed refresh): the copy
        would stay in force, known to be outdated, until the retry delay, and a server that
        answers every conditional request with its current ``ETag`` would keep the crawl on
        its first copy for good."""
        self._inc("robotstxt/not_modified_other")
        logger.info("robots.txt of %s: its 304 names another file; fetching it again", origin)
        again = robots_request(origin, **{AGAIN_META: True})
        await self._follow_up(again, origin, "the fetch without validators")

    async def _follow_up(self, request: Request, origin: str, what: str) -> None:
        """Download ``request``, a part of the origin's fetch in flight, whose own answer
        settles it; one that ends without settling it fails the fetch."""
        engine = self.crawler.engine
        assert engine is not None
        try:
            await engine.download_async(request)
        except IgnoreRequest:
            pass  # RobotsTxtHandled: the request's own answer was read
        except Exception as exc:
            self.outcomes.failed(origin, None, f"{what}: {exc!r}")
        if self.book.state(origin).fetching == IN_FLIGHT:
            self.outcomes.failed(origin, None, f"{what} gave no answer")

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
        elif isinstance(exception, IgnoreRequest) and not isinstance(
            exception, DownloadLimitExceeded
        ):
            # Another middleware refused the robots.txt request (address safety): it will
            # refuse the origin's pages as well; nothing to retry. A download limit (too slow,
            # endless headers) is the server failing, like a timeout: unreachable, retried.
            self.outcomes.refused(origin, str(exception))
        else:
            self._inc(f"robotstxt/exception_count/{type(exception).__name__}")
            self.outcomes.failed(origin, None, str(exception) or type(exception).__name__)
        raise RobotsTxtHandled(f"robots.txt of {origin} failed: {exception!r}")

    # -- crawl life -------------------------------------------------------------------------------

    def _spider_idle(self, spider: Spider) -> None:
        if self.outcomes.closing or not self.book.retry_pending():
            return
        self.outcomes.look_again()
        if self.book.retry_pending():
            raise DontCloseSpider

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        self.outcomes.close()
        self.waits.end_rests()
        self.waits.wake_all()
        parked = self.book.all_parked()
        if parked:
            self.outcomes.unfetched(parked)
            logger.warning(
                "%d requests still parked at close (robots.txt unreachable)", len(parked)
            )
            self._set("robotstxt/parked_at_close", len(parked))
        self.book.cache.close()

    # -- helpers ----------------------------------------------------------------------------------

    def _crawl_delay(self, origin: str) -> float | None:
        rules = self.book.state(origin).rules
        return rules.crawl_delay() if rules is not None else None

    def _inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)

    def _set(self, key: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(key, value)


def _validators(response: Response) -> tuple[str, str]:
    """The answer's ``ETag`` and ``Last-Modified`` ("" when absent)."""
    etag = response.headers.get(b"ETag") or b""
    last_modified = response.headers.get(b"Last-Modified") or b""
    return etag.decode("latin-1").strip(), last_modified.decode("latin-1").strip()


def _conditional(request: Request) -> bool:
    """Whether ``request`` asked for a 304 (it carried a copy's validators)."""
    return b"If-None-Match" in request.headers or b"If-Modified-Since" in request.headers
