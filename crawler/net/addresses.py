"""Which network addresses the crawler may connect to: free of Scrapy, used by the address-safety
middleware (before a request goes out) and by the download handler (when the connection is made).

By default only globally routable addresses are fetched. ``ALLOW_PRIVATE_ADDRESSES`` (or a site
config's ``allow_private_addresses``) allows every address; ``ALLOWED_NETWORKS`` allows just the
networks and ports listed, e.g. ``["127.0.0.2/32:8080", "10.20.0.0/16"]`` (a network without a
port allows every port of it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def unsafe_reason(ip: str) -> str:
    """Why fetching ``ip`` is refused by default, or "" if it is a public address ("" for a
    name: only addresses are judged here).

    IPv6 addresses that carry an IPv4 address (mapped, 6to4, Teredo) are judged by it; anything
    not globally routable is refused, which also covers carrier-grade NAT (100.64.0.0/10, where
    some clouds keep their metadata service) and documentation ranges.
    """
    addr = _address(ip)
    if addr is None:
        return ""
    for attr in (
        "is_loopback",
        "is_private",
        "is_link_local",
        "is_multicast",
        "is_reserved",
        "is_unspecified",
    ):
        if getattr(addr, attr):
            return attr[3:].replace("_", "-")
    if not addr.is_global:
        return "non-global"
    return ""


def _address(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = addr.ipv4_mapped or addr.sixtofour or (addr.teredo[1] if addr.teredo else None)
        if embedded is not None:
            return embedded
    return addr


def parse_network(text: str) -> tuple[Network, int | None]:
    """``"10.0.0.0/8"``, ``"127.0.0.2:8080"``, ``"[::1]:80"``, ``"::1/128"``: a network and an
    optional port. Raises ValueError with the reason."""
    text = text.strip()
    port: int | None = None
    if text.startswith("["):  # [v6]:port
        addr, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{text!r}: expected [address]:port")
            port = int(rest[1:])
        text = addr
    elif text.count(":") == 1:  # v4:port or v4/len:port
        text, _, port_text = text.partition(":")
        port = int(port_text)
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"port {port} out of range")
    return ipaddress.ip_network(text, strict=False), port


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False
    allowed: tuple[tuple[Network, int | None], ...] = ()

    @classmethod
    def from_values(cls, allow_private: bool, networks: Iterable[str]) -> AddressPolicy:
        return cls(allow_private, tuple(parse_network(n) for n in networks))

    def refusal(self, ip: str, port: int | None = None) -> str:
        """Why connecting to ``ip:port`` is refused, or "" if it is allowed."""
        if self.allow_private:
            return ""
        reason = unsafe_reason(ip)
        if not reason:
            return ""
        addr = _address(ip)
        for network, allowed_port in self.allowed:
            if (
                addr is not None
                and addr.version == network.version
                and addr in network
                and (allowed_port is None or allowed_port == port)
            ):
                return ""
        return reason


def policy_from_settings(settings: Any) -> AddressPolicy:
    """The crawl's policy from ``ALLOW_PRIVATE_ADDRESSES`` and ``ALLOWED_NETWORKS`` (a list, or
    ``a,b``; ``scrapy crawl`` has read a JSON list into a list already, with the settings
    schema). A malformed entry raises ValueError naming it: a guard must never be switched off
    by a typo."""
    networks = settings.getlist("ALLOWED_NETWORKS")
    try:
        return AddressPolicy.from_values(settings.getbool("ALLOW_PRIVATE_ADDRESSES"), networks)
    except ValueError as exc:
        raise ValueError(f"ALLOWED_NETWORKS: {exc}") from None
