"""Reading one sitemap answer, bounded: the part of ``crawler.middlewares.sitemaps`` that runs
on the crawl's content thread (a 50,000-entry file is seconds of lxml and URL parsing, which
the reactor must not wait for).

Scrapy's own utilities do the parsing: ``scrapy.utils.gz.gunzip`` with ``max_size`` (inflating
stops at the limit: a gzip bomb costs at most that much memory) and
``scrapy.utils.sitemap.Sitemap`` (lxml's iterparse, entities not resolved, read entry by entry,
so a file of millions of entries is read only up to the limit). Everything here is a pure
function of the bytes: it touches no reactor state and no crawl database; what it found goes
back to the reactor thread as a :class:`SitemapReading`, problems included, to be logged there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from urllib.parse import urlsplit

from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap

from crawler.frontier import InvalidUrl, normalize_url
from crawler.sitemaps import (
    GZIP,
    TEXT,
    SitemapLimits,
    file_kind,
    parse_lastmod,
    text_sitemap_urls,
)

# One entry: (loc, its normalized form (the crawl database's key), lastmod in epoch seconds).
Entry = tuple[str, str, float | None]


@dataclass
class SitemapReading:
    """What one sitemap file holds, as far as the limits let it be read."""

    index: bool = False  # a sitemap index: ``children`` are sitemaps, ``entries`` is empty
    children: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    foreign: int = 0  # entries on another host, dropped (sitemaps.org: one host per file)
    invalid: int = 0  # entries the frontier could not take
    problems: list[tuple[str, str]] = field(default_factory=list)  # (reason, what happened)
    read: bool = False  # a urlset or text sitemap was read (maybe in part)


def read_sitemap(
    body: bytes, content_type: str | None, url: str, origin: str, limits: SitemapLimits
) -> SitemapReading:
    """Read the sitemap ``url`` answered with ``body``; entries are kept when they are on the
    sitemap's host or on ``origin``'s (the host whose robots.txt named it: a cross-submit)."""
    out = SitemapReading()
    kind = file_kind(body, content_type)
    if kind == GZIP:
        try:
            body = gunzip(body, max_size=limits.max_size)
        except ValueError:  # scrapy's _DecompressionMaxSizeExceeded
            out.problems.append(("bomb", f"inflates past {limits.max_size} bytes "
                                 "(SITEMAPS_MAX_SIZE; a gzip bomb?): dropped"))
            return out
        except (OSError, EOFError) as exc:
            out.problems.append(("corrupt", f"is not valid gzip ({exc}): dropped"))
            return out
        kind = file_kind(body, "text/plain" if body[:4].lower() == b"http" else None)
    if kind is None:
        out.problems.append(("content_type", f"is no sitemap (Content-Type "
                             f"{content_type or 'none'}, {len(body)} bytes starting "
                             f"{body[:20]!r}): not read"))
        return out
    if len(body) > limits.max_size:
        out.problems.append(("size", f"is {len(body)} bytes, over {limits.max_size} "
                             "(SITEMAPS_MAX_SIZE): read up to there"))
        body = body[: limits.max_size]
    limit = limits.max_urls
    too_many = ("urls", f"lists over {limit} entries (SITEMAPS_MAX_URLS, the protocol's "
                "limit): the rest ignored")
    if kind == TEXT:
        urls, more = text_sitemap_urls(body, limit)
        if more:
            out.problems.append(too_many)
        out.read = True
        _keep(out, url, origin, [(u, None) for u in urls])
        return out
    try:
        sitemap = Sitemap(body)
        rows = list(islice(sitemap, limit + 1))
    except Exception as exc:  # lxml on an empty or hopeless document
        out.problems.append(("unreadable", f"is not readable XML ({exc}): dropped"))
        return out
    if len(rows) > limit:
        out.problems.append(too_many)
        rows = rows[:limit]
    if sitemap.type == "sitemapindex":
        out.index = True
        out.children = [loc for r in rows if (loc := r.get("loc", ""))]
    elif sitemap.type == "urlset":
        out.read = True
        _keep(out, url, origin, [(r.get("loc", ""), r.get("lastmod")) for r in rows])
    else:
        out.problems.append(("content_type", f"has root <{sitemap.type}>, not <urlset> or "
                             "<sitemapindex>: not read"))
    return out


def _keep(out: SitemapReading, url: str, origin: str, rows: list[tuple[str, str | None]]) -> None:
    """The entries on the sitemap's own host or the naming origin's, normalized, with their
    lastmod read (the costly part per entry: done here, off the reactor)."""
    parts = urlsplit(url)
    prefixes = (f"{parts.scheme}://{parts.netloc}/", origin + "/")
    hosts = {parts.hostname, urlsplit(origin).hostname}
    kept = out.entries
    for loc, lastmod in rows:
        # most entries start with the sitemap's own origin: no URL parse for them
        if not loc or not (loc.startswith(prefixes) or urlsplit(loc).hostname in hosts):
            out.foreign += 1
            continue
        try:
            key = normalize_url(loc)[0]
        except InvalidUrl:
            out.invalid += 1
            continue
        kept.append((loc, key, parse_lastmod(lastmod)))
