"""How long a server says its answer stays fresh (RFC 9111), read the way a *private* cache
reads it: the crawler keeps what it fetched for itself (its workers share one copy, but no
third party is served from it), so ``s-maxage`` and ``public``/``private`` do not apply.

One reading serves both users: the robots.txt cache lifetime (``crawler.robots.cache``) and
the recrawl schedule's hints (``crawler.crawldb.schedule``). Each applies its own bounds.

Both read the *explicit* lifetime only, so this reads no heuristic one (RFC 9111 4.2.2: a
cache may assume a tenth of the time since ``Last-Modified`` without it). For robots.txt a
server that stamps every answer ``Last-Modified: now`` would get it fetched every minute. The
schedule reads ``Last-Modified`` itself, the way Nutch's adaptive schedule does (``sync_delta``:
a refetched page unchanged for a time waits 0.7 of it or more, up to ``max_interval``, where
the heuristic says a tenth), and on a page's first fetch deliberately not at all.
http-tests/cache-tests' cases, the heuristic ones with the heuristic computed there, are in
``tests/test_vectors_freshness.py``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

# RFC 9111 1.2.2: a delta-seconds beyond 2^31 is taken as 2^31.
_MAX_DELTA = 2**31
# One directive: a token, optionally "=" and a token or a quoted string (which may hold commas:
# no-cache="Set-Cookie, Set-Cookie2"). No whitespace around "=" (RFC 9111 5.2's grammar):
# "max-age =100" is a max-age without a value.
_DIRECTIVE = re.compile(
    r'(?:^|,)\s*(?P<name>[^=,\s]+)(?:=(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<token>[^,\s]*)))?'
)
# RFC 9110 5.6.7: the three formats of an HTTP-date, names in any case (cache-tests' "should"),
# anything else is no date (an Expires that is none is in the past: RFC 9111 5.3).
_DAYS = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_CLOCK = r"(?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)"
_HTTP_DATES = [
    re.compile(
        rf"(?:{_DAYS}), (?P<day>\d\d) (?P<month>{_MONTHS}) (?P<year>\d{{4}}) {_CLOCK} GMT", re.I
    ),
    re.compile(
        r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
        rf"(?P<day>\d\d)-(?P<month>{_MONTHS})-(?P<year>\d\d) {_CLOCK} GMT",
        re.I,
    ),
    re.compile(
        rf"(?:{_DAYS}) (?P<month>{_MONTHS}) (?P<day>[ \d]\d) {_CLOCK} (?P<year>\d{{4}})", re.I
    ),
]
_MONTH_NUMBERS = {name.lower(): n for n, name in enumerate(_MONTHS.split("|"), 1)}


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
    """RFC 9111 1.2.2: a non-negative integer; anything else is no value at all. Only ASCII
    digits (``str.isdigit`` also takes Latin-1's ``²``, which ``int`` refuses), and one too
    long for ``int`` (over 4,300 digits) is the cap too: a header never raises."""
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    digits = value.lstrip("0")
    return _MAX_DELTA if len(digits) > len(str(_MAX_DELTA)) else min(int(digits or 0), _MAX_DELTA)


def _http_date(value: str | None, now: float | None = None) -> float | None:
    """An HTTP-date (RFC 9110 5.6.7) as a timestamp, or None if ``value`` is not one. A
    two-digit year (rfc850-date) more than 50 years ahead of ``now`` is the past century's."""
    if not value:
        return None
    for form in _HTTP_DATES:
        match = form.fullmatch(value.strip())
        if match is not None:
            break
    else:
        return None
    year = int(match["year"])
    if len(match["year"]) == 2:
        this_year = datetime.fromtimestamp(time.time() if now is None else now, UTC).year
        year += this_year - this_year % 100
        if year > this_year + 50:
            year -= 100
    try:
        moment = datetime(
            year,
            _MONTH_NUMBERS[match["month"].lower()],
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            int(match["second"]),
            tzinfo=UTC,
        )
    except ValueError:  # 31 Feb, 25:00:00
        return None
    return moment.timestamp()


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
    origin = _http_date(date, received_at)
    if origin is None:
        origin = received_at
    if max_age is not None:
        lifetime = float(max_age)
    elif expires is not None:
        expires_at = _http_date(expires, received_at)
        lifetime = 0.0 if expires_at is None or origin is None else max(0.0, expires_at - origin)
    spent = _delta_seconds(age.strip() if age else None) or 0
    if lifetime is not None:
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
