"""What kind of sitemap file an answer is: XML (a urlset or an index), gzip, or text.

Sitemaps.org allows XML, gzip-compressed XML and plain text (one URL per line, UTF-8); RSS and
Atom feeds are left out. Servers label sitemaps every which way (``application/octet-stream``
for ``.xml.gz``, ``text/html`` for generated XML), so the bytes decide first and the label
only when they do not: a gzip magic number is gzip, a body that opens with ``<`` is XML, and a
``text/plain`` body whose lines are URLs is a text sitemap. Anything else (an HTML page, an
image, a login form answered with 200) is the wrong content and is not read.
"""

from __future__ import annotations

XML = "xml"
GZIP = "gzip"
TEXT = "text"

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


def file_kind(body: bytes, content_type: str | None) -> str | None:
    """XML, GZIP or TEXT, or None: not a sitemap."""
    if body[:2] == _GZIP_MAGIC:
        return GZIP
    head = body[:512].removeprefix(_BOM).lstrip()
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if head[:1] == b"<":
        # XML sitemaps start with "<?xml" or "<urlset"/"<sitemapindex"; an HTML page is not one
        lowered = head[:200].lower()
        if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
            return None
        return XML
    if ctype in ("text/plain", "") and head[:4].lower() == b"http":
        return TEXT
    return None


def text_sitemap_urls(body: bytes, limit: int) -> tuple[list[str], bool]:
    """The URLs of a text sitemap (one absolute http(s) URL per line; other lines ignored), at
    most ``limit``, and whether there were more."""
    urls: list[str] = []
    for raw in body.splitlines():
        line = raw.strip().decode("utf-8", errors="replace").removeprefix("\ufeff")
        if not line.lower().startswith(("http://", "https://")):
            continue
        if len(urls) >= limit:
            return urls, True
        urls.append(line)
    return urls, False
