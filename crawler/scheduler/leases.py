"""Lease tracking: what this process knows of each request the frontier handed it.

A handed-out request carries its lease token in ``meta[LEASE_META]``. When its fetch ends the
lease is completed (the host's slot rests, and the rest the frontier applied is reported); it is
acknowledged (the URL forgotten, on disk for good) when nothing of the fetch is left to process:
at once for a fetch without a response for the spider (failure, denial, retry, redirect), else
once the spider's output for the page has ended and every item it yielded has left the
pipelines. Every ``FRONTIER_LEASE_TTL / 3`` seconds the leases the engine still works on are
renewed, and one the engine is done with but that was never acknowledged is acknowledged then;
the frontier expires the rest (their URLs come back).

The **backlog** is the pages fetched for the spider whose leases are not acknowledged yet
(waiting for the content thread, the spider or the pipelines). A worker killed then loses them
all: another worker fetches each again once its lease expires. So while the backlog holds
``FRONTIER_MAX_BACKLOG`` pages or ``TUNING``'s ``max_backlog_bytes`` bytes the scheduler hands out
nothing (:meth:`LeaseTracker.backlog_full`), and the engine is woken when it drains below both
(``drained``): a kill costs at most the read-ahead, the fetches in flight and that bound.

Free of Scrapy: requests and responses are anything with a ``meta`` dict; whether the engine
still works on a request is asked of the ``engine_holds`` callable it is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crawler.frontier import Frontier, Outcome
from crawler.meta import LEASE_META, STOPPED_META
from crawler.scheduler.stats import FrontierStats

logger = logging.getLogger(__name__)

# completed(request, host, rest, outcome): the frontier completed a fetch and applied ``rest``
Completed = Callable[[Any, str, float | None, Outcome], None]

# Seconds between two looks, while the backlog is full, for pages the engine let go of without a
# signal we know of (they would hold the backlog full until the next renewal).
BACKLOG_SETTLE_INTERVAL = 1.0


def lease_ttl_from_settings(settings: Any, ttl: float, given: bool = False) -> float:
    """``ttl`` (``FRONTIER_LEASE_TTL``), raised if a fetch with all its retries could outlive it
    (a lease must not expire while its fetch may still be running): silently when it was left
    at its default, with a warning when it was ``given`` that low."""
    attempts = 1 + (settings.getint("RETRY_TIMES", 2) if settings.getbool("RETRY_ENABLED") else 0)
    longest = settings.getfloat("DOWNLOAD_TIMEOUT", 180.0) * attempts
    if ttl <= longest:
        raised = 2 * longest
        if not given:  # the default, for longer downloads
            return raised
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
class HeldLease:
    """A lease this process holds: what it knows of its request's progress."""

    request: Any
    host: str
    deadline: float  # when the frontier expires it unless renewed (this process's clock)
    started: bool = False  # reached the downloader: may have been sent
    completed: bool = False  # the fetch ended; a response is with the spider or pipelines
    items_expected: int | None = None  # set when the spider's output for the page ended
    items_done: int = 0
    backlog_bytes: int | None = None  # in the backlog (with the spider or pipelines): its size


