"""robots.txt as RFC 9309 reads it: what a fetch outcome means, and the rules for one crawler.

Scrapy-free on purpose: the cache, the per-origin bookkeeping and a future Redis backend all
work on :class:`RobotsRecord` (plain data, the raw text), and every worker parses its own copy
with Protego.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from protego import Protego

from crawler.config import defaults

logger = logging.getLogger(__name__)

# RFC 9309's bounds (see crawler/config/defaults.py): bytes parsed, seconds a cached copy is used.
MAX_SIZE = defaults.ROBOTSTXT_MAX_SIZE
DEFAULT_EXPIRY = float(defaults.ROBOTSTXT_CACHE_EXPIRY)

RULES = "rules"  # a 2xx answer: its body's rules apply
ALLOW_ALL = "allow_all"  # 4xx (not 429), too many redirects: "unavailable", no restrictions
DISALLOW_ALL = "disallow_all"  # 5xx, 429, unreachable: "complete disallow" until a retry works

_TOKEN_RE = re.compile(r"\s*([A-Za-z_-]+)")


def robots_token(settings: Any) -> str:
    """The product token robots.txt groups are matched with: ``ROBOTSTXT_USER_AGENT`` if set,
    else the first word of ``USER_AGENT`` (a site config sets either)."""
    return product_token(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT"))


def product_token(user_agent: str | None) -> str:
    """The robots.txt product token of a User-Agent: ``crawler-bot/0.1 (+url)`` -> ``crawler-bot``.

    RFC 9309 2.2.1: the token is letters, ``_`` and ``-``, matched case-insensitively, so the
    version and comment parts of the header never take part in group matching.
    """
    match = _TOKEN_RE.match(user_agent or "")
    if match is None:
        return (user_agent or "").strip().lower() or "*"
    return match.group(1).lower()


def classify(status: int) -> str:
    """What a final (non-redirect) HTTP status of robots.txt means (RFC 9309 2.3.1)."""
    if 200 <= status < 300:
        return RULES
    if 400 <= status < 500 and status != 429:
        return ALLOW_ALL
    return DISALLOW_ALL


def decode_body(body: bytes, max_size: int = MAX_SIZE) -> tuple[str, bool]:
    """The text to parse, and whether it was cut at ``max_size`` bytes.

    A cut file loses its last partial line too: half a ``Disallow: /private`` would turn into
    ``Disallow: /pri``, a different rule. Invalid UTF-8 (a binary file, Latin-1) is replaced,
    never fatal: lines that are not rules are ignored by the parser anyway.
    """
    truncated = len(body) > max_size
    if truncated:
        body = body[:max_size]
        cut = body.rfind(b"\n")
        if cut >= 0:
            body = body[: cut + 1]
    text = body.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff"), truncated


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """One robots.txt outcome for an origin (``scheme://host[:port]``), as cached and shared.

    Times are wall-clock epoch seconds, since a record outlives the process that fetched it.
    ``status`` is the final HTTP status, 0 when the host could not be reached.
    """

    origin: str
    kind: str
    status: int
    fetched_at: float
    expires_at: float
    body: str = ""

    def fresh(self, now: float) -> bool:
        return now < self.expires_at


class RobotsRules:
    """The rules of one record for one product token, parsed once.

    Protego picks the group whose user-agent line matches the token (longest match wins, ``*``
    as the fallback); ``Allow`` against ``Disallow`` is decided by the longest matching pattern,
    with ``*`` and ``$`` wildcards (RFC 9309 2.2.2-2.2.3).
    """

    __slots__ = ("_parser", "record", "token")

    def __init__(self, record: RobotsRecord, token: str) -> None:
        self.record = record
        self.token = token
        self._parser: Protego | None = None
        if record.kind == RULES and record.body.strip():
            try:
                self._parser = Protego.parse(record.body)
            except Exception:  # a parser bug must not stop the crawl: the file is unusable
                logger.warning("Cannot parse robots.txt of %s; no rules applied", record.origin)

    @property
    def kind(self) -> str:
        return self.record.kind

    def allowed(self, url: str) -> bool:
        if self.record.kind == DISALLOW_ALL:
            return False
        if self._parser is None:
            return True
        return self._parser.can_fetch(url, self.token)

    def sitemaps(self) -> list[str]:
        """The ``Sitemap:`` lines of the file (absolute URLs, relative ones joined to the
        origin), in file order, without repeats. They belong to no group: every crawler reads
        them (sitemaps.org, "Specifying the Sitemap location in your robots.txt file")."""
        if self._parser is None:
            return []
        base = self.record.origin + "/"
        return list(dict.fromkeys(urljoin(base, u.strip()) for u in self._parser.sitemaps))

    def crawl_delay(self) -> float | None:
        """The wait between fetches the file asks of this crawler: its ``Crawl-delay``, or the
        interval its ``Request-rate`` implies (n requests per s seconds: s / n), the larger."""
        if self._parser is None:
            return None
        delays: list[float] = []
        delay = self._parser.crawl_delay(self.token)
        if delay is not None:
            delays.append(float(delay))
        rate = self._parser.request_rate(self.token)
        if rate is not None and rate.requests > 0:
            delays.append(rate.seconds / rate.requests)
        return max(delays) if delays else None
