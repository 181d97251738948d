"""How long a server says its answer stays fresh (RFC 9111), read the way a *private* cache
reads it: the crawler keeps what it fetched for itself (its workers share one copy, but no
third party is served from it), so ``s-maxage`` and ``public``/``private`` do not apply.

One reading serves both users: the robots.txt cache lifetime (``crawler.robots.cache``) and
the recrawl schedule's hints (``crawler.crawldb.schedule``). Each applies its own bounds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

# RFC 9111 1.2.2: a delta-seconds beyond 2^31 is taken as 2^31.
_MAX_DELTA = 2**31
# One directive: a token, optionally "=" and a token or a quoted string (which may hold commas:
# no-cache="Set-Cookie, Set-Cookie2").
_DIRECTIVE = re.compile(
    r'(?:^|,)\s*(?P<name>[^=,\s]+)\s*(?:=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<token>[^,\s]*)))?'
)


@dataclass(frozen=True, slots=True)
class Freshness:
    """The caching directives of one response.

    ``lifetime``: seconds the answer is fresh from the moment it was received (max-age, else
    Expires - Date, minus any Age already spent in caches on the way); None when the server
    said nothing about it. ``no_store``: keep nothing of it. ``no_cache``: it may be kept but
    must be revalidated before each use (a lifetime of 0 for the crawler's purposes).
    """

    lifetime: float | None = None
    no_store: bool = False
    no_cache: bool = False

    @property
    def stale_at_once(self) -> bool:
        """no-store, no-cache or a zero lifetime: the server wants every use to ask again."""
        return self.no_store or self.no_cache or self.lifetime == 0


NO_HINT = Freshness()


def _directives(cache_control: str) -> dict[str, str | None]:
    """``Cache-Control`` directives by lower-cased name; the first occurrence wins (RFC 9111
    4.2.1). Quoted values are unquoted; a directive without a value maps to None."""
    found: dict[str, str | None] = {}
    for match in _DIRECTIVE.finditer(cache_control):
        name = match["name"].lower()
        if name not in found:
            value = match["quoted"] if match["quoted"] is not None else match["token"]
            found[name] = value
    return found


def _delta_seconds(value: str | None) -> int | None:
    """RFC 9111 1.2.2: a non-negative integer; anything else is no value at all."""
    if value is None or not value.isdigit():
        return None
    return min(int(value), _MAX_DELTA)


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value.strip()).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def freshness(
    cache_control: str | None,
    expires: str | None = None,
    date: str | None = None,
    age: str | None = None,
    *,
    received_at: float | None = None,
) -> Freshness:
    """The freshness a response's headers declare (several header lines joined by commas).

    ``max-age`` beats ``Expires`` (RFC 9111 5.3). ``Expires`` counts from the response's own
    ``Date`` (so the server's clock, not ours, decides), or from ``received_at`` without one;
    an ``Expires`` that is not a valid date means "already expired" (RFC 9111 5.3). ``Age``
    (time already spent in caches on the way) is subtracted.
    """
    directives = _directives(cache_control or "")
    no_store = "no-store" in directives
    # no-cache="field, ..." only asks to revalidate those header fields, not the answer
    no_cache = "no-cache" in directives and not directives["no-cache"]
    lifetime: float | None = None
    max_age = _delta_seconds(directives.get("max-age")) if "max-age" in directives else None
    if max_age is not None:
        lifetime = float(max_age)
    elif expires is not None:
        expires_at = _http_date(expires)
        origin = _http_date(date)
        if origin is None:
            origin = received_at
        lifetime = 0.0 if expires_at is None or origin is None else max(0.0, expires_at - origin)
    if lifetime is not None:
        spent = _delta_seconds(age.strip() if age else None) or 0
        lifetime = max(0.0, lifetime - spent)
    return Freshness(lifetime, no_store, no_cache)


def freshness_of(headers: object, received_at: float | None = None) -> Freshness:
    """:func:`freshness` of a headers object with ``getlist(name) -> list[bytes]`` (Scrapy's
    ``Headers``) or of a plain ``dict``. Cache-Control lines are joined; of the others
    (dates hold commas) the first line counts (RFC 9111 4.2.1)."""

    def lines(name: str) -> list[str]:
        getlist = getattr(headers, "getlist", None)
        if getlist is not None:
            return [v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in getlist(name)]
        value = headers.get(name) if isinstance(headers, dict) else None
        return [] if value is None else [str(value)]

    def first(name: str) -> str | None:
        found = lines(name)
        return found[0] if found else None

    return freshness(
        ", ".join(lines("Cache-Control")) or None,
        first("Expires"),
        first("Date"),
        first("Age"),
        received_at=received_at,
    )
