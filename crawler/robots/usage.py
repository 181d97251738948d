"""Usage preferences: what a site says its content may be used for, and what the crawl does
about it given the purpose it declared (``CRAWL_PURPOSE``). Free of Scrapy: plain data in,
one decision out.

The signals read (each a :class:`Signal`, kept verbatim, unknown values included):

* robots.txt ``Content-Signal:`` (Cloudflare's Content Signals Policy, September 2025:
  ``search=yes|no``, ``ai-input=``, ``ai-train=``);
* ``Content-Usage`` of the IETF AI-preferences drafts: the vocabulary of
  draft-ietf-aipref-vocab-05 (``train-ai``, ``search``; ``y``/``n``; a ``n`` wins over a ``y``)
  attached as draft-ietf-aipref-attach-04 says, as an HTTP header (an RFC 9651 dictionary)
  and as a robots.txt rule of a group, optionally scoped to a path
  (``Content-Usage: /blog/ train-ai=y``: the longest matching path wins, as for
  ``Allow``/``Disallow``);
* ``X-Robots-Tag`` and ``<meta name="robots">`` values beyond noindex/nofollow: ``noai``,
  ``noimageai``, ``noarchive``, ``nosnippet``, ``unavailable_after: <date>``;
* TDMRep (the W3C TDMRep community group's final report): the ``tdm-reservation`` and ``tdm-policy``
  headers and meta tags, and ``/.well-known/tdmrep.json`` (a JSON list of rules, each with a
  ``location`` path pattern; the longest matching location applies, see
  :func:`tdmrep_rules`).

Each signal denies some *uses* (:data:`USES`: the four purposes a crawl can declare). The one
table is :data:`DENIES`; :func:`decide` turns the uses denied and the crawl's purposes into what
happens to the page (README, "Usage preferences"):

* every purpose of the crawl denied, known before the fetch (robots.txt, tdmrep.json): not
  fetched; known only from the answer: fetched but not kept (no item, no index, no WARC);
* otherwise, ``search`` denied: not indexed; ``archive`` denied: not archived (no WARC
  records); ``ai-train``/``ai-input`` denied: kept, the denial recorded on the item
  (``usage_denied``) for whoever builds a data set of it.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from crawler.config import defaults
from crawler.config.schema import PURPOSES, RULES
from crawler.meta import USAGE_BEFORE_META, USAGE_META
from crawler.robots.directives import Directives, unavailable_after_date, x_robots_tag

SEARCH = "search"
ARCHIVE = "archive"
AI_TRAIN = "ai-train"
AI_INPUT = "ai-input"
USES = PURPOSES  # what a crawl may declare as its purpose (CRAWL_PURPOSE)

# Where a signal came from.
ROBOTS_TXT = "robots.txt"
TDMREP_JSON = "tdmrep.json"
HEADER = "header"
META = "meta"
BEFORE_FETCH = frozenset({ROBOTS_TXT, TDMREP_JSON})  # known before the page is requested

# Signal names.
CONTENT_SIGNAL = "content-signal"
CONTENT_USAGE = "content-usage"
ROBOTS = "robots"  # X-Robots-Tag, <meta name="robots"> (or the crawler's own token)
TDM = "tdm"  # tdm-reservation, tdm-policy

# Effects, strongest first.
NOT_FETCHED = "not_fetched"
NOT_KEPT = "not_kept"
NOT_INDEXED = "not_indexed"
NOT_ARCHIVED = "not_archived"
RECORDED = "recorded"

_NO: frozenset[str] = frozenset()

#: The decision table: (signal, key, value) -> the uses it denies. A pair absent from the table
#: is an unknown value: recorded and reported verbatim, never read as a denial.
DENIES: dict[tuple[str, str, str], frozenset[str]] = {
    (CONTENT_SIGNAL, "search", "yes"): _NO,
    (CONTENT_SIGNAL, "search", "no"): frozenset({SEARCH}),
    (CONTENT_SIGNAL, "ai-input", "yes"): _NO,
    (CONTENT_SIGNAL, "ai-input", "no"): frozenset({AI_INPUT}),
    (CONTENT_SIGNAL, "ai-train", "yes"): _NO,
    (CONTENT_SIGNAL, "ai-train", "no"): frozenset({AI_TRAIN}),
    (CONTENT_USAGE, "search", "y"): _NO,
    (CONTENT_USAGE, "search", "n"): frozenset({SEARCH}),
    (CONTENT_USAGE, "train-ai", "y"): _NO,
    (CONTENT_USAGE, "train-ai", "n"): frozenset({AI_TRAIN}),
    (ROBOTS, "noai", ""): frozenset({AI_TRAIN, AI_INPUT}),
    # Images only; a page saying it keeps its text usable, so it is recorded.
    (ROBOTS, "noimageai", ""): _NO,
    (ROBOTS, "noarchive", ""): frozenset({ARCHIVE}),
    # No excerpt may be shown: an answer built from the page quotes it (Google reads nosnippet
    # as "not in AI Overviews" too); a search result can go without a snippet.
    (ROBOTS, "nosnippet", ""): frozenset({AI_INPUT}),
    # Past: the page is kept and marked noindex (crawler.robots.directives), so a search index
    # drops its earlier copy, as for ``noindex``; no answer may be built from it either.
    (ROBOTS, "unavailable_after", "past"): frozenset({AI_INPUT}),
    (ROBOTS, "unavailable_after", "future"): _NO,
    (TDM, "tdm-reservation", "1"): frozenset({AI_TRAIN, AI_INPUT}),
    (TDM, "tdm-reservation", "0"): _NO,
    (TDM, "tdm-policy", "url"): _NO,  # where the licence is: recorded
}


@dataclass(frozen=True, slots=True)
class Signal:
    """One preference a site stated: where (``source``), which (``name``, ``key``, lower-case)
    and the value as written (trimmed; matched against the table in any case)."""

    source: str
    name: str
    key: str
    value: str = ""

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.source} {self.name}:{self.key}{value}"

    @property
    def stat(self) -> str:
        """The stats key: ``usage/<signal>/<value>`` (``usage/content-signal:ai-train/no``)."""
        return f"usage/{self.name}:{self.key}/{self.value or 'set'}"

    def table_key(self, now: datetime | None = None) -> tuple[str, str, str]:
        value = self.value.lower()
        if self.key == "unavailable_after":
            when = unavailable_after_date(self.value)
            if when is None:  # no date: in no row of the table, so unknown
                return (self.name, self.key, "")
            return (self.name, self.key, "past" if when <= (now or datetime.now(UTC)) else "future")
        if self.key == "tdm-policy":
            return (self.name, self.key, "url" if value else "")
        return (self.name, self.key, value)


@dataclass(frozen=True)
class Decision:
    """What the crawl does with a page, given its signals and the crawl's purposes."""

    purposes: tuple[str, ...]
    signals: tuple[Signal, ...] = ()
    denied: frozenset[str] = frozenset()
    unknown: tuple[Signal, ...] = ()
    fetch: bool = True
    keep: bool = True
    index: bool = True
    archive: bool = True
    # the answer's X-Robots-Tag directives for the crawler's token, read once with its signals:
    # the spider's noindex and nofollow start from a copy (Directives.copy)
    robots: Directives = field(default_factory=Directives, compare=False)

    @property
    def effect(self) -> str:
        """The strongest effect, for counting: not_fetched ... recorded; "" with no signal."""
        if not self.fetch:
            return NOT_FETCHED
        if not self.keep:
            return NOT_KEPT
        if not self.index:
            return NOT_INDEXED
        if not self.archive:
            return NOT_ARCHIVED
        return RECORDED if self.signals else ""


