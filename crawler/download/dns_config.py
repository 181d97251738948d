"""The DNS settings (``DNS_*`` of the crawler's own), typed, read once (crawler/config/typed.py).

Free of Scrapy itself (beside the DNS service, which is built from it, as is the DNS middleware);
Scrapy's own ``DNS_TIMEOUT`` stays Scrapy's.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting
from crawler.net.dns import TtlBounds

#: Longest an answer is kept whatever its TTL (6 hours, as Heritrix keeps an address: a host
#: that moves is followed within that), unless dns_min_ttl is longer.
MAX_TTL = 6 * 3600.0


class DnsConfig(FeatureConfig):
    """What ``DNS_*`` says: which servers to ask, how long answers and failures are kept, and
    how many holds a host whose name fails gets. The reasons are in
    ``crawler/config/defaults.py``."""

    servers: tuple[str, ...] = setting("DNS_SERVERS")  # empty: /etc/resolv.conf's
    min_ttl: float = knob("dns_min_ttl")
    negative_ttl: float = knob("dns_negative_ttl")
    hold_times: int = knob("dns_hold_times")

    def ttl_bounds(self) -> TtlBounds:
        """How long answers are kept: their TTL within ``dns_min_ttl`` .. :data:`MAX_TTL`,
        failures ``dns_negative_ttl`` (``TUNING`` knobs)."""
        return TtlBounds(self.min_ttl, max(MAX_TTL, self.min_ttl), self.negative_ttl).check()
