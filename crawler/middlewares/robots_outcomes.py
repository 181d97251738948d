"""What the end of a robots.txt fetch means for its origin, and what follows in time.

* Read (2xx, 4xx, too many redirects): the rules apply; the Crawl-delay goes to the frontier
  (signal ``host_crawl_delay``), waiting requests go on, parked ones go back to the scheduler.
* Unreachable ("disallowed for now": 5xx, 429, timeouts, refused connections): the host is
  *held* in the frontier (signal ``host_hold``), so its URLs stay queued (on disk with a JOBDIR)
  and nothing of it is handed out; robots.txt is fetched again after ``TUNING``'s
  ``robots_retry_delay`` seconds (doubling each time, or the server's ``Retry-After``), up to
  ``robots_retry_times`` times, as the host's first request. A request that still arrives
  meanwhile (one already in flight) is *parked* and goes back to the scheduler when a retry
  succeeds. When the retries are used up, the origin is given up for this crawl: its parked
  requests are announced with ``requests_unfetched`` (a crawl database keeps them as due, so
  the next crawl tries them again). A refresh that fails leaves the last good copy in force.
* Several workers on one shared cache (the Redis backend): a failure is recorded for all
  workers ("unreachable, next try in N s", or given up). A worker with requests waiting
  follows another worker's fetch (it looks at the shared state every 0.5 s while that fetch
  runs, and again when its retry is due), so robots.txt is fetched once per retry period
  crawl-wide and every worker holds the host meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.utils.asyncio import call_later

from crawler import signals as crawler_signals
from crawler.meta import ROBOTS_META
from crawler.middlewares.robots_requests import RETRY_META, robots_request
from crawler.middlewares.robots_waits import OriginWaits
from crawler.robots.book import ELSEWHERE, IN_FLIGHT, OriginState, RobotsBook

logger = logging.getLogger(__name__)

_HOLD_MARGIN = 1.0  # seconds a host stays held after its robots.txt retry is enqueued
_SHARED_POLL = 0.5  # seconds between looks at another worker's robots.txt fetch in flight
# Origins remembered as announced (~170 B each with the string): one forgotten and met again
# is announced again, which the sitemap reader takes quietly (it skips the files it asked for).
ANNOUNCED_KEPT = 100_000


class OriginOutcomes:
    """See the module docstring. ``fetch_directly(origin)`` fetches robots.txt outside the
    frontier (the retry of a direct fetch is direct too); ``inc(stat, n)`` counts."""

    def __init__(
        self,
        crawler: Crawler,
        book: RobotsBook,
        waits: OriginWaits,
        fetch_directly: Callable[[str], None],
        inc: Callable[..., None],
        clock: Callable[[], float],
    ) -> None:
        self.crawler = crawler
        self.book = book
        self.waits = waits
        self.fetch_directly = fetch_directly
        self.inc = inc
        self.clock = clock
        self.closing = False
        self._timers: dict[str, Any] = {}
        # origin -> the Crawl-delay last sent for it, at most max_announced (oldest sent first)
        self._delays: dict[str, float] = {}
        # origins whose robots_sitemaps was sent, least recently first (ANNOUNCED_KEPT)
        self._announced: OrderedDict[str, None] = OrderedDict()
        self.max_announced = ANNOUNCED_KEPT

    def close(self) -> None:
        self.closing = True
        for origin in list(self._timers):
            self._cancel_timer(origin)

    def watch_retry(self, origin: str, retry_at: float) -> None:
        """A request was parked for a failure learned from another worker: look again when
        its retry is due."""
        if origin not in self._timers:
            self._timers[origin] = call_later(
                max(0.05, retry_at - self.clock()), self._recheck, origin
            )

    def look_again(self) -> None:
        """The crawl went idle while requests wait for a robots.txt retry. A retry this worker
        queued may have left it: a shared crawl hands a host's requests to the worker that
        owns the host now, and this one hears nothing of that fetch. Each origin no timer
        watches is read again from the shared cache and followed (a copy, a failure, the
        owner giving up); a retry still queued is not queued again."""
        for origin in self.book.waiting_origins():
            if origin not in self._timers and self.book.state(origin).fetching != IN_FLIGHT:
                self._recheck(origin)

    def refused(self, origin: str, why: str) -> None:
        self.book.refused(origin)
        self.inc("robotstxt/refused")
        logger.debug("robots.txt of %s not fetched: %s", origin, why)
        self.waits.wake(origin)
        if self.book.state(origin).parked:
            self._give_up(origin, f"its robots.txt request was refused ({why})")

    def resolved(self, origin: str) -> None:
        st = self.book.state(origin)
        assert st.rules is not None
        self.inc(f"robotstxt/kind/{st.rules.kind}")
        self._cancel_timer(origin)
        self.send_delay(st)
        self.announce(st)
        self.waits.wake(origin)
        parked = self.book.take_parked(origin)
        if parked:
            self.inc("robotstxt/requeued", len(parked))
            logger.info(
                "robots.txt of %s read; %d parked requests go back to the frontier",
                origin,
                len(parked),
            )
            for request in parked:
                self.crawl(request)

    def failed(self, origin: str, retry_after: float | None, reason: str) -> None:
        st = self.book.state(origin)
        delay = self.book.failed(origin, self.clock(), retry_after)
        self.inc("robotstxt/unreachable")
        self.waits.wake(origin)
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

    def follow(self, origin: str) -> None:
        """Act on what the book learned of the origin from other workers: their copy, their
        fetch in flight (look again shortly), their failure (wait for the retry), or their
        giving up."""
        if self.closing:
            return
        st = self.book.state(origin)
        if st.rules is not None:
            self.resolved(origin)
            return
        if st.gave_up:
            self._cancel_timer(origin)
            self.waits.wake(origin)
            if st.parked:
                self._give_up(origin, "its robots.txt stayed unreachable for another worker")
            return
        now = self.clock()
        if st.fetching == ELSEWHERE:
            wait = min(_SHARED_POLL, (st.retry_at or now) - now)
        elif st.unreachable and st.retry_at is not None:
            self.waits.wake(origin)  # waiters now get "disallowed for now" (and are parked)
            wait = st.retry_at - now
        else:
            self.waits.wake(origin)
            return
        self._cancel_timer(origin)
        self._timers[origin] = call_later(max(0.05, wait), self._recheck, origin)

    def _recheck(self, origin: str) -> None:
        """Look at another worker's fetch again; once it is neither in flight nor waiting out
        a retry delay, this worker's waiting requests go on (and fetch it if need be)."""
        self._timers.pop(origin, None)
        if self.closing:
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
            self.follow(origin)
            return
        self.waits.wake(origin)
        if st.parked:
            self._retry(origin)

    def _retry(self, origin: str) -> None:
        self._timers.pop(origin, None)
        before = self.book.state(origin).retry_at
        st = self.book.sync(origin, self.clock())  # another worker may have retried already
        if st.rules is not None and st.fetching != IN_FLIGHT:
            self.resolved(origin)
            return
        if st.gave_up or st.fetching == ELSEWHERE:
            self.follow(origin)
            return
        if st.retry_at is not None and before is not None and st.retry_at > before + 0.05:
            self.follow(origin)  # another worker's newer failure: its retry comes later
            return
        if self.closing or st.rules is not None or st.fetching:
            return
        if st.direct:
            self.fetch_directly(origin)
            return
        self.book.queued(origin)
        self.crawl(robots_request(origin, frontier_first=True, **{RETRY_META: True}))

    def _give_up(self, origin: str, why: str) -> None:
        self._cancel_timer(origin)
        parked = self.book.give_up(origin)
        self.unfetched(parked)
        logger.warning(
            "Giving up %s for this crawl: %s; its requests are refused (%d were waiting)",
            origin,
            why,
            len(parked),
        )
        self.inc("robotstxt/dropped", len(parked))

    def request_dropped(self, request: Request, spider: Spider | None = None) -> None:
        """The scheduler refused a robots.txt retry or refresh (the host was given up)."""
        origin = request.meta.get(ROBOTS_META)
        if origin is None:
            return
        self.book.unqueued(origin)
        st = self.book.state(origin)
        if st.rules is None and st.parked:
            self._give_up(origin, "the frontier refused its robots.txt request")

    def send_delay(self, st: OriginState) -> None:
        if st.rules is None:
            return
        delay = st.rules.crawl_delay()
        if delay is None or self._delays.get(st.origin) == delay:
            return
        delays = self._delays  # bounded as _announced is: a dropped origin's delay is sent again
        delays.pop(st.origin, None)
        delays[st.origin] = delay
        if len(delays) > self.max_announced:
            del delays[next(iter(delays))]
        host = st.host or (urlsplit(st.origin).hostname or "")
        self.inc("robotstxt/crawl_delay")
        self.crawler.signals.send_catch_log(
            crawler_signals.host_crawl_delay, host=host, delay=delay
        )

    def announce(self, st: OriginState) -> None:
        """Once per origin among the most recently announced (``ANNOUNCED_KEPT``): its rules
        are known; its sitemaps go to whoever reads them (``robots_sitemaps``), while the
        host's next requests can still go first."""
        announced = self._announced
        if st.rules is None:
            return
        if st.origin in announced:
            announced.move_to_end(st.origin)
            return
        announced[st.origin] = None
        if len(announced) > self.max_announced:
            announced.popitem(last=False)
        host = st.host or (urlsplit(st.origin).hostname or "")
        self.crawler.signals.send_catch_log(
            crawler_signals.robots_sitemaps, origin=st.origin, host=host, urls=st.rules.sitemaps()
        )

    def crawl(self, request: Request) -> None:
        engine = self.crawler.engine
        if engine is not None and not self.closing:
            engine.crawl(request)

    def unfetched(self, requests: list[Request]) -> None:
        """Announce requests this crawl will not fetch (a crawl database keeps them for the
        next crawl, and says so)."""
        self.crawler.signals.send_catch_log(crawler_signals.requests_unfetched, requests=requests)

    def _cancel_timer(self, origin: str) -> None:
        timer = self._timers.pop(origin, None)
        if timer is not None:
            timer.cancel()