def decide(
    signals: Iterable[Signal], purposes: Sequence[str], now: datetime | None = None
) -> Decision:
    """The decision table applied (module docstring). ``purposes``: the crawl's, valid."""
    signals = tuple(dict.fromkeys(signals))
    denied: set[str] = set()
    before: set[str] = set()
    unknown: list[Signal] = []
    for signal in signals:
        uses = DENIES.get(signal.table_key(now))
        if uses is None:
            unknown.append(signal)
            continue
        denied |= uses
        if signal.source in BEFORE_FETCH:
            before |= uses
    wanted = set(purposes)
    all_denied = wanted <= denied
    return Decision(
        purposes=tuple(purposes),
        signals=signals,
        denied=frozenset(denied),
        unknown=tuple(unknown),
        fetch=not wanted <= before,
        keep=not all_denied,
        index=not all_denied and SEARCH not in denied,
        archive=not all_denied and ARCHIVE not in denied,
    )


# --- reading the signals ----------------------------------------------------------------------

_MEMBER = re.compile(r"\s*([^=,;\s]+)\s*(?:=\s*([^,;]*?))?\s*(?:;[^,]*)?(?:,|$)")


def _dictionary(text: str) -> list[tuple[str, str]]:
    """``key=value, key=value`` members (RFC 9651 dictionary, read leniently: parameters after
    ``;`` dropped, a bare key kept with an empty value, a quoted value unquoted)."""
    out: list[tuple[str, str]] = []
    for match in _MEMBER.finditer(text):
        key, value = match.group(1), (match.group(2) or "").strip()
        if not key:
            continue
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out.append((key.lower(), value))
    return out


