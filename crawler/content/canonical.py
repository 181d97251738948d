"""Canonical URLs: which URL a page says it should be known by, and whether to believe it.

A page names its canonical URL with ``<link rel="canonical" href>`` in its HTML or a
``Link: <url>; rel="canonical"`` header (RFC 6596). The crawler honours it only within the
page's own site, since anybody can write any URL there (a scraper's copy naming the original is
harmless, but a page naming a competitor's URL must not make its text count for that URL):

* ``CANONICAL_SCOPE = "domain"`` (default): the canonical URL's host has the page's registered
  domain by the whole public suffix list (``www.example.com`` and ``example.com`` and
  ``docs.example.com`` are one site; ``alice.github.io`` and ``bob.github.io`` are two, as for
  browsers and cookies: github.io is a rule of the list's private section);
* ``"host"``: the page's own host only (http and https alike);
* ``"off"``: never.

The header wins over the HTML when both are given (servers set it on purpose; templates copy
``<link>`` tags about). An honoured canonical URL makes the page an *alias* of it in the index,
and the canonical URL is queued (the frontier's seen-test drops it when known).
:class:`CanonicalChains` bounds what pages naming each other would do: a loop (A names B, B
names A) leaves the first page written as the document; a chain (A names B, B names C) is
followed to its end, at most :data:`MAX_CHAIN` hops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from crawler.net.weburl import join as web_join

HOST = "host"
DOMAIN = "domain"
OFF = "off"

MAX_CHAIN = 5  # hops followed from a page to its canonical's canonical, and on
MAX_REMEMBERED = 1_000_000  # pages whose canonical a crawl remembers for loop and chain checks

_OWS = " \t"
# A parameter's name (a token) and what follows it: "=" and a value, ";" or the end.
_PARAM = re.compile(r"[ \t]*([^\s;=,\"]+)[ \t]*")
_SPACES = re.compile(r"[ \t]*")  # skipped in place: no copy of the rest per parameter
_TOKEN_VALUE = re.compile(r"[^;]*")  # an unquoted value: up to the next ";", as Chromium reads


def link_values(value: str) -> list[tuple[str, dict[str, str | None]]]:
    """The link-values of one ``Link`` header value (RFC 8288 section 3): each its target as
    written (unresolved, spaces around it trimmed) and its parameters by lower-case name, the
    first of each name kept (a second ``rel`` is ignored, as the RFC says), a valueless one
    ``None``. Read as Chromium's ``link_header_util`` reads them: link-values are split at
    commas outside ``<...>`` and double-quoted strings (backslash escapes), and a malformed one
    (no ``<``, no ``>``, text between ``>`` and the first ``;``, a parameter that is not
    ``name[=value]``, an unclosed quoted string) is dropped, not the others."""
    out = []
    for part in split_link_header(value):
        link = _link_value(part)
        if link is not None:
            out.append(link)
    return out


def split_link_header(value: str) -> list[str]:
    """A ``Link`` header value cut into its link-values: at commas outside ``<...>`` and
    double-quoted strings (a backslash escapes in those), blank ones dropped."""
    parts, start, at, end = [], 0, 0, len(value)
    while at < end:
        char = value[at]
        if char == "<":
            close = value.find(">", at)
            at = end if close < 0 else close + 1
            continue
        if char == '"':
            at += 1
            while at < end and value[at] != '"':
                at += 2 if value[at] == "\\" else 1
        elif char == ",":
            parts.append(value[start:at])
            start = at + 1
        at += 1
    parts.append(value[start:])
    return [part.strip(_OWS) for part in parts if part.strip(_OWS)]


def _link_value(part: str) -> tuple[str, dict[str, str | None]] | None:
    if not part.startswith("<"):
        return None
    close = part.find(">")
    if close < 0:
        return None
    target, rest = part[1:close].strip(_OWS), part[close + 1 :].lstrip(_OWS)
    params: dict[str, str | None] = {}
    at, end = 0, len(rest)
    if rest and rest[0] != ";":
        return None
    while at < end:
        while at < end and rest[at] in ";" + _OWS:
            at += 1
        if at >= end:
            break
        name = _PARAM.match(rest, at)
        if name is None:
            return None
        at = name.end()
        value: str | None = None
        if at < end and rest[at] == "=":
            at = _SPACES.match(rest, at + 1).end()  # type: ignore[union-attr]
            if at < end and rest[at] == '"':
                value, at = _quoted(rest, at)
                if value is None:
                    return None
            else:
                token = _TOKEN_VALUE.match(rest, at)
                value, at = token.group().rstrip(_OWS), token.end()  # type: ignore[union-attr]
            at = _SPACES.match(rest, at).end()  # type: ignore[union-attr]
        if at < end and rest[at] != ";":
            return None  # "rel pel=x", 'rel="a" b': not name[=value]
        params.setdefault(name.group(1).lower(), value)
    return target, params


def _quoted(text: str, at: int) -> tuple[str | None, int]:
    """A quoted-string starting at ``text[at]`` (a ``"``), unescaped, and where it ends;
    ``None`` if it does not close."""
    chars, at = [], at + 1
    while at < len(text):
        char = text[at]
        if char == "\\":
            if at + 1 < len(text):
                chars.append(text[at + 1])
            at += 2
            continue
        if char == '"':
            return "".join(chars), at + 1
        chars.append(char)
        at += 1
    return None, at


def link_header_canonical(values: Iterable[str], url: str = "") -> str | None:
    """The target of the first ``rel="canonical"`` link in ``Link`` header values (rel is a
    space-separated list, compared case-insensitively). A link whose ``anchor`` makes another
    resource its context (RFC 8288 section 3.2) says nothing about this page: skipped, unless
    the anchor resolves to ``url`` itself (without ``url``, only an empty anchor is this page)."""
    for value in values:
        for target, params in link_values(value):
            rel = params.get("rel")
            if not rel or "canonical" not in rel.lower().split():
                continue
            anchor = params.get("anchor")
            if anchor is not None and not _about(anchor, url):
                continue
            return target
    return None


def _about(anchor: str, url: str) -> bool:
    """Whether a link's ``anchor`` is the page at ``url`` itself."""
    if not anchor.strip():
        return True
    if not url:
        return False
    try:
        return web_join(url, anchor) == url
    except ValueError:
        return False


class CanonicalPolicy:
    """Which canonical URLs a page may name (see the module docstring).

    ``normalize(url) -> (normalized, host)`` raises ``ValueError`` for a URL the crawl cannot
    take (the frontier's ``normalize_url``); ``domain_of(host)`` gives a host's registered
    domain (``crawler.frontier.urls.registered_domain_function(private=True)``).
    """

    def __init__(
        self,
        scope: str,
        normalize: Callable[[str], tuple[str, str]],
        domain_of: Callable[[str], str] | None = None,
    ) -> None:
        if scope not in (HOST, DOMAIN, OFF):
            raise ValueError(f"CANONICAL_SCOPE must be host, domain or off, got {scope!r}")
        self.scope = scope
        self.normalize = normalize
        self.domain_of = domain_of

    def judge(self, page_url: str, href: str | None) -> tuple[str | None, str]:
        """``(canonical URL, "honoured")`` or ``(None, why not)``: ``none`` (no canonical),
        ``self`` (the page's own URL), ``invalid``, ``off``, ``other_site``."""
        if not href:
            return None, "none"
        if self.scope == OFF:
            return None, "off"
        try:
            target = web_join(page_url, href).partition("#")[0]
            if urlsplit(target).scheme not in ("http", "https"):
                return None, "invalid"
            canonical, host = self.normalize(target)
            page, page_host = self.normalize(page_url)
        except ValueError:
            return None, "invalid"
        if canonical == page:
            return None, "self"
        if host != page_host:
            if self.scope == HOST or self.domain_of is None:
                return None, "other_site"
            if self.domain_of(host) != self.domain_of(page_host):
                return None, "other_site"
        return canonical, "honoured"


class CanonicalChains:
    """What the index does with a page that names a canonical URL, given what earlier pages of
    the crawl named: :meth:`target` is the URL to alias the page to, or None to index it as a
    document of its own (a loop). Remembers up to ``limit`` pages, then forgets all at once."""

    def __init__(self, limit: int = MAX_REMEMBERED, max_chain: int = MAX_CHAIN) -> None:
        self.limit = limit
        self.max_chain = max_chain
        self._named: dict[str, str] = {}  # page -> the canonical URL it named (honoured)

    def target(self, url: str, canonical: str) -> tuple[str | None, str]:
        """``(alias target, "alias")``, ``(None, "loop")`` or ``(target, "chain")`` (followed
        through pages that named a canonical URL in turn, at most ``max_chain`` hops)."""
        seen = {url}
        current = canonical
        hops = 0
        while current in self._named and hops < self.max_chain:
            if current in seen:
                break
            seen.add(current)
            current = self._named[current]
            hops += 1
        if current in seen:
            # The chain comes back to this page: this page stays a document; who named it
            # keeps pointing at it.
            self._named.pop(url, None)
            return None, "loop"
        if len(self._named) >= self.limit:
            self._named.clear()
        self._named[url] = current
        return current, "chain" if hops else "alias"
