"""Wakes Scrapy's engine when the frontier's earliest host comes due, and tells whether the
engine still works on a request: the one module that touches the engine's private state."""

from __future__ import annotations

from time import monotonic
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.utils.asyncio import call_later


def running_engine(crawler: Crawler) -> Any:
    """The crawler's engine, or None before the crawl starts (Scrapy 2.19 raises then)."""
    try:
        return crawler.engine
    except RuntimeError:
        return None


def engine_holds(crawler: Crawler, request: Request) -> bool | None:
    """Whether the engine still works on ``request`` (downloading it, or its response is with
    the spider or the pipelines): the engine keeps such requests in its slot's ``inprogress``
    set from download to the end of scraping. None when that cannot be told (no engine, or a
    Scrapy without that attribute). Private access, kept here beside the waker's."""
    engine = running_engine(crawler)
    slot = getattr(engine, "_slot", None) if engine is not None else None
    inprogress = getattr(slot, "inprogress", None)
    if inprogress is None:
        return None
    return request in inprogress


class EngineWaker:
    """Asks the engine for requests at a given moment.

    The engine asks the scheduler again only after a download, a new request, or its 5-second
    heartbeat; with every host waiting out its delay that would waste up to 5 s per wait. Scrapy
    has no public call for this: the engine's ``_slot.nextcall`` is scheduled with no delay from
    our own timer (a delayed ``schedule`` would swallow earlier wake-ups). This class is the one
    place that touches that private attribute.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._call: Any = None
        self._at: float | None = None

    def wake_at(self, when: float, now: float) -> None:
        if self._call is not None and self._at is not None and self._at <= when:
            return
        self.cancel()
        self._at = when
        self._call = call_later(max(0.0, when - now), self._fire)

    def wake_now(self) -> None:
        """Work is ready (a shared frontier's leases arrived): ask the engine at once."""
        now = monotonic()
        self.wake_at(now, now)

    def _fire(self) -> None:
        self._call = None
        self._at = None
        engine = running_engine(self.crawler)
        slot = getattr(engine, "_slot", None) if engine is not None else None
        if slot is not None and slot.closing is None:
            slot.nextcall.schedule()

    def cancel(self) -> None:
        if self._call is not None:
            self._call.cancel()
        self._call = None
        self._at = None
