"""The crawl's DNS service, attached to the process's resolver, and what a failing name means.

A name that does not resolve must not fail its host's pages one by one (each a lookup, a retry,
a failure in the log): its first failure *holds* the host in the frontier (signal
``host_hold``, as a robots.txt that cannot be fetched does) until the failure's negative cache
entry expires, doubling up to :data:`HOLD_MAX` on each failure after, and the request goes back
to the queue. After ``dns_hold_times`` holds in a row (one for ``nxdomain``: the server's
authoritative "no such name"), the host's requests fail as unreachable ones do, and the frontier
gives the host up after its usual failures. robots.txt requests are left to the robots.txt
middleware, which holds the host on any failure of its own.

Counts: ``dns/lookups``, ``dns/cache_hits``, ``dns/shared_hits`` (answers another worker found),
``dns/coalesced``, ``dns/failures/<kind>``, ``dns/held`` (holds), ``dns/gave_up`` (hosts).
"""

from __future__ import annotations

import logging

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CannotResolveHostError
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.error import DNSLookupError

from crawler import signals as crawler_signals
from crawler.download.dns import CachingDnsResolver, DnsService
from crawler.download.dns_config import DnsConfig
from crawler.download.robots_request import is_robots_request
from crawler.net.dns import ERROR, NXDOMAIN, TRANSIENT

logger = logging.getLogger(__name__)

ATTEMPTS_META = "dns_holds"
#: Longest hold of a host whose name fails (the negative TTL, doubling with each failure in a
#: row).
HOLD_MAX = 900.0


class DnsMiddleware:
    """See the module docstring."""

    def __init__(self, crawler: Crawler, service: DnsService) -> None:
        self.crawler = crawler
        self.service = service
        self.hold_times = DnsConfig.from_settings(crawler.settings).hold_times
        self.hold_max = HOLD_MAX
        self.holds: dict[str, int] = {}  # host -> holds in a row
        self.given_up: set[str] = set()
        service.on_answer = self._resolved
        crawler.signals.connect(self._opened, signals.spider_opened)
        crawler.signals.connect(self._closed, signals.spider_closed)
        crawler.signals.connect(self._wanted, crawler_signals.host_address_wanted)
        crawler.signals.connect(self._discovered, crawler_signals.origin_discovered)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DnsMiddleware:
        return cls(crawler, DnsService.from_crawler(crawler))

    def _opened(self, spider: Spider) -> None:
        CachingDnsResolver.attach(self.service)

    def _closed(self, spider: Spider) -> None:
        if CachingDnsResolver.service is self.service:
            CachingDnsResolver.attach(None)
        self.service.close()

    def _resolved(self, host: str, address: str) -> None:
        signal = crawler_signals.host_resolved
        self.crawler.signals.send_catch_log(signal, host=host, address=address)

    def _discovered(self, origin: str, host: str) -> None:
        """A new host: its name is looked up ahead of its first fetch."""
        self.service.prefetch(host)

    def _wanted(self, host: str) -> None:
        """Resolve ``host`` for the scheduler (politeness per address)."""
        self.service.resolve(host).addCallback(lambda a: self._resolved(host, a.address))

    def process_response(self, request: Request, response, spider: Spider | None = None):  # type: ignore[no-untyped-def]
        if self.holds:
            self.holds.pop(urlparse_cached(request).hostname or "", None)
        return response

    def process_exception(
        self, request: Request, exception: BaseException, spider: Spider | None = None
    ) -> Request | None:
        if not isinstance(exception, (CannotResolveHostError, DNSLookupError)):
            return None
        parsed = urlparse_cached(request)
        host = (parsed.hostname or "").lower()
        if is_robots_request(request) or not host:  # (its redirect hops too, whatever path)
            return None
        kept = self.service.cache.get(host)
        # Scrapy 2.19 wraps Twisted's DNSLookupError (CannotResolveHostError) and the endpoint
        # drops the reason: the cache still holds it.
        kind = (kept.error if kept else "") or ERROR
        held = self.holds.get(host, 0)
        limit = self.hold_times if kind in TRANSIENT else min(1, self.hold_times)
        if held >= limit:
            request.meta["dont_retry"] = True  # stock retrying would ask the same dead name again
            if host not in self.given_up:
                self.given_up.add(host)
                self._inc("dns/gave_up")
                logger.info(
                    "Host %s: DNS %s %d times in a row; its requests now fail", host, kind, held + 1
                )
            return None
        self.holds[host] = held + 1
        negative = self.service.cache.expires_in(host) or self.service.cache.bounds.negative
        seconds = min(self.hold_max, max(negative, negative * 2**held))
        self._inc("dns/held")
        if held == 0:
            logger.info(
                "Host %s: DNS %s; holding it %.1fs (its URLs stay queued)%s",
                host,
                kind,
                seconds,
                "" if kind != NXDOMAIN else ", then its requests fail if it still does not exist",
            )
        self.crawler.signals.send_catch_log(crawler_signals.host_hold, host=host, seconds=seconds)
        retry = request.replace(dont_filter=True)
        retry.meta[ATTEMPTS_META] = request.meta.get(ATTEMPTS_META, 0) + 1
        return retry

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)
