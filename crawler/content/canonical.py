"""Canonical URLs: which URL a page says it should be known by, and whether to believe it.

A page names its canonical URL with ``<link rel="canonical" href>`` in its HTML or a
``Link: <url>; rel="canonical"`` header (RFC 6596). The crawler honours it only within the
page's own site, since anybody can write any URL there (a scraper's copy naming the original is
harmless, but a page naming a competitor's URL must not make its text count for that URL):

* ``CANONICAL_SCOPE = "domain"`` (default): the canonical URL's host has the page's registered
  domain (``www.example.com`` and ``example.com`` and ``docs.example.com`` are one site);
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

# One link-value of a Link header: <target> and its parameters, up to the next link-value.
_LINK_VALUE = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]*(?:\"[^\"]*\"[^;,]*)?)*)")
_REL = re.compile(r"""\brel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)


def link_header_canonical(values: Iterable[str]) -> str | None:
    """The target of the first ``rel="canonical"`` link in ``Link`` header values."""
    for value in values:
        for target, params in _LINK_VALUE.findall(value):
            for quoted, bare in _REL.findall(params):
                if "canonical" in (quoted or bare).lower().split():
                    return target.strip()
    return None


class CanonicalPolicy:
    """Which canonical URLs a page may name (see the module docstring).

    ``normalize(url) -> (normalized, host)`` raises ``ValueError`` for a URL the crawl cannot
    take (the frontier's ``normalize_url``); ``domain_of(host)`` gives a host's registered
    domain (``crawler.frontier.urls.registered_domain_function()``).
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
