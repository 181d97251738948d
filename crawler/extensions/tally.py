"""The crawl's one per-host tally (:mod:`crawler.report.tally`), kept while the crawl runs.

Every fetch's end (``fetch_finished``) and the delay the frontier applied after it
(``fetch_completed``) go into it; the progress line, the end summary, the crawl record and a
Redis worker's heartbeat read it (``crawler.get_extension(CrawlTally)``) instead of each counting
on its own. Its stats: ``pages/ok``, ``pages/status/<code>`` (answers that went on to the spider,
robots.txt apart) and ``pages/broken``; the broken links themselves (the first
``BROKEN_LINKS_KEPT``, each with the page it was found on) go to the stats as ``broken_links``
when the spider closes. A page requisite (``[requisites]``) is a fetch of its host but never a
page nor a broken link, as robots.txt: its answers are ``requisites/fetched``,
``requisites/status/<code>`` and ``requisites/bytes``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from time import monotonic

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from crawler import signals as crawler_signals
from crawler.frontier import Outcome
from crawler.meta import REQUISITE_META, ROBOTS_META, STOPPED_META, TDMREP_META, found_on
from crawler.report.tally import HostTallies, Tallied, is_ok

# Broken links kept with their URL (memory stays bounded on a site of a million dead links; the
# count goes on past it).
BROKEN_LINKS_KEPT = 10_000

# What a listener hears of each fetch that reached the network: the request, what it added to
# its host's tally, its network time, the response that goes on to the spider (or None), the
# request that follows it (a retry, a redirect, or None), the status (None: no answer) and the
# body's bytes.
Listener = Callable[
    [Request, Tallied, float, Response | None, Request | None, int | None, int], None
]


class CrawlTally:
    """See the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.clock = monotonic
        self.hosts = HostTallies()
        self.statuses: Counter[int] = Counter()  # answers that went on to the spider
        # (url, status; 0: no answer, the page it was found on; "": none known), the first kept
        self.broken: list[tuple[str, int, str]] = []
        self.broken_count = 0
        self._listeners: list[Listener] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlTally:
        tally = cls(crawler)
        connect = crawler.signals.connect
        connect(tally.fetch_finished, crawler_signals.fetch_finished)
        connect(tally.fetch_completed, crawler_signals.fetch_completed)
        connect(tally.spider_closed, signals.spider_closed)
        return tally

    def listen(self, listener: Listener) -> None:
        """Call ``listener`` after each fetch has been tallied (the crawl record writes it)."""
        self._listeners.append(listener)

    # -- what the crawl says -------------------------------------------------------------------

    def fetch_finished(
        self,
        request: Request,
        outcome: Outcome,
        duration: float | None,
        response: Response | None = None,
        followed_by: Request | None = None,
        status: int | None = None,
        size: int = 0,
    ) -> None:
        if outcome == Outcome.NOT_SENT or duration is None:
            return  # never reached the network
        if request.meta.get(STOPPED_META):
            return  # cut short by the crawl's stop: it goes back to the frontier
        requisite = bool(request.meta.get(REQUISITE_META))
        # a fetch, not a page: robots.txt, tdmrep.json, a page's requisite
        robots = bool(request.meta.get(ROBOTS_META) or request.meta.get(TDMREP_META)) or requisite
        end = self.clock()
        tallied = self.hosts.fetched(
            _host(request), end - duration, end, status, page=response is not None,
            final=followed_by is None, robots=robots,
        )
        stats = self.crawler.stats
        assert stats is not None
        if requisite:
            stats.inc_value("requisites/fetched")
            stats.inc_value(f"requisites/status/{status or 'none'}")
            stats.inc_value("requisites/bytes", size)
        if response is not None and not robots:
            self.statuses[response.status] += 1
            stats.inc_value(f"pages/status/{response.status}")
            if is_ok(response.status):
                stats.inc_value("pages/ok")
        if tallied.broken:
            self.broken_count += 1
            stats.inc_value("pages/broken")
            if len(self.broken) < BROKEN_LINKS_KEPT:
                self.broken.append((request.url, status or 0, found_on(request)))
        for listener in self._listeners:
            listener(request, tallied, duration, response, followed_by, status, size)

    def fetch_completed(
        self, request: Request, host: str, delay: float | None, outcome: Outcome
    ) -> None:
        if delay is not None:
            self.hosts[_host(request)].delay_applied(delay)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        """Every broken link kept, into the stats before the stats file is written."""
        if self.broken:
            stats = self.crawler.stats
            assert stats is not None
            stats.set_value(
                "broken_links",
                [
                    {"url": url, "status": status, "found_on": page or None}
                    for url, status, page in self.broken
                ],
            )

    # -- what the views read ---------------------------------------------------------------------

    def busiest(self, n: int) -> list[tuple[str, int, float | None]]:
        """``(host, pages, mean gap)`` of the hosts with the most pages."""
        return [(host, t.pages, t.gap) for host, t in self.hosts.busiest(n)]


def _host(request: Request) -> str:
    """The host as the frontier keys it (its politeness is per host name, whatever the port)."""
    return urlparse_cached(request).hostname or ""

