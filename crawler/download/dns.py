"""Host names resolved without blocking, once per TTL for the whole crawl.

Scrapy's default resolver (``CachingThreadedResolver``) calls the operating system's
``getaddrinfo`` on the reactor's thread pool: each lookup holds a thread for up to seconds, ten
threads by default, and what it caches it keeps for ever (a host that moves is fetched at its old
address until the crawl ends). Here:

* :class:`DnsService` (one per crawl) asks DNS servers itself with ``twisted.names``, Twisted's
  own asynchronous DNS client (no thread per lookup, no new dependency: it ships with Twisted),
  at most :data:`CONCURRENCY` lookups at once, one lookup per name however many requests wait
  for it. Answers are kept as long as their TTL says, within ``dns_min_ttl`` .. 6 hours,
  failures for ``dns_negative_ttl`` (:mod:`crawler.net.dns`); a fleet shares them through
  ``dns_shared`` (Redis for the ``redis`` backend), so a name is looked up once per TTL by
  the whole fleet. ``/etc/hosts`` is read first, as the system resolver would.
* Names are looked up ahead (``prefetch``, :data:`PREFETCH`) as soon as the crawl discovers
  their host, in batches under half of :data:`CONCURRENCY`: a host's first fetch then finds
  its address known, and a slow DNS server's latency is out of the path of every host that
  holds a back queue (Mercator's and Heritrix's answer to lookups that take seconds).
* :class:`CachingDnsResolver` is what Scrapy installs on the reactor (``TWISTED_DNS_RESOLVER``):
  built once per process from the process's settings, it hands every name to the service of the
  running crawl (attached by :class:`crawler.middlewares.dns.DnsMiddleware`), or to Scrapy's own
  resolver when no crawl attached one (``scrapy shell``, ``scrapy fetch``).

The address guard is unchanged: the download handler checks the address each connection really
uses, which is the address this resolver gave (no DNS rebinding between check and connect).
"""

from __future__ import annotations

import ipaddress
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer, error, task
from twisted.internet.interfaces import IDelayedCall, IResolverSimple
from twisted.names import client, dns, hosts, resolve
from twisted.names import error as dns_error
from zope.interface import implementer

from crawler.backends.registry import build_backend
from crawler.download.dns_config import DnsConfig
from crawler.net.dns import (
    ERROR,
    NO_ADDRESS,
    NXDOMAIN,
    REFUSED,
    SERVFAIL,
    TIMEOUT,
    DnsAnswer,
    DnsCache,
    NoSharedDns,
    SharedDns,
    TtlBounds,
)

logger = logging.getLogger(__name__)

MAX_CNAME_HOPS = 8  # a longer chain is treated as no address (a loop, or a misconfiguration)
SHARED_POLL = 0.05  # seconds between looks for an answer another worker is fetching
#: A claim on a name for the fleet lasts ``DNS_TIMEOUT``; its worker renews it this many times a
#: term while its lookup waits and runs, so a reactor late by a renewal or two keeps it.
RENEWALS_PER_TERM = 3
#: Lookups in flight at once (one per name however many requests wait). 400: at 200 ms a lookup
#: that is 2,000 new names a second, and a crawl of 1,000 new hosts ran at 98 % of its rate with
#: instant DNS (100 in flight: 84 %; bench/addresses.py --only dns).
CONCURRENCY = 400
CACHE_SIZE = 100_000  # names a worker keeps (least recently used out first)
#: Names of newly discovered hosts looked up ahead of their first fetch, at most this many
#: waiting (then the newest are left to the lookup at the fetch), with no more than half of
#: :data:`CONCURRENCY` in flight for them: a fetch's own lookup never waits behind them.
PREFETCH = 10_000


class DnsLookupFailed(error.DNSLookupError):
    """A name that did not resolve, and why (:data:`crawler.net.dns.FAILURES`)."""

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(f"{name}: DNS {kind}")
        self.name = name
        self.kind = kind


def ttl_bounds(settings: Any) -> TtlBounds:
    """How long answers are kept (:meth:`DnsConfig.ttl_bounds`), from a crawl's settings."""
    return DnsConfig.from_settings(settings).ttl_bounds()


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _server(spec: str) -> tuple[str, int]:
    host, _, port = spec.strip().rpartition(":")
    if not host:
        host, port = port, "53"
    return host, int(port)


def follow_chain(name: str, records: Sequence[Any]) -> tuple[str, float, str]:
    """The IPv4 address ``name`` leads to through the answer's CNAME records, the smallest TTL
    on the way, and where the chain stopped if it did not reach an A record ("" when it did)."""
    by_name: dict[str, list[Any]] = {}
    for rr in records:
        by_name.setdefault(str(rr.name).lower().rstrip("."), []).append(rr)
    current, ttl = name.lower().rstrip("."), float("inf")
    for _ in range(MAX_CNAME_HOPS + 1):
        rrs = by_name.get(current, [])
        for rr in rrs:
            if rr.type == dns.A:
                return rr.payload.dottedQuad(), min(ttl, float(rr.ttl)), ""
        cnames = [rr for rr in rrs if rr.type == dns.CNAME]
        if not cnames:
            return "", ttl, current
        ttl = min(ttl, float(cnames[0].ttl))
        current = str(cnames[0].payload.name).lower().rstrip(".")
    return "", ttl, ""


