"""robots.txt as RFC 9309 reads it: what a fetch outcome means, and the rules for one crawler.

Scrapy-free on purpose: the cache, the per-origin bookkeeping and a future Redis backend all
work on :class:`RobotsRecord` (plain data, the raw text), and every worker parses its own copy
with Protego.
"""

from __future__ import annotations

import logging
import string
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from protego import Protego

from crawler.config import defaults
from crawler.config.agent import crawler_token
from crawler.robots.groups import (
    CONTENT_SIGNAL,
    CONTENT_USAGE,
    octets,
    protego_text,
    read_groups,
    weigh_as_written,
)
from crawler.robots.usage import (
    ROBOTS_TXT,
    Signal,
    content_signal,
    content_usage,
    longest_match,
    robots_usage_rule,
)

logger = logging.getLogger(__name__)

#: Bytes parsed at most (RFC 9309 2.5: crawlers must parse at least 500 KiB; what lies beyond
#: may be ignored). The RFC's number, not a setting.
MAX_SIZE = 512_000
# Seconds a cached copy is used (RFC 9309 2.4), unless ROBOTSTXT_CACHE_EXPIRY says otherwise.
DEFAULT_EXPIRY = float(defaults.ROBOTSTXT_CACHE_EXPIRY)

RULES = "rules"  # a 2xx answer: its body's rules apply
ALLOW_ALL = "allow_all"  # 4xx (not 429), too many redirects: "unavailable", no restrictions
DISALLOW_ALL = "disallow_all"  # 5xx, 429, unreachable: "complete disallow" until a retry works


def robots_token(settings: Any) -> str:
    """The product token robots.txt groups are matched with: that of ``ROBOTSTXT_USER_AGENT``
    if set, else that of ``USER_AGENT`` (a site config sets either); see
    :func:`crawler.config.agent.product_token`."""
    return crawler_token(settings.get("USER_AGENT"), settings.get("ROBOTSTXT_USER_AGENT"))


def classify(status: int) -> str:
    """What a final (non-redirect) HTTP status of robots.txt means (RFC 9309 2.3.1)."""
    if 200 <= status < 300:
        return RULES
    if 400 <= status < 500 and status != 429:
        return ALLOW_ALL
    return DISALLOW_ALL