def content_signal(text: str, source: str = ROBOTS_TXT) -> list[Signal]:
    """A ``Content-Signal:`` value (``search=yes, ai-train=no``)."""
    return [Signal(source, CONTENT_SIGNAL, k, v) for k, v in _dictionary(text)]


def content_usage(text: str, source: str = HEADER) -> list[Signal]:
    """A ``Content-Usage`` value (``train-ai=n, search=y``); in robots.txt without its path."""
    return [Signal(source, CONTENT_USAGE, k, v) for k, v in _dictionary(text)]


def robots_usage_rule(value: str) -> tuple[str, str]:
    """A robots.txt ``Content-Usage`` value as (path pattern, preferences): a value starting
    with ``/`` names the path it applies to; otherwise it applies to the whole site ("/")."""
    value = value.strip()
    if value.startswith("/"):
        path, _, prefs = value.partition(" ")
        return path, prefs.strip()
    return "/", value


def _pattern(path: str) -> re.Pattern[str]:
    """A robots.txt path pattern (``*`` any characters, ``$`` at the end anchors) as a regex."""
    anchored = path.endswith("$")
    body = ".*".join(re.escape(part) for part in path.rstrip("$").split("*"))
    return re.compile(body + ("$" if anchored else ""))


def longest_match(path: str, patterns: Iterable[str]) -> str | None:
    """The longest of ``patterns`` that matches ``path`` (robots.txt matching), None if none."""
    best: str | None = None
    for pattern in patterns:
        if (best is None or len(pattern) > len(best)) and _pattern(pattern).match(path):
            best = pattern
    return best


# The robots directives read here (noindex and nofollow keep their own, older path: the item's
# noindex, the links dropped; see crawler.robots.directives).
USAGE_DIRECTIVES = frozenset({"noai", "noimageai", "noarchive", "nosnippet"})
# Words robots directives are known to hold that say nothing of usage (Google's, Bing's and the
# older engines' list): not signals. Any other word is one nobody defined: reported as written.
_OTHER_DIRECTIVES = frozenset({
    "all", "index", "follow", "noindex", "nofollow", "none", "noimageindex", "notranslate",
    "indexifembedded", "nocache", "noodp", "noydir",
})


def robots_directives(words: Iterable[str], valued: Iterable[tuple[str, str]],
                      source: str) -> list[Signal]:
    """The usage signals of robots directives (``X-Robots-Tag``, ``<meta name="robots">``):
    the words of :data:`USAGE_DIRECTIVES`, ``unavailable_after``, and any word no engine
    defined (an unknown signal, kept as written)."""
    out = []
    for word in words:
        if word not in _OTHER_DIRECTIVES:
            out.append(Signal(source, ROBOTS, word))
    for name, value in valued:
        if name == "unavailable_after":
            out.append(Signal(source, ROBOTS, name, value.strip()))  # a date, as written
    return out


def tdm_signals(reservation: str | None, policy: str | None, source: str) -> list[Signal]:
    """The TDMRep header or meta values: ``tdm-reservation`` (``1`` reserved, ``0`` not; any
    other value kept as written) and ``tdm-policy`` (a URL)."""
    out = []
    if reservation is not None:
        out.append(Signal(source, TDM, "tdm-reservation", reservation.strip()))
    if policy is not None and policy.strip():
        out.append(Signal(source, TDM, "tdm-policy", policy.strip()))
    return out