def failure_kind(exc: BaseException) -> str:
    if isinstance(exc, dns_error.DNSNameError):
        return NXDOMAIN
    if isinstance(exc, dns_error.DNSServerError):
        return SERVFAIL
    if isinstance(exc, dns_error.DNSQueryRefusedError):
        return REFUSED
    if isinstance(exc, (defer.TimeoutError, error.TimeoutError, dns_error.DNSQueryTimeoutError)):
        return TIMEOUT
    return ERROR


class DnsService:
    """One crawl's DNS: see the module docstring."""

    def __init__(
        self,
        *,
        servers: Sequence[str] = (),
        timeout: float = 10.0,
        concurrency: int = CONCURRENCY,
        cache: DnsCache | None = None,
        shared: SharedDns | None = None,
        hosts_file: str = "/etc/hosts",
        stats: Any = None,
        reactor: Any = None,
        prefetch: int = 0,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.timeout = timeout
        # an empty cache is falsy: "or" would replace it
        self.cache = cache if cache is not None else DnsCache(TtlBounds(0, 0, 0))
        self.shared: SharedDns = shared if shared is not None else NoSharedDns()
        self.sharing = not isinstance(self.shared, NoSharedDns)
        self.stats = stats
        self.limit = defer.DeferredSemaphore(max(1, concurrency))
        self.servers = [_server(s) for s in servers]
        names = (
            client.Resolver(servers=self.servers, reactor=reactor)
            if self.servers
            else client.Resolver(resolv="/etc/resolv.conf", reactor=reactor)
        )
        self.resolver = resolve.ResolverChain([hosts.Resolver(file=hosts_file), names])
        self._waiting: dict[str, list[defer.Deferred[DnsAnswer]]] = {}
        self._claims: set[str] = set()  # names claimed for the fleet, renewed until answered
        self._renewal: IDelayedCall | None = None  # the next renewal of the claims
        self.prefetch_max = prefetch
        self._prefetch: deque[str] = deque()
        self._prefetch_names: set[str] = set()
        self._prefetching = 0
        self._prefetch_limit = max(1, concurrency // 2)
        # told of every answer learnt (host, address or ""): politeness per server address
        self.on_answer: Callable[[str, str], None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> DnsService:
        s = crawler.settings
        config = DnsConfig.from_settings(s)  # built once, one line per bad value
        return cls(
            servers=config.servers,
            timeout=s.getfloat("DNS_TIMEOUT"),
            concurrency=CONCURRENCY,
            cache=DnsCache(config.ttl_bounds(), CACHE_SIZE),
            shared=build_backend(crawler, "dns_shared"),
            stats=crawler.stats,
            prefetch=PREFETCH,
        )

    def _inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)

    def resolve(self, name: str) -> defer.Deferred[DnsAnswer]:
        """``name``'s answer (never fails: a failure is an answer with an ``error``)."""
        name = name.lower().rstrip(".")
        kept = self.cache.get(name)
        if kept is not None:
            self._inc("dns/cache_hits")
            return defer.succeed(kept)
        d: defer.Deferred[DnsAnswer] = defer.Deferred()
        waiting = self._waiting.get(name)
        if waiting is not None:
            self._inc("dns/coalesced")
            waiting.append(d)
            return d
        self._waiting[name] = [d]
        defer.ensureDeferred(self._find(name)).addBoth(self._answered, name)
        return d

    def prefetch(self, name: str) -> None:
        """Look ``name`` up ahead of its first fetch, when the lookups allow (see the module
        docstring); its answer reaches ``on_answer`` as any other does."""
        name = name.lower().rstrip(".")
        if (
            not self.prefetch_max
            or name in self._prefetch_names
            or name in self._waiting
            or _is_ip(name.strip("[]"))
        ):
            return
        if len(self._prefetch) >= self.prefetch_max:
            self._inc("dns/prefetch_skipped")  # looked up at its first fetch instead
            return
        self._prefetch.append(name)
        self._prefetch_names.add(name)
        self._pump()

    def prefetching(self) -> int:
        """Names waiting or in flight to be looked up ahead."""
        return len(self._prefetch) + self._prefetching

    def _pump(self) -> None:
        while self._prefetch and self._prefetching < self._prefetch_limit:
            name = self._prefetch.popleft()
            self._prefetch_names.discard(name)
            if name in self._waiting or self.cache.expires_in(name) > 0:
                continue
            self._prefetching += 1
            self._inc("dns/prefetched")
            self.resolve(name).addBoth(self._prefetched)

    def _prefetched(self, result: Any) -> None:
        self._prefetching -= 1
        self._pump()

    def _answered(self, result: Any, name: str) -> None:
        if not isinstance(result, DnsAnswer):  # a bug, not a DNS failure: say so, fail the name
            logger.error("DNS lookup of %s failed unexpectedly: %s", name, result)
            result = DnsAnswer(error=ERROR)
        for d in self._waiting.pop(name, []):
            d.callback(result)

    async def _find(self, name: str) -> DnsAnswer:
        if self.sharing:
            found = await self._from_fleet(name)
            if found is not None:
                answer, seconds = found
                self._inc("dns/shared_hits")
                self._keep(name, answer, seconds)
                return answer
            self._hold(name)
        try:
            answer = await self.limit.run(lambda: defer.ensureDeferred(self._ask(name)))
            seconds = self.cache.bounds.keep_for(answer)
            self._keep(name, answer, seconds)
            if self.sharing:
                self.shared.put(name, answer, seconds)
        finally:
            self._claims.discard(name)  # answered (or failed: the claim lapses unrenewed)
        return answer

    def _keep(self, name: str, answer: DnsAnswer, seconds: float) -> None:
        self.cache.put(name, answer, seconds)
        if self.on_answer is not None:
            self.on_answer(name, answer.address)

    async def _from_fleet(self, name: str) -> tuple[DnsAnswer, float] | None:
        """The fleet's answer, waiting (on the reactor, not a thread) while another worker
        holds the claim on the name; None: this worker holds it now, and looks the name up.

        No deadline of its own: the other worker renews its claim while its lookup waits for
        a slot and runs (behind :data:`CONCURRENCY` others, or along a CNAME chain, it can
        outlast a ``DNS_TIMEOUT``), so the claim lapses only once that worker is gone, and a
        waiter then claims the name and asks. Each call to the shared cache is one round trip
        on the reactor thread, as the robots.txt cache's are: once per name and TTL, and a
        look per poll while waiting, rare next to the fetches it saves; it never waits for an
        absent Redis (the claim is then granted: each worker acts alone)."""
        while True:
            found = self.shared.claim(name, self.timeout)
            if found is True:
                return None
            if found is not False:
                return found
            await task.deferLater(self.reactor, SHARED_POLL, lambda: None)

    def _hold(self, name: str) -> None:
        """Keep this worker's claim on ``name`` alive until it is answered (see
        :meth:`_from_fleet`): one call renews every claim held, :data:`RENEWALS_PER_TERM` times
        a term."""
        self._claims.add(name)
        if self._renewal is None:
            self._renewal = self.reactor.callLater(self.timeout / RENEWALS_PER_TERM, self._renew)

    def _renew(self) -> None:
        self._renewal = None
        if not self._claims:
            return  # none held: the next claim starts the renewals again
        try:
            self.shared.renew(list(self._claims), self.timeout)
        finally:
            self._renewal = self.reactor.callLater(self.timeout / RENEWALS_PER_TERM, self._renew)

    async def _ask(self, name: str) -> DnsAnswer:
        self._inc("dns/lookups")
        current = name
        ttl = float("inf")
        for _ in range(MAX_CNAME_HOPS):
            try:
                answers, _auth, _extra = await self.resolver.lookupAddress(
                    current, timeout=(self.timeout,)
                )
            except Exception as exc:
                kind = failure_kind(exc)
                self._inc(f"dns/failures/{kind}")
                return DnsAnswer(error=kind)
            address, chain_ttl, stopped = follow_chain(current, answers)
            ttl = min(ttl, chain_ttl)
            if address:
                return DnsAnswer(address, ttl)
            if not stopped or stopped == current:
                break
            current = stopped  # the chain leaves the answer: ask for where it points
        self._inc(f"dns/failures/{NO_ADDRESS}")
        return DnsAnswer(error=NO_ADDRESS)

    def close(self) -> None:
        self._prefetch.clear()  # the crawl is over: nothing more is looked up ahead
        self._prefetch_names.clear()
        if self._renewal is not None and self._renewal.active():
            self._renewal.cancel()  # the claims lapse: the crawl is over
        self._renewal = None
        self.shared.close()


@implementer(IResolverSimple)
class CachingDnsResolver(CachingThreadedResolver):
    """``TWISTED_DNS_RESOLVER``: the running crawl's :class:`DnsService`, or Scrapy's own resolver
    when no crawl attached one."""

    service: DnsService | None = None  # the process's running crawl (one per process: scrapyd)

    @classmethod
    def attach(cls, service: DnsService | None) -> None:
        cls.service = service

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        service = type(self).service
        if service is None or _is_ip(name):
            return super().getHostByName(name, timeout)
        return service.resolve(name).addCallback(_address_or_failure, name)


def _address_or_failure(answer: DnsAnswer, name: str) -> str:
    if not answer.ok:
        raise DnsLookupFailed(name, answer.error)
    return answer.address