def _utf8_percent(data: bytes) -> str:
    """``data`` as UTF-8, each byte that is not UTF-8 as ``%XX``: what RFC 9309 2.2.2 has a
    path's non-ASCII octets become, so a Latin-1 ``Disallow: /café`` (byte E9) still matches
    ``/caf%E9``, and a stray byte beside a field name is dropped with the name's other junk,
    not glued to it as a replacement character that made the whole line unreadable.

    All of it in the codecs' C loops, never a Python call per run of bad bytes: a binary file
    served as robots.txt is about half bad bytes, and such calls would cost ~190 ms of reactor
    time per 500 KiB (``bench/robots_parse.py``). From the first bad byte on, each bad byte
    becomes the lone surrogate ``U+DC80``-``U+DCFF`` (``surrogateescape``: the very bytes an
    error handler is given), which UTF-8 cannot encode and ``backslashreplace`` writes
    ``\\udcxx``: that with its hex upper-cased and ``\\udc`` made ``%`` is the escape. The hex
    is upper-cased by swapping the case of every ASCII letter before and after (the text's
    own letters come back as they were), and the text's own backslashes are told from the
    escapes' by a ``-`` put after each while the escapes are made. ASCII bytes swapped or
    added never change which bytes are UTF-8.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        valid = error.start  # the text up to there is whole characters: it stays as it is
    tail = data[valid:].translate(_SWAP_CASE)
    backslash = b"\\" in tail  # rare in a robots.txt: both replaces are no-ops without one
    if backslash:
        tail = tail.replace(b"\\", b"\\-")
    escaped = tail.decode("utf-8", "surrogateescape").encode("utf-8", "backslashreplace")
    escaped = escaped.translate(_SWAP_CASE).replace(b"\\UDC", b"%")
    if backslash:
        escaped = escaped.replace(b"\\-", b"\\")
    return data[:valid].decode("utf-8") + escaped.decode("utf-8")


_LETTERS = string.ascii_lowercase + string.ascii_uppercase
# bytes.swapcase() does the same, ~6x slower than a table (measured: 1.3 ms vs 0.2 on 500 KB)
_SWAP_CASE = bytes.maketrans(_LETTERS.encode(), _LETTERS.swapcase().encode())

# A UTF-8 byte-order mark, which may be cut short (``\xEF\xBB`` then the first line): Google's
# parser skips any prefix of it, so does this one.
_BOM = b"\xef\xbb\xbf"


def decode_body(body: bytes, max_size: int = MAX_SIZE, *, cut: bool = False) -> tuple[str, bool]:
    """The text to parse, and whether it was cut at ``max_size`` bytes. ``cut``: the body is
    already short of the file (its download was stopped: a compressed file's first bytes
    may inflate to less than ``max_size``).

    A cut file loses its last partial line too: half a ``Disallow: /private`` would turn into
    ``Disallow: /pri``, a different rule. A leading UTF-8 byte-order mark, whole or partial,
    is skipped (a UTF-16 one decodes the file as UTF-16). Bytes that are not UTF-8 (a Latin-1
    file, a stray byte) are percent-encoded, never fatal, and never cost the line they are on
    (see :mod:`crawler.robots.groups`).
    """
    utf16 = _utf16(body)
    truncated = cut or len(body) > max_size
    if truncated:
        newline = _UTF16_NEWLINE[utf16] if utf16 else b"\n"
        # the line that ends at the limit is whole when its newline comes next (the byte past
        # the limit that read_up_to downloads tells it)
        end = body.rfind(newline, 0, max_size + len(newline))
        while utf16 and end > 0 and end % 2:  # a UTF-16 newline starts on a character, not
            end = body.rfind(newline, 0, end + 1)  # across two (U+0A41 U+0100 hold 0A 00)
        body = body[: end + len(newline)] if end >= 0 else body[:max_size]
    if utf16:
        return body[2:].decode(utf16, errors="replace"), truncated
    skip = 0
    while skip < len(_BOM) and body[skip : skip + 1] == _BOM[skip : skip + 1]:
        skip += 1
    return _utf8_percent(body[skip:]), truncated


_UTF16_NEWLINE = {"utf-16-le": b"\n\x00", "utf-16-be": b"\x00\n"}


def _utf16(body: bytes) -> str | None:
    """The codec of a file saved as UTF-16 with its byte-order mark (Windows editors do it),
    told by the mark and the NUL byte of the first, ASCII character; None for anything else
    (RFC 9309 asks for UTF-8)."""
    if body[:2] == b"\xff\xfe" and body[3:4] == b"\x00":
        return "utf-16-le"
    if body[:2] == b"\xfe\xff" and body[2:3] == b"\x00":
        return "utf-16-be"
    return None


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """One robots.txt outcome for an origin (``scheme://host[:port]``), as cached and shared.

    Times are wall-clock epoch seconds, since a record outlives the process that fetched it.
    ``status`` is the final HTTP status, 0 when the host could not be reached. ``etag`` and
    ``last_modified``: the validators of a 2xx answer, so its refresh is a conditional request
    that a server answers with a bodiless 304 when the file has not changed (last, with
    defaults: a record stored without them reads back).
    """

    origin: str
    kind: str
    status: int
    fetched_at: float
    expires_at: float
    body: str = ""
    etag: str = ""
    last_modified: str = ""

    def fresh(self, now: float) -> bool:
        return now < self.expires_at


class RobotsRules:
    """The rules of one record for one product token, parsed once.

    The groups that apply to the token are picked as RFC 9309 says (exact token match, the
    ``*`` groups as the fallback, see :mod:`crawler.robots.groups`); Protego, given only their
    rules, decides ``Allow`` against ``Disallow`` by the longest matching pattern, an ``Allow``
    winning a tie, with ``*`` and ``$`` wildcards and percent-encoding normalized
    (2.2.2-2.2.3); ``/robots.txt`` itself is always allowed.
    """

    __slots__ = ("_parser", "_sitemaps", "_unreadable", "_usage", "record", "token")

    def __init__(self, record: RobotsRecord, token: str) -> None:
        self.record = record
        # the product token as groups are matched (lower-case; "FooBot/1.0" is "foobot"), so a
        # caller's "FooBot" names the FooBot group, as Google's IsUserAgentAllowed reads it
        self.token = crawler_token(token)
        self._parser: Protego | None = None
        self._sitemaps: list[str] = []
        self._usage: list[tuple[str, str]] = []
        self._unreadable = False
        if record.kind == RULES and record.body.strip():
            try:
                records, self._sitemaps = read_groups(record.body, self.token)
                if records is not None:
                    self._parser = Protego.parse(protego_text(records))
                    weigh_as_written(self._parser)
                    self._usage = [
                        (f, v) for f, v in records if f in (CONTENT_USAGE, CONTENT_SIGNAL) and v
                    ]
            except Exception:  # a parser bug must not stop the crawl, nor ignore the file:
                # the origin is taken as disallowed, as when robots.txt is unreachable
                self._unreadable = True
                logger.warning(
                    "Cannot parse robots.txt of %s (a parser error): nothing of it is fetched",
                    record.origin,
                    exc_info=True,
                )

    @property
    def kind(self) -> str:
        return self.record.kind

    def allowed(self, url: str) -> bool:
        if self.record.kind == DISALLOW_ALL or self._unreadable:
            return False
        if self._parser is None:
            return True
        return self._parser.can_fetch(octets(url), "*")

    def usage(self, path: str) -> list[Signal]:
        """The usage preferences the crawler's group states for ``path`` (with its query):
        every ``Content-Signal`` line, and the ``Content-Usage`` lines of the longest path
        matching it, matched as ``Allow``/``Disallow`` are (draft-ietf-aipref-attach-04; a
        line without a path applies to "/")."""
        signals: list[Signal] = []
        scoped: list[tuple[str, str]] = []
        for field, value in self._usage:
            if field == CONTENT_SIGNAL:
                signals.extend(content_signal(value))
            else:
                scoped.append(robots_usage_rule(value))
        best = longest_match(path, (p for p, _ in scoped))
        for pattern, prefs in scoped:
            if pattern == best:
                signals.extend(content_usage(prefs, ROBOTS_TXT))
        return signals

    def sitemaps(self) -> list[str]:
        """The ``Sitemap:`` lines of the file (absolute URLs, relative ones joined to the
        origin), in file order, without repeats. They belong to no group: every crawler reads
        them (sitemaps.org, "Specifying the Sitemap location in your robots.txt file")."""
        base = self.record.origin + "/"
        return list(dict.fromkeys(urljoin(base, u) for u in self._sitemaps))

    def crawl_delay(self) -> float | None:
        """The wait between fetches the file asks of this crawler: its ``Crawl-delay``, or the
        interval its ``Request-rate`` implies (n requests per s seconds: s / n), the larger."""
        if self._parser is None:
            return None
        delays: list[float] = []
        delay = self._parser.crawl_delay("*")
        if delay is not None:
            delays.append(float(delay))
        rate = self._parser.request_rate("*")
        if rate is not None and rate.requests > 0:
            delays.append(rate.seconds / rate.requests)
        return max(delays) if delays else None
