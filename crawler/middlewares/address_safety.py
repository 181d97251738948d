"""Keeps the crawler from being turned against its own network."""

from __future__ import annotations

import ipaddress
import logging

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached

from crawler.net.addresses import policy_from_settings, unsafe_reason

__all__ = ["AddressSafetyMiddleware", "unsafe_reason"]

logger = logging.getLogger(__name__)

SAFE_SCHEMES = frozenset({"http", "https"})


class AddressSafetyMiddleware:
    """Refuses non-HTTP schemes and private, loopback, link-local and reserved targets.

    IP literals are checked directly; host names are resolved through Scrapy's caching resolver
    and the address it returns is checked: with Scrapy's default resolver and DNS cache that is
    the address the download connects to (a custom ``DNS_RESOLVER`` or ``DNSCACHE_ENABLED =
    False`` weakens this against DNS rebinding). Redirects
    come back through the scheduler and this middleware, so a public page cannot redirect the
    crawler into the private network. ``ALLOW_PRIVATE_ADDRESSES`` (a setting, or
    ``allow_private_addresses`` in a site config) turns the address check off;
    ``ALLOWED_NETWORKS`` allows just the networks and ports listed (``crawler.net.addresses``).
    The download handler checks the policy again on the address it connects to.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.policy = policy_from_settings(crawler.settings)
        self.stats = crawler.stats
        self._warned: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AddressSafetyMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        parsed = urlparse_cached(request)
        if parsed.scheme not in SAFE_SCHEMES:
            self._refuse(request, f"scheme {parsed.scheme!r} is not fetched", "scheme")
        if self.policy.allow_private:
            return None
        host = parsed.hostname or ""
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        ip = host if _is_ip(host) else await self._resolve(host)
        reason = self.policy.refusal(ip, port) if ip else ""
        if reason:
            self._refuse(
                request,
                f"{host}:{port} is a {reason} address (set ALLOWED_NETWORKS or "
                "ALLOW_PRIVATE_ADDRESSES to allow it)",
                "private_address",
            )
        return None

    async def _resolve(self, host: str) -> str:
        from twisted.internet import reactor

        try:
            return await maybe_deferred_to_future(reactor.resolve(host))  # type: ignore[attr-defined]
        except Exception:
            return ""  # the download itself will fail and report the DNS error

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