@dataclass(frozen=True)
class TdmRule:
    location: str
    reservation: str
    policy: str = ""


def tdmrep_rules(body: bytes | str) -> list[TdmRule]:
    """The rules of a ``/.well-known/tdmrep.json``: a JSON list of objects with ``location``
    (a path pattern, ``*`` wildcards) and ``tdm-reservation`` (0 or 1), optionally
    ``tdm-policy``. A malformed file, or entry, gives no rules (nothing is guessed); a value
    that is neither 0 nor 1 is kept as written (reported unknown)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(data, list):
        return []
    rules = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        location, reservation = entry.get("location"), entry.get("tdm-reservation")
        if not isinstance(location, str) or reservation is None or isinstance(reservation, bool):
            continue
        if not location.startswith("/"):
            location = "/" + location
        policy = entry.get("tdm-policy")
        rules.append(TdmRule(location, str(reservation).strip(),
                             policy if isinstance(policy, str) else ""))
    return rules


def tdmrep_signals(rules: Sequence[TdmRule], path: str) -> list[Signal]:
    """The signals of the rule whose location matches ``path`` (with its query) the longest."""
    best = longest_match(path, (r.location for r in rules))
    if best is None:
        return []
    rule = next(r for r in rules if r.location == best)
    return tdm_signals(rule.reservation, rule.policy or None, TDMREP_JSON)


_META_TAG = re.compile(rb"<meta\s[^>]*>", re.IGNORECASE)
_ATTR = re.compile(rb"""([a-zA-Z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_HEAD_END = re.compile(rb"</head\s*>|<body[\s>]", re.IGNORECASE)
META_SCAN = 65_536  # bytes of a page searched for its usage meta tags: they belong in <head>
_UTF16_SNIFF = 256  # bytes that tell a UTF-16 page by its NULs


def meta_tags(body: bytes, names: Iterable[str]) -> dict[str, str]:
    """``<meta name=... content=...>`` of ``names`` (lower-case) in the page's first
    :data:`META_SCAN` bytes, repeated ones joined by ", ". A scan, not a parse: the WARC writer
    must know before the page is parsed whether to keep it."""
    wanted = set(names)
    out: dict[str, str] = {}
    head = _ascii_compatible(body[:META_SCAN])
    end = _HEAD_END.search(head)
    if end is not None:  # the rest is the page's body: no meta tag of its head is there
        head = head[: end.start()]
    for tag in _META_TAG.findall(head):
        attrs = {
            m.group(1).lower(): (m.group(2) or m.group(3) or m.group(4) or b"")
            for m in _ATTR.finditer(tag)
        }
        name = attrs.get(b"name", b"").decode("latin-1").strip().lower()
        if name in wanted and b"content" in attrs:
            content = attrs[b"content"].decode("utf-8", "replace").strip()
            out[name] = f"{out[name]}, {content}" if name in out else content
    return out


def _ascii_compatible(head: bytes) -> bytes:
    """A page's first bytes with its markup in ASCII bytes, as the scan reads it: a UTF-16 page
    (by its byte order mark, which decides as it does for a page's decoding, else by its ASCII
    markup's every other byte being NUL, which a ``Content-Type: ...; charset=utf-16`` page
    shows) decoded as such and written in UTF-8; any other as it is. Every other encoding a
    browser knows writes ASCII as ASCII.

    Not the page decoder's choice (:mod:`crawler.content` is no layer of robots'): a UTF-16 page
    that neither its BOM nor its header declares decodes as windows-1252 there, and its meta
    tags would be NUL-separated noise to a browser too. Reading them anyway errs the polite way:
    a ``noindex`` or ``noai`` it carries is obeyed."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        codec = "utf-16"  # the BOM says which, and is dropped
    elif head.startswith(codecs.BOM_UTF8) or b"\x00" not in head[:_UTF16_SNIFF]:
        return head
    else:
        sample = head[:_UTF16_SNIFF]
        pairs = len(sample) // 2
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        if odd * 4 >= pairs * 3 and even * 4 < pairs:
            codec = "utf-16-le"
        elif even * 4 >= pairs * 3 and odd * 4 < pairs:
            codec = "utf-16-be"
        else:
            return head
    return head.decode(codec, "replace").encode("utf-8")


# --- a page's signals and decision ---------------------------------------------------------

def purposes_of(settings: Any) -> tuple[str, ...]:
    """The crawl's ``CRAWL_PURPOSE``, read as the schema reads it (already validated at
    start; a settings object or a mapping)."""
    value = settings.get("CRAWL_PURPOSE") or defaults.CRAWL_PURPOSE
    return tuple(RULES["CRAWL_PURPOSE"].read(value, repr))


def response_signals(
    header: Callable[[str], list[str]],
    body: bytes | None,
    token: str,
    said: Directives | None = None,
) -> list[Signal]:
    """The usage signals of an answer: its ``Content-Usage``, ``X-Robots-Tag`` (those for every
    crawler and those for ``token``; ``said``: already read, by :func:`x_robots_tag`),
    ``tdm-reservation``/``tdm-policy`` headers, and, for an HTML ``body``, the same in its meta
    tags (:func:`meta_tags`). ``header(name)``: every value of a header, decoded."""
    signals: list[Signal] = []
    for value in header("Content-Usage"):
        signals.extend(content_usage(value, HEADER))
    if said is None:
        said = x_robots_tag(header("X-Robots-Tag"), token)
    signals.extend(robots_directives(said.words, said.valued, HEADER))
    signals.extend(tdm_signals(_first(header("tdm-reservation")), _first(header("tdm-policy")),
                               HEADER))
    if body is not None:
        names = ["robots", "tdm-reservation", "tdm-policy"]
        if token and token not in ("robots", "*"):
            names.append(token)
        metas = meta_tags(body, names)
        page = Directives()
        page.add(metas.get("robots", ""))
        if token in metas and token != "robots":
            page.add(metas[token])
        signals.extend(robots_directives(page.words, page.valued, META))
        signals.extend(tdm_signals(metas.get("tdm-reservation"), metas.get("tdm-policy"), META))
    return signals


def page_decision(
    response: Any, meta: dict[str, Any], token: str, purposes: Sequence[str]
) -> Decision:
    """The decision for a page's answer (a Scrapy response, duck-typed), made once and kept in
    its request's ``meta[USAGE_META]``: the WARC writer asks before the spider does. The
    signals known before the fetch (robots.txt, tdmrep.json) come from
    ``meta[USAGE_BEFORE_META]``. Its ``robots`` are the answer's ``X-Robots-Tag`` directives for
    ``token``, read here once for both."""
    made = meta.get(USAGE_META)
    # The meta travels to a redirect's next request and a retry: a decision is for one answer
    # (the robots gate also clears it as a request goes out).
    key = (response.url, response.status)
    if made is not None and made[0] == key:
        return made[1]

    def header(name: str) -> list[str]:
        return [v.decode("latin-1") for v in response.headers.getlist(name)]

    content_type = _first(header("Content-Type")) or ""
    body = None
    if "html" in content_type.lower():
        body = _decoded_head(response.body, header("Content-Encoding"))
    said = x_robots_tag(header("X-Robots-Tag"), token)
    signals = [*meta.get(USAGE_BEFORE_META, ()), *response_signals(header, body, token, said)]
    decision = replace(decide(signals, purposes), robots=said)
    meta[USAGE_META] = (key, decision)
    return decision


def _decoded_head(body: bytes, encodings: list[str]) -> bytes | None:
    """The first :data:`META_SCAN` bytes of a body as the page has them: the WARC writer sees
    it still gzip- or deflate-encoded. Another coding (br, zstd) is not read here."""
    codings = [c.strip().lower() for v in encodings for c in v.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return body[:META_SCAN]
    if codings[-1] not in ("gzip", "x-gzip", "deflate") or len(codings) > 1:
        return None
    try:
        return zlib.decompressobj(47).decompress(body, META_SCAN)  # gzip or zlib header
    except zlib.error:
        try:
            return zlib.decompressobj(-15).decompress(body, META_SCAN)  # raw deflate
        except zlib.error:
            return None


def path_of(url: str) -> str:
    """The path and query robots.txt patterns are matched against."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _first(values: list[str]) -> str | None:
    return values[0] if values else None
