"""Page requests held by the robots.txt fetcher: those waiting for their origin's fetch to end,
and those resting after a robots.txt fetch the frontier did not schedule.

A wait ends when the fetch ends (``wake``), or after ``timeout`` seconds at most: a safety net,
so that a fetch whose end went unnoticed cannot keep a request (and with it the engine's close)
waiting for ever; every waiter gets the answer (Scrapy 2.19 hands a download's result to its
first waiter only).

A direct fetch (``engine.download``: a race, the frontier rejected the robots.txt request) is
invisible to the frontier, which therefore cannot space it from the host's next page: a page
allowed after it waits the politeness delay after it here (never less than the file's own
Crawl-delay), so robots.txt and the page are never closer than a frontier's two fetches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from crawler.frontier import PolitenessPolicy


class OriginWaits:
    """See the module docstring. ``crawl_delay(origin)``: the Crawl-delay of the origin's
    robots.txt as read (None if none); ``inc(stat)`` counts waits and rests."""

    def __init__(
        self,
        timeout: float,
        politeness: PolitenessPolicy,
        crawl_delay: Callable[[str], float | None],
        inc: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self.timeout = timeout
        self.politeness = politeness
        self.crawl_delay = crawl_delay
        self.inc = inc
        self.clock = clock
        self._waiters: dict[str, list[Deferred[bool]]] = {}
        self._direct_started: dict[str, float] = {}  # origin -> when its direct fetch began
        self._rest_until: dict[str, float] = {}  # origin -> end of the rest after that fetch
        self._resting: set[Deferred[None]] = set()

    async def wait(self, origin: str) -> bool:
        """Wait for the fetch of ``origin``'s robots.txt to end; False: it did not end within
        ``timeout``."""
        d: Deferred[bool] = Deferred()
        self._waiters.setdefault(origin, []).append(d)
        self.inc("robotstxt/waited")
        timer = call_later(self.timeout, self._expired, origin, d)
        try:
            return await maybe_deferred_to_future(d)
        finally:
            timer.cancel()

    def _expired(self, origin: str, d: Deferred[bool]) -> None:
        waiters = self._waiters.get(origin, [])
        if d in waiters:
            waiters.remove(d)
            if not waiters:
                del self._waiters[origin]
            d.callback(False)

    def wake(self, origin: str) -> None:
        """The fetch of ``origin``'s robots.txt ended (or its state changed): waiters go on."""
        started = self._direct_started.pop(origin, None)
        if started is not None:
            self._rest_until[origin] = self._direct_rest_end(origin, started)
        for d in self._waiters.pop(origin, ()):
            d.callback(True)

    def wake_all(self) -> None:
        for origin in list(self._waiters):
            self.wake(origin)

    def direct_fetch_started(self, origin: str) -> None:
        self._direct_started[origin] = self.clock()

    def _direct_rest_end(self, origin: str, started: float) -> float:
        """When a page may follow the direct fetch of ``origin``'s robots.txt that began at
        ``started`` and ends now (the Crawl-delay capped where the frontier would skip the
        host anyway)."""
        now = self.clock()
        crawl_delay = self.crawl_delay(origin)
        if crawl_delay is not None:
            crawl_delay = min(crawl_delay, self.politeness.max_crawl_delay)
        return now + self.politeness.delay(now - started, crawl_delay)

    async def rest_after_direct_fetch(self, origin: str, closing: bool) -> None:
        """Hold a page until its host has rested after a direct robots.txt fetch."""
        until = self._rest_until.get(origin)
        if until is None:
            return
        wait = until - self.clock()
        if wait <= 0 or closing:
            self._rest_until.pop(origin, None)
            return
        self.inc("robotstxt/direct_rest")
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

    def end_rests(self, *_: Any) -> None:
        """A stop or the close: resting pages go on at once (the download handler refuses
        them if the crawl is stopping, and their leases go back)."""
        for d in list(self._resting):
            self._end_rest(d)
