"""Which page a ``<meta http-equiv="refresh">`` sends a browser to, as WHATWG HTML reads it.

:func:`parse_refresh` is HTML's "shared declarative refresh steps" (4.2.5.3, the ``refresh``
pragma) up to the URL they parse; :func:`page_refresh` finds the ``<meta>`` whose pragma a
browser acts on in a page's text, the way the HTML tokenizer sees tags, and resolves its URL as
the document would (against a ``<base href>`` seen before it, by :func:`crawler.net.weburl.join`).
The vectors are web-platform-tests' (``tests/test_vectors_metarefresh.py``).

w3lib's ``get_meta_refresh``, which Scrapy's middleware uses, reads the ``content`` with a
regular expression that wants ``url=`` after a ``;`` and so misses ``1, url=foo``, ``1 url=foo``
and ``1; foo``; takes ``+1``, ``-0`` and ``1e0`` the browser refuses; keeps the quote and what
follows it in ``url="foo"bar``; counts ``http-equiv="x-refresh"`` as a refresh; reads a ``<meta>``
inside a ``<template>``, ``<title>``, ``<style>`` or ``<textarea>`` (text to a browser, not a tag);
and applies a ``<base>`` that comes after the refresh.

Where the crawler deliberately differs from a browser: it looks for the ``<meta>`` in the first
4,096 characters of the page only (as Scrapy does: a browser reads the whole document), and the
elements named in ``ignore_tags`` (Scrapy's ``METAREFRESH_IGNORE_TAGS``, ``noscript`` by default:
a browser that runs scripts reads a ``<noscript>`` as text) are skipped with the ones that are
text to any browser.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from html.entities import html5

from crawler.net.weburl import join, request_url

__all__ = ["RAW_TEXT", "header_refresh", "page_refresh", "parse_refresh"]

_WS = "\t\n\x0c\r "  # ASCII whitespace
_DIGITS = re.compile(r"[0-9]*")
_DIGITS_DOTS = re.compile(r"[0-9.]*")
_MAX_DIGITS = 18  # a time past this many digits (31 billion years) is read as 10**18


def parse_refresh(content: str) -> tuple[int, str | None] | None:
    """The time and the URL string of a ``refresh`` pragma's ``content``, or ``None`` where a
    browser does not refresh. The URL is ``None`` for a refresh of the document itself; a
    string is the one the steps hand the URL parser, unresolved."""
    pos, end = 0, len(content)

    def skip_ws(at: int) -> int:
        while at < end and content[at] in _WS:
            at += 1
        return at

    pos = skip_ws(pos)
    digits = _DIGITS.match(content, pos).end()  # type: ignore[union-attr]  # matches ""
    if digits == pos:
        if pos >= end or content[pos] != ".":
            return None
        time = 0
    else:
        # HTML reads any number of digits; Python reads no int of over 4,300 (ValueError), and
        # a time that long is a refresh never due: what it is past 18 digits does not matter.
        number = content[pos:digits].lstrip("0") or "0"
        time = int(number) if len(number) <= _MAX_DIGITS else 10**_MAX_DIGITS
    pos = _DIGITS_DOTS.match(content, digits).end()  # type: ignore[union-attr]
    if pos < end:
        if content[pos] not in ";," + _WS:
            return None
        pos = skip_ws(pos)
        if pos < end and content[pos] in ";,":
            pos += 1
        pos = skip_ws(pos)
    if pos >= end:
        return time, None
    url_string = content[pos:]
    # "url", spaces, "=" and spaces are skipped when all there; else the rest is the URL
    prefix = re.match(r"[uU][rR][lL][\t\n\x0c\r ]*=[\t\n\x0c\r ]*", content[pos:])
    if prefix is not None or content[pos] not in "uU":
        pos += prefix.end() if prefix is not None else 0
        quote = content[pos] if pos < end and content[pos] in "\"'" else ""
        url_string = content[pos + len(quote) :]
        if quote and quote in url_string:
            url_string = url_string[: url_string.index(quote)]
    return time, url_string


# Elements whose content the tokenizer reads as text (RCDATA, RAWTEXT, script data), and
# <template>, whose content is no part of the document: no <meta> in them is one.
RAW_TEXT = (
    "title",
    "textarea",
    "style",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "script",
    "template",
)

# One step of the tokenizer over the markup: a comment, markup that is a bogus comment to its
# ">", an end tag, a start tag's name (attributes are read after it), or a "<" that is text.
_MARKUP = re.compile(
    r"<!--(?:-?>|.*?(?:--!?>|$))"
    r"|<(?:![^>]*|\?[^>]*|/[^a-zA-Z>][^>]*)(?:>|$)"
    r"|(?P<endtag></[a-zA-Z])"
    r"|<(?P<name>[a-zA-Z][^\t\n\x0c\r />]*)",
    re.DOTALL,
)
# "before attribute name" to "after attribute value": spaces and slashes, then ">" or a name
# (its first character may be "="), then optionally "=" and a quoted or an unquoted value.
_ATTRIBUTE = re.compile(
    r"[\t\n\x0c\r /]*(?:(?P<end>>)|(?P<name>[^\t\n\x0c\r />][^\t\n\x0c\r />=]*)"
    r"(?:[\t\n\x0c\r ]*=[\t\n\x0c\r ]*"
    r"(?:\"(?P<dq>[^\"]*)(?:\"|$)|'(?P<sq>[^']*)(?:'|$)|(?P<uq>[^\t\n\x0c\r >]*)))?)?"
)
_TAG_NAME_REST = re.compile(r"[^\t\n\x0c\r />]*")
# No name is longer ("CounterClockwiseContourIntegral;"): a longer run of letters is a name
# and text after it, so only its start is tried (a 16 KB one was 34 ms on the reactor thread).
_LONGEST_NAME = max(map(len, html5))
_REFERENCE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]*;?)")

_PRAGMA = re.compile("refresh", re.IGNORECASE)
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")

SCAN_CHARS = 4096  # how much of a page is looked at (as Scrapy's get_meta_refresh)


def page_refresh(
    text: str, url: str, ignore_tags: Iterable[str] = ("noscript",), limit: int = SCAN_CHARS
) -> tuple[int, str] | None:
    """The time and absolute URL of the refresh a browser performs on a page of ``text`` at
    ``url`` (``url`` itself for a refresh of the document), or ``None``: the first ``<meta
    http-equiv="refresh">`` starting in the first ``limit`` characters whose ``content``
    :func:`parse_refresh` reads and whose URL parses."""
    if _PRAGMA.search(text) is None:  # most pages: no refresh at all
        return None
    skipped = frozenset(RAW_TEXT).union(tag.lower() for tag in ignore_tags)
    base: str | None = None
    pos = 0
    while (found := _MARKUP.search(text, pos)) is not None and found.start() < limit:
        pos = found.end()
        name = found["name"]
        if name is None:
            if found["endtag"] is not None:  # its attributes are read as a start tag's are
                pos = _TAG_NAME_REST.match(text, pos).end()  # type: ignore[union-attr]
                pos = _attributes(text, pos)[1]
                if pos < 0:
                    return None
            continue
        name = name.lower()
        attributes, pos = _attributes(text, pos)
        if pos < 0 or name == "plaintext":  # a tag that does not end is dropped; the rest of
            return None  # the page after <plaintext> is text
        if name in skipped:
            close = re.compile(rf"</{re.escape(name)}[\t\n\x0c\r />]", re.IGNORECASE)
            stop = close.search(text, pos)
            if stop is None:
                return None
            pos = stop.start()
        elif name == "base" and base is None and "href" in attributes:
            try:  # a <base> whose URL does not parse leaves the document's URL in place
                base = _absolute(url, attributes["href"])
            except ValueError:
                base = url
        elif (
            name == "meta"
            and attributes.get("http-equiv", "").lower() == "refresh"
            and (refresh := _refresh(attributes.get("content", ""), base or url, url)) is not None
        ):
            return refresh
    return None


def header_refresh(value: bytes | str, url: str) -> tuple[int, str] | None:
    """The time and absolute URL of the refresh a ``Refresh`` header of the response at
    ``url`` makes a browser perform (HTML 7.5.1, "create and initialize a Document object":
    the header's value, isomorphic-decoded, through the same steps), or ``None``. It comes
    before any ``<meta>`` of the page: the document refreshes once."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return _refresh(value, url, url)


def _refresh(content: str, base: str, url: str) -> tuple[int, str] | None:
    if not content or (parsed := parse_refresh(content)) is None:
        return None
    time, target = parsed
    if target is None:
        return time, url
    try:
        return time, _absolute(base, target)
    except ValueError:  # InvalidUrl, or urljoin's
        return None


def _absolute(base: str, href: str) -> str:
    """``href`` parsed against ``base`` as a browser parses it; ``ValueError`` if it does not
    parse (a host or port that is none, a relative URL against a base that takes none, such
    as ``data:``)."""
    absolute = join(base, href)
    scheme = absolute.partition(":")[0].lower()
    if not _SCHEME.fullmatch(scheme) or absolute == scheme:
        raise ValueError(f"not a URL: {absolute[:200]!r}")
    if scheme in ("http", "https"):
        request_url(absolute)  # raises InvalidUrl for a host or port that does not parse
    return absolute


def _attributes(text: str, pos: int) -> tuple[dict[str, str], int]:
    """A start tag's attributes (the first of each name, values unescaped) and where the tag
    ends, -1 if it does not."""
    attributes: dict[str, str] = {}
    end = len(text)
    while True:
        match = _ATTRIBUTE.match(text, pos)
        assert match is not None  # the pattern matches an empty string
        if match["end"] is not None:
            return attributes, match.end()
        if match["name"] is None or match.end() >= end:
            return attributes, -1
        pos = match.end()
        value = match["dq"] if match["dq"] is not None else match["sq"]
        if value is None:
            value = match["uq"] or ""
        attributes.setdefault(match["name"].lower(), _unescape(value))


def _unescape(value: str) -> str:
    """An attribute value's character references, as the tokenizer resolves them there: a
    named one without ``;`` followed by ``=`` or a letter or digit stays as it is."""
    if "&" not in value:
        return value
    return _REFERENCE.sub(lambda m: _reference(m, value), value)


def _reference(match: re.Match[str], value: str) -> str:
    ref = match[1]
    if ref.startswith("#"):
        return html.unescape(match[0])
    for size in range(min(len(ref), _LONGEST_NAME), 0, -1):  # the longest name first
        name = ref[:size]
        if name in html5:
            after = value[match.start() + 1 + size : match.start() + 2 + size]
            if not name.endswith(";") and (after == "=" or (after.isascii() and after.isalnum())):
                return match[0]
            return html5[name] + ref[size:]
    return match[0]
