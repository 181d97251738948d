"""Reading one sitemap answer, bounded: the part of ``crawler.middlewares.sitemaps`` that runs
on the crawl's content thread (a 50,000-entry file is seconds of lxml and URL parsing, which
the reactor must not wait for).

The bytes decide what the file is (``crawler.sitemaps.file_kind``: XML, gzip or text, whatever
the ``Content-Type``); :func:`inflate` inflates gzip up to the size limit and stops there (a
gzip bomb costs at most that much memory, and is read up to the limit as a plain file past it
is: crawler-commons' partial mode); ``crawler.sitemaps.read_xml`` reads
XML entry by entry (no entity expanded, no DTD, nothing fetched) and stops past the limit;
``crawler.sitemaps.Coverage`` keeps the entries the sitemap may list (sitemaps.org's folder
rule, ``SITEMAPS_FOLDER_RULE``). Everything here is a pure function of the bytes: it touches
no reactor state and no crawl database; what it found goes back to the reactor thread as a
:class:`SitemapReading`, problems included, to be logged there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from gzip import GzipFile
from io import BytesIO

from crawler.frontier import InvalidUrl, normalize_url
from crawler.sitemaps import (
    FEEDS,
    FOREIGN,
    GZIP,
    IN,
    JSON,
    SITEMAPINDEX,
    TEXT,
    URLSET,
    Coverage,
    SitemapFile,
    SitemapLimits,
    cut_text,
    file_kind,
    parse_lastmod,
    read_json_feed,
    read_xml,
    text_sitemap_urls,
)

# One entry: (loc, its normalized form (the crawl database's key), lastmod in epoch seconds).
Entry = tuple[str, str, float | None]

_CHUNK = 65_536  # bytes inflated at a time


@dataclass
class SitemapReading:
    """What one sitemap file holds, as far as the limits let it be read."""

    index: bool = False  # a sitemap index: ``children`` are sitemaps, ``entries`` is empty
    children: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    foreign: int = 0  # entries on another host, dropped (sitemaps.org: one host per file)
    out_of_folder: int = 0  # entries of its host outside its folder (SITEMAPS_FOLDER_RULE)
    off_site: int = 0  # sitemaps an index names on another site (SITEMAPS_FOLDER_RULE)
    invalid: int = 0  # entries the frontier could not take, lines that are no URL
    problems: list[tuple[str, str]] = field(default_factory=list)  # (reason, what happened)
    read: bool = False  # a urlset or text sitemap was read (maybe in part)


def read_sitemap(
    body: bytes, content_type: str | None, url: str, file: SitemapFile, limits: SitemapLimits,
    folder_rule: bool = True,
) -> SitemapReading:
    """Read the sitemap ``file`` (fetched from ``url``) answered with ``body``; its entries
    are kept when the sitemap may list them (:class:`crawler.sitemaps.Coverage`)."""
    out = SitemapReading()
    kind = file_kind(body)
    gzipped = kind == GZIP
    if gzipped:
        try:
            body = inflate(body, limits.max_size + 1)  # a byte more than the limit: cut or not
        except (OSError, EOFError, struct.error) as exc:
            out.problems.append(("corrupt", f"is not valid gzip ({exc}): dropped"))
            return out
        kind = file_kind(body)
        if kind == GZIP:
            kind = None
    if kind is None:
        out.problems.append(("content_type", f"is no sitemap (Content-Type "
                             f"{content_type or 'none'}, {len(body)} bytes starting "
                             f"{body[:20]!r}): not read"))
        return out
    if len(body) > limits.max_size:  # the same cut for both: the entries up to the limit
        size = (f"inflates past {limits.max_size} bytes (sitemap_max_bytes; a gzip bomb?)"
                if gzipped else f"is {len(body)} bytes, over {limits.max_size} "
                "(sitemap_max_bytes)")
        out.problems.append(("size", f"{size}: cut, read up to there"))
        body = cut_text(body, limits.max_size) if kind == TEXT else body[: limits.max_size]
    limit = limits.max_urls
    too_many = ("urls", f"lists over {limit} entries (sitemap_max_urls, the protocol's "
                "limit): the rest ignored")
    coverage = Coverage(url, file.origin, named=file.named, folder_rule=folder_rule,
                        vouched=file.vouched)
    if kind == TEXT:
        urls, more, other = text_sitemap_urls(body, limit)
        if more:
            out.problems.append(too_many)
        out.read = True
        out.invalid += other
        _keep(out, coverage, [(u, None) for u in urls])
        return out
    if kind == JSON:
        rows, more, error = read_json_feed(body, limit, url)
        if error:
            out.problems.append(("unreadable", f"is not a readable JSON Feed ({error}): "
                                 "dropped"))
            return out
        if more:
            out.problems.append(too_many)
        out.read = True
        _keep(out, coverage, rows)
        return out
    sitemap = read_xml(body, limit, url)
    if sitemap.error:
        out.problems.append(("unreadable", f"is not readable XML ({sitemap.error}): dropped"))
        return out
    if sitemap.more:
        out.problems.append(too_many)
    if sitemap.hidden:
        out.problems.append(("entities", f"has {sitemap.hidden} locations made of XML "
                             "entities, never expanded (XXE): dropped"))
    if sitemap.root == SITEMAPINDEX:
        out.index = True
        for loc, _ in sitemap.rows:
            if coverage.child(loc):
                out.children.append(loc)
            else:
                out.off_site += 1
    elif sitemap.root == URLSET or sitemap.root in FEEDS:
        out.read = True
        _keep(out, coverage, sitemap.rows)
    else:
        out.problems.append(("content_type", f"has root <{sitemap.root}>, not <urlset>, "
                             "<sitemapindex> nor a feed: not read"))
    return out


def inflate(body: bytes, max_size: int) -> bytes:
    """The first ``max_size`` bytes (at most) that the gzip ``body`` inflates to: the inflation
    stops there, so a bomb costs no more. A file whose end is missing or corrupt gives what
    inflated before it (as Scrapy's ``gunzip``); one that inflates to nothing raises
    (``OSError``, ``EOFError``, ``struct.error``)."""
    reader = GzipFile(fileobj=BytesIO(body))
    out = bytearray()
    while len(out) < max_size:
        try:
            chunk = reader.read1(min(_CHUNK, max_size - len(out)))
        except (OSError, EOFError, struct.error):
            if out:
                break
            raise
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _keep(out: SitemapReading, coverage: Coverage, rows: list[tuple[str, str | None]]) -> None:
    """The entries the sitemap may list, normalized, with their lastmod read (the costly part
    per entry: done here, off the reactor)."""
    kept = out.entries
    for loc, lastmod in rows:
        verdict = coverage.entry(loc)
        if verdict != IN:
            if verdict == FOREIGN:
                out.foreign += 1
            else:
                out.out_of_folder += 1
            continue
        try:
            key = normalize_url(loc)[0]
        except InvalidUrl:
            out.invalid += 1
            continue
        kept.append((loc, key, parse_lastmod(lastmod)))
