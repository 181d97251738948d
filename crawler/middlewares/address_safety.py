"""Keeps the crawler from being turned against its own network."""

from __future__ import annotations

import ipaddress
import logging

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached

logger = logging.getLogger(__name__)

SAFE_SCHEMES = frozenset({"http", "https"})


def unsafe_reason(ip: str) -> str:
    """Why fetching ``ip`` is refused, or "" if it is a public address.

    IPv6 addresses that carry an IPv4 address (mapped, 6to4, Teredo) are judged by it; anything
    not globally routable is refused, which also covers carrier-grade NAT (100.64.0.0/10, where
    some clouds keep their metadata service) and documentation ranges.
    """
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return ""
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = addr.ipv4_mapped or addr.sixtofour or (addr.teredo[1] if addr.teredo else None)
        if embedded is not None:
            addr = embedded
    for attr in ("is_loopback", "is_private", "is_link_local", "is_multicast", "is_reserved",
                 "is_unspecified"):
        if getattr(addr, attr):
            return attr[3:].replace("_", "-")
    if not addr.is_global:
        return "non-global"
    return ""


class AddressSafetyMiddleware:
    """Refuses non-HTTP schemes and private, loopback, link-local and reserved targets.

    IP literals are checked directly; host names are resolved through Scrapy's caching resolver
    and the address it returns is checked: with Scrapy's default resolver and DNS cache that is
    the address the download connects to (a custom ``DNS_RESOLVER`` or ``DNSCACHE_ENABLED =
    False`` weakens this against DNS rebinding). Redirects
    come back through the scheduler and this middleware, so a public page cannot redirect the
    crawler into the private network. ``ALLOW_PRIVATE_ADDRESSES`` (a setting, or
    ``allow_private_addresses`` in a site config) turns the address check off; tests on
    loopback set it.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.allow_private = crawler.settings.getbool("ALLOW_PRIVATE_ADDRESSES")
        self.stats = crawler.stats
        self._warned: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AddressSafetyMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        parsed = urlparse_cached(request)
        if parsed.scheme not in SAFE_SCHEMES:
            self._refuse(request, f"scheme {parsed.scheme!r} is not fetched", "scheme")
        if self.allow_private:
            return None
        host = parsed.hostname or ""
        reason = unsafe_reason(host)
        if not reason and not _is_ip(host):
            reason = await self._resolved_reason(host)
        if reason:
            self._refuse(
                request,
                f"{host} is a {reason} address (set ALLOW_PRIVATE_ADDRESSES to allow it)",
                "private_address",
            )
        return None

    async def _resolved_reason(self, host: str) -> str:
        from twisted.internet import reactor

        try:
            ip = await maybe_deferred_to_future(reactor.resolve(host))  # type: ignore[attr-defined]
        except Exception:
            return ""  # the download itself will fail and report the DNS error
        return unsafe_reason(ip)

    def _refuse(self, request: Request, why: str, stat: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"address_safety/refused/{stat}")
        if stat not in self._warned:
            self._warned.add(stat)
            logger.warning("Refused %s: %s", request.url[:300], why)
        else:
            logger.debug("Refused %s: %s", request.url[:300], why)
        raise IgnoreRequest(why)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
