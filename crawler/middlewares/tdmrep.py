"""TDMRep's ``/.well-known/tdmrep.json``: read once per origin, only by a crawl for AI training or
AI input (text and data mining: ``CRAWL_PURPOSE`` holds ``ai-train`` or ``ai-input``).

Downloader middleware right after the robots.txt gate (order 102): the first page request of an
origin the gate let through waits while the file is fetched (``engine.download``, as the gate
fetches a robots.txt the frontier did not hand out), then the host rests
``FRONTIER_MIN_DELAY`` before the page goes: the extra request is made inside the page's own
politeness slot (the frontier hands the host out again only after the page), so the host sees
one more request, never two at once nor a shorter gap. Every other request of the origin waits
for the same fetch. A missing, unreadable or malformed file states nothing (no rules): the page
is fetched as before. The rule matching the page's path (the longest ``location``) adds its
``tdm-reservation``/``tdm-policy`` to the signals known before the fetch
(``meta[USAGE_BEFORE_META]``); a reservation refusing every purpose of the crawl means the page
is not fetched (``crawler.robots.usage``, README "Usage preferences").
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred

from crawler.config import defaults
from crawler.frontier.urls import origin_of
from crawler.meta import ROBOTS_META, TDMREP_META, USAGE_BEFORE_META
from crawler.robots.usage import (
    AI_INPUT,
    AI_TRAIN,
    NOT_FETCHED,
    TdmRule,
    decide,
    path_of,
    purposes_of,
    tdmrep_rules,
    tdmrep_signals,
)

logger = logging.getLogger(__name__)

TDMREP_PATH = "/.well-known/tdmrep.json"


class TdmRepMiddleware:
    """See the module docstring. Not configured unless the crawl's purpose is TDM."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.purposes = purposes_of(settings)
        if not {AI_TRAIN, AI_INPUT} & set(self.purposes):
            # off for a crawl that is not for text and data mining; no reason given, since
            # Scrapy logs a NotConfigured reason as a WARNING in every ordinary crawl
            raise NotConfigured
        self.crawler = crawler
        self.rest = settings.getfloat("FRONTIER_MIN_DELAY", defaults.FRONTIER_MIN_DELAY)
        self.rules: dict[str, list[TdmRule]] = {}
        self.pending: dict[str, list[Deferred[None]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TdmRepMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        meta = request.meta
        if TDMREP_META in meta or ROBOTS_META in meta or meta.get("dont_obey_robotstxt"):
            return None
        origin = origin_of(request.url)
        if origin is None:
            return None
        rules = self.rules.get(origin)
        if rules is None:
            rules = await self._fetch(origin)
        signals = tdmrep_signals(rules, path_of(request.url))
        if not signals:
            return None
        before = meta[USAGE_BEFORE_META] = [*meta.get(USAGE_BEFORE_META, ()), *signals]
        if not decide(before, self.purposes).fetch:
            stats = self.crawler.stats
            if stats is not None:
                for signal in signals:
                    stats.inc_value(signal.stat)
                stats.inc_value(f"usage/effect/{NOT_FETCHED}")
            raise IgnoreRequest(f"tdmrep.json reserves TDM rights on {request.url}")
        return None

    async def _fetch(self, origin: str) -> list[TdmRule]:
        """The origin's rules, fetched once; a request arriving meanwhile waits for them."""
        waiting = self.pending.get(origin)
        if waiting is not None:
            d: Deferred[None] = Deferred()
            waiting.append(d)
            await maybe_deferred_to_future(d)
            return self.rules.get(origin, [])
        self.pending[origin] = []
        rules: list[TdmRule] = []
        try:
            rules = await self._download(origin)
            if self.rest > 0:
                await maybe_deferred_to_future(_sleep(self.rest))
        finally:
            self.rules[origin] = rules
            for d in self.pending.pop(origin, []):
                d.callback(None)
        return rules

    async def _download(self, origin: str) -> list[TdmRule]:
        engine = self.crawler.engine
        assert engine is not None
        request = Request(
            origin + TDMREP_PATH,
            meta={TDMREP_META: origin},
            dont_filter=True,
        )
        stats = self.crawler.stats
        try:
            response = await maybe_deferred_to_future(
                deferred_from_coro(engine.download_async(request))
            )
        except Exception as exc:  # no answer: no rules, as for a missing file
            logger.debug("tdmrep.json of %s not fetched: %s", origin, exc)
            if stats is not None:
                stats.inc_value("tdmrep/failed")
            return []
        if stats is not None:
            stats.inc_value("tdmrep/fetched")
        if response.status != 200:
            return []
        rules = tdmrep_rules(response.body)
        if stats is not None:
            stats.inc_value("tdmrep/with_rules" if rules else "tdmrep/no_rules")
        return rules


def _sleep(seconds: float) -> Deferred[Any]:
    from twisted.internet import reactor  # installed by now (never at import: Scrapy's)
    from twisted.internet.task import deferLater

    return deferLater(reactor, seconds, lambda: None)  # type: ignore[arg-type]