class Backlog:
    """How many pages (and bytes) were fetched for the spider and are not acknowledged yet, and
    whether that reached the bound (``max_pages``, ``max_bytes``; 0: no bound). Counts for
    the crawl's stats: ``frontier/backlog/full`` (times the bound was reached) and
    ``frontier/backlog/full_seconds`` (time spent at it); :meth:`report` adds the peaks.
    ``drained`` is called when it falls back below the bound."""

    def __init__(
        self,
        stats: FrontierStats,
        *,
        max_pages: int = 0,
        max_bytes: int = 0,
        drained: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stats = stats
        self.max_pages = max(0, max_pages)
        self.max_bytes = max(0, max_bytes)
        self.drained = drained
        self.clock = clock
        self.pages = 0
        self.bytes = 0
        self.peak_pages = 0
        self.peak_bytes = 0
        self.full_seconds = 0.0
        self._full_since: float | None = None

    @property
    def full(self) -> bool:
        return (0 < self.max_pages <= self.pages) or (0 < self.max_bytes <= self.bytes)

    def add(self, size: int) -> None:
        self.pages += 1
        self.bytes += size
        self.peak_pages = max(self.peak_pages, self.pages)
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        if self._full_since is None and self.full:
            self._full_since = self.clock()
            self.stats.inc("frontier/backlog/full")

    def report(self) -> None:
        """The peaks into the stats (at close: a page's count would cost a stats write)."""
        self.stats.set("frontier/backlog/peak_pages", self.peak_pages)
        self.stats.set("frontier/backlog/peak_bytes", self.peak_bytes)

    def remove(self, size: int) -> None:
        self.pages -= 1
        self.bytes -= size
        if self._full_since is not None and not self.full:
            self.full_seconds += self.clock() - self._full_since
            self._full_since = None
            self.stats.set("frontier/backlog/full_seconds", round(self.full_seconds, 3))
            if self.drained is not None:
                self.drained()


class LeaseTracker:
    """The leases this process holds; see the module docstring. ``ack(token)`` acknowledges
    a page to the frontier (the link intake's, which waits for the page's links);
    ``completed`` hears of each completion with the rest the frontier applied."""

    def __init__(
        self,
        frontier: Frontier,
        stats: FrontierStats,
        *,
        ack: Callable[[str], None],
        completed: Completed,
        engine_holds: Callable[[Any], bool | None],
        clock: Callable[[], float] = time.monotonic,
        backlog: Backlog | None = None,
    ) -> None:
        self.frontier = frontier
        self.stats = stats
        self._ack_page = ack
        self._completed = completed
        self.engine_holds = engine_holds
        self.clock = clock
        self._held: dict[str, HeldLease] = {}
        # completions sent to a frontier that completes later: token -> (request, host, outcome)
        self._completing: dict[str, tuple[Any, str, Outcome]] = {}
        self.backlog = backlog if backlog is not None else Backlog(stats, clock=clock)
        self._settled_at = float("-inf")

    def handed_out(self, token: str, request: Any, host: str) -> None:
        request.meta[LEASE_META] = token
        self._held[token] = HeldLease(request, host, self.clock() + self.frontier.lease_ttl)

    def _held_for(self, meta: dict[str, Any]) -> tuple[str, HeldLease] | tuple[None, None]:
        token = meta.get(LEASE_META)
        held = self._held.get(token) if token is not None else None
        return (token, held) if held is not None else (None, None)

    def reached_downloader(self, request: Any) -> None:
        _, held = self._held_for(request.meta)
        if held is not None:
            held.started = True

    def fetch_ended(
        self,
        request: Any,
        outcome: Outcome,
        duration: float | None,
        size: int,
        for_spider: bool,
    ) -> None:
        """The fetch of ``request`` ended (``size`` bytes received); ``for_spider``: a
        response goes on to the spider."""
        token, held = self._held_for(request.meta)
        if held is None or held.completed:
            return  # not handed out here (engine.download, another crawl)
        assert token is not None
        if request.meta.get(STOPPED_META):
            # cut short by a stop: back to the frontier (not completed, not acknowledged), so
            # a resumed crawl or another worker fetches it; the host rests its delay first
            del self._held[token]
            self.frontier.release([token], rest=True)
            self.stats.inc("frontier/leases_released_at_stop")
            return
        held.completed = True
        rest = self.frontier.complete(token, duration, outcome, size=size)
        if self.frontier.completes_later:
            self._completing[token] = (request, held.host, outcome)
        else:
            self._completed(request, held.host, rest, outcome)
        self.stats.inc(f"frontier/fetch/{outcome}")
        if for_spider:
            held.backlog_bytes = size
            self.backlog.add(size)
        else:
            self._ack(token)

    def completed_later(self, token: str, rest: float | None) -> None:
        """A frontier that completes later applied ``rest`` to the lease ``token``'s slot."""
        pending = self._completing.pop(token, None)
        if pending is not None:
            request, host, outcome = pending
            self._completed(request, host, rest, outcome)

    def page_output_done(self, response: Any, items: int) -> None:
        """The spider's output for ``response`` ended, with ``items`` items."""
        token, held = self._held_for(response.meta)
        if held is None or held.items_expected is not None:
            return
        held.items_expected = items
        if held.items_done >= items:
            self._ack(token)

    def item_done(self, response: Any) -> None:
        """An item of ``response`` left the pipelines (scraped, dropped or failed)."""
        token, held = self._held_for(response.meta)
        if held is None:
            return
        held.items_done += 1
        if held.items_expected is not None and held.items_done >= held.items_expected:
            self._ack(token)

    def _ack(self, token: str | None) -> None:
        if token is not None:
            self._forget(token)
            self._ack_page(token)

    def _forget(self, token: str) -> None:
        held = self._held.pop(token, None)
        if held is not None and held.backlog_bytes is not None:
            self.backlog.remove(held.backlog_bytes)

    def backlog_full(self) -> bool:
        """Whether the backlog is at its bound, so nothing more may be handed out. While it is,
        pages the engine is done with but never heard of are acknowledged (stat
        ``frontier/acked_late``), at most every ``BACKLOG_SETTLE_INTERVAL`` seconds, so a
        missed signal costs a second, not a renewal period."""
        if not self.backlog.full:
            return False
        now = self.clock()
        if now - self._settled_at >= BACKLOG_SETTLE_INTERVAL:
            self._settled_at = now
            for token, held in list(self._held.items()):
                if held.backlog_bytes is not None and self.engine_holds(held.request) is False:
                    self._ack(token)
                    self.stats.inc("frontier/acked_late")
        return self.backlog.full

    def unstarted(self) -> list[str]:
        """Leases whose request never reached the downloader."""
        return [token for token, held in self._held.items() if not held.started]

    def renew(self) -> None:
        """The safety net: keep alive the leases the engine still works on; acknowledge those
        the engine is done with (a path that sent no signal we know of, stat
        ``frontier/acked_late``); let the frontier expire the rest."""
        frontier = self.frontier
        now = self.clock()
        alive = []
        for token, held in list(self._held.items()):
            holds = self.engine_holds(held.request)
            if holds is None or holds:
                alive.append(token)
                held.deadline = now + frontier.lease_ttl
            elif held.completed:
                self._ack(token)
                self.stats.inc("frontier/acked_late")
            elif held.deadline <= now:
                self._forget(token)  # expired: its URL is back in the frontier
        if alive:
            frontier.renew(alive)
        expired = frontier.expire()
        if expired:
            self.stats.inc("frontier/leases_expired", expired)
            logger.warning("%d leases expired: their URLs are queued again", expired)
