"""What kind of sitemap file an answer is (XML, gzip, text or JSON Feed), read from its bytes.

Sitemaps.org allows XML (sitemaps, and RSS or Atom feeds), gzip-compressed XML and plain text
(one URL per line, UTF-8); a JSON Feed (a JSON object whose ``version`` is a
``https://jsonfeed.org/version/...`` URL) is read as the other feeds are. Servers label
sitemaps every which way (``application/octet-stream`` for ``.xml.gz`` and ``.txt``,
``text/html`` for generated XML, no ``Content-Type`` at all), so the label decides nothing, as
in crawler-commons' ``MimeTypeDetector``: a gzip magic number is gzip; a body that opens with
``<`` (after a byte-order mark and white space) is XML unless it is an HTML page; a body of
text whose first line that says something is an absolute ``http(s)`` URL is a text sitemap
(blank lines, a byte-order mark and ``#`` comment lines before it are allowed: hand-written
files have them). Anything else (an HTML page, an image, a
login form, a JSON error answered with 200) is the wrong content and is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

XML = "xml"
GZIP = "gzip"
TEXT = "text"
JSON = "json"  # a JSON Feed (crawler.sitemaps.jsonfeed)

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_URL_STARTS = ("http://", "https://")
_SNIFF = 65_536  # bytes of a text file looked at to find its first meaningful line
# The root of an RSS 2.0, RSS 1.0 (RDF) or Atom feed, after a prolog of a few hundred bytes
_FEED_ROOT = re.compile(rb"<(?:rss|feed|rdf:RDF)[\s>/]")
_FEED_HEAD = 2048
_JSON_FEED = b"jsonfeed.org/version/"  # the "version" member every JSON Feed has


def file_kind(body: bytes) -> str | None:
    """XML, GZIP, TEXT or JSON, or None: not a sitemap."""
    if body[:2] == _GZIP_MAGIC:
        return GZIP
    head = body[:_SNIFF].removeprefix(_BOM).lstrip()
    if head[:1] == b"<":
        # XML sitemaps start with "<?xml" or "<urlset"/"<sitemapindex"; an HTML page is not one
        lowered = head[:200].lower()
        if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
            return None
        return XML
    if head[:1] == b"{":  # JSON: a JSON Feed says so in its "version" (any other: not read)
        return JSON if _JSON_FEED in head.replace(b"\\/", b"/") else None
    if b"\x00" in head:  # binary: an image, a UTF-16 file, an archive
        return None
    for line in _meaningful_lines(head):
        return TEXT if line.lower().startswith(_URL_STARTS) else None
    return None


def text_sitemap_urls(body: bytes, limit: int) -> tuple[list[str], bool, int]:
    """The URLs of a text sitemap (one absolute http(s) URL per line), at most ``limit``,
    whether there were more, and how many lines were neither a URL, blank nor a comment."""
    urls: list[str] = []
    other = 0
    for line in _meaningful_lines(body):
        if not line.lower().startswith(_URL_STARTS):
            other += 1
            continue
        if len(urls) >= limit:
            return urls, True, other
        urls.append(line)
    return urls, False, other


def cut_text(body: bytes, size: int) -> bytes:
    """The first ``size`` bytes of a text sitemap without its last, partial line: a URL cut in
    the middle is another URL (crawler-commons skips it too)."""
    if len(body) <= size:
        return body
    body = body[:size]
    return body[: body.rfind(b"\n") + 1]


def _meaningful_lines(body: bytes) -> Iterator[str]:
    """The lines of a text file that say something: stripped, without a BOM, blank lines and
    ``#`` comments left out. Invalid UTF-8 is replaced, never fatal (that line is not a URL)."""
    text = body.decode("utf-8", errors="replace").removeprefix("\ufeff")
    for raw in text.splitlines():
        line = raw.strip().removeprefix("\ufeff").strip()
        if line and not line.startswith("#"):
            yield line


def is_feed(body: bytes) -> bool:
    """Whether an answer is an RSS or Atom feed (an XML file whose root is ``<rss>``,
    ``<feed>`` or ``<rdf:RDF>``) or a JSON Feed: a seed that is one is read as a feed, not as
    a page."""
    kind = file_kind(body)
    return kind == JSON or (kind == XML and _FEED_ROOT.search(body, 0, _FEED_HEAD) is not None)
