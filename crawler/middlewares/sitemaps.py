"""Sitemaps: the files a host's robots.txt names, read through the frontier; their entries go to
the frontier like links, and their ``<lastmod>`` spares the recrawl the pages that did not change.

How it goes (a downloader middleware, order 105, just under the robots.txt gate):

* The robots.txt fetcher sends ``robots_sitemaps`` once per origin and crawl when the origin's
  rules are known (fetched or cached). Each sitemap it names (and ``/sitemap.xml`` with
  ``SITEMAPS_PROBE``) becomes a request of its host: ``frontier_first`` when it is the origin's
  own host, so it comes before the host's pages under the host's politeness, like robots.txt;
  a sitemap on another host is an ordinary request, in scope or refused like any link.
* The answer never reaches the spider (nor the crawl database, nor the index): it is read on
  the content thread (``crawler.middlewares.sitemaps_reading``: the bytes say what the file
  is, gzip is inflated up to the size limit, ``crawler.sitemaps.read_xml`` reads; all
  bounded), and :class:`SitemapHandled` ends the request. An index's sitemaps are requested
  in turn (first of their host again); a urlset's or a text sitemap's URLs go to the frontier
  in one batch (``links_extracted``, depth 1), where scope, filters, the seen-test and
  politeness apply as to any link.
* Bounds (``crawler.sitemaps``), each with one log line: a file past ``sitemap_max_bytes`` once
  uncompressed is cut there and read up to it (``sitemaps/cut/size``), a gzip file (a bomb?) by
  stopping its inflation at the limit; entries past ``sitemap_max_urls`` in one file and past
  ``SITEMAPS_MAX_SITE_URLS`` in the crawl are ignored; a file already read (an index that lists
  itself) is not asked again; an answer that is no sitemap (HTML, an image) is not read, whatever
  its ``Content-Type`` says (the bytes decide); entries on another host than the sitemap's (or the
  robots.txt's that named it) are dropped, and so are, with ``SITEMAPS_FOLDER_RULE`` (on by
  default), entries outside the sitemap's folder unless robots.txt named it
  (``crawler.sitemaps.location``).
* ``<lastmod>`` with a crawl database (``SITEMAPS_LASTMOD``): a page due for refetch whose
  ``lastmod`` is not after its last fetch is not asked: when the frontier hands it out it is
  dropped here (``page_unchanged``: the crawl database records it as not modified); one whose
  ``lastmod`` is after its last fetch is asked now even if it is not due. The sitemaps of a host
  are read before its pages, so the word arrives in time. Each worker of a shared crawl knows
  the words of the sitemaps it read; a page another worker hands out is asked (conditional GET).

Feeds (RSS 2.0, RSS 1.0, Atom) are read as sitemaps, as sitemaps.org allows: those robots.txt
names, those a page's head names (``<link rel="alternate" type="application/rss+xml">``, sent by
the spider as ``feeds_found``: each asked once per crawl, as a sitemap of the page's host that
may list the page's folder too), and a seed that turns out to be one (by its bytes): its entries
go to the frontier instead of the seed becoming a page. An entry's date (``<updated>``,
``<pubDate>``, ``<dc:date>``...) is its ``lastmod``.

What stays on the reactor thread per entry is the crawl database's look-up (with lastmod).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future

from crawler import signals as crawler_signals
from crawler.frontier import InvalidUrl, normalize_url
from crawler.meta import ROBOTS_META
from crawler.middlewares.sitemaps_reading import Entry, read_sitemap
from crawler.offload.components import content_worker
from crawler.robots.config import RobotsConfig
from crawler.sitemaps import (
    CHANGED,
    UNCHANGED,
    SitemapBook,
    SitemapFile,
    decide,
    is_feed,
)
from crawler.sitemaps.config import SitemapsConfig
from crawler.sitemaps.location import folder_of

logger = logging.getLogger(__name__)

# Feeds asked per host because its pages named them: a site's own feeds are a few (posts,
# comments, a language or two); blogs name one more per post, tag and author (its comments),
# which would cost a request per page and use up the sitemap files a crawl reads before the
# sitemaps of the hosts found later.
FEEDS_PER_HOST = 8

# On a sitemap request: its crawler.sitemaps.SitemapFile as a plain dict (url, origin, depth),
# since a shared or on-disk frontier keeps meta as msgpack.
SITEMAP_META = "sitemap_file"


class SitemapHandled(IgnoreRequest):
    """A sitemap answer was read here; it must not reach the spider."""


class SitemapMiddleware:
    """See the module docstring."""

    def __init__(self, crawler: Crawler, config: SitemapsConfig | None = None) -> None:
        s = crawler.settings
        config = config or SitemapsConfig.from_settings(s)
        self.crawler = crawler
        self.stats = crawler.stats
        self.limits = config.limits()
        self.book = SitemapBook(self.limits)
        self.probe = config.probe
        self.use_lastmod = config.lastmod
        self.folder_rule = config.folder_rule
        self.db: Any = None  # the crawl database, once opened
        self.frontier = False  # a frontier scheduler takes links in bulk
        self.started = time.time()  # pages due before this were scheduled at the start
        self.unchanged: set[str] = set()  # due pages a sitemap says did not change
        self.feeds_named: Counter[str] = Counter()  # feeds asked because a page named them
        self.clock = time.time
        connect = crawler.signals.connect
        connect(self._robots_sitemaps, crawler_signals.robots_sitemaps)
        connect(self._feeds_found, crawler_signals.feeds_found)
        connect(self._crawldb_opened, crawler_signals.crawldb_opened)
        connect(self._frontier_opened, crawler_signals.frontier_opened)
        if not RobotsConfig.from_settings(s).enabled:
            connect(self._origin_discovered, crawler_signals.origin_discovered)
        connect(self._spider_closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapMiddleware:
        config = SitemapsConfig.from_settings(crawler.settings)  # built once
        if not config.enabled:
            raise NotConfigured("SITEMAPS_ENABLED is off")
        return cls(crawler, config)

    # -- what the crawl tells us ----------------------------------------------------------------

    def _crawldb_opened(self, db: Any) -> None:
        self.db = db

    def _frontier_opened(self, frontier: Any, spider: Spider) -> None:
        self.frontier = True
        self.started = self.clock()

    def _origin_discovered(self, origin: str, host: str) -> None:
        """Without robots.txt (ROBOTSTXT_ENABLED off) only the probe can find a sitemap."""
        self._robots_sitemaps(origin, host, [])

    def _robots_sitemaps(self, origin: str, host: str, urls: list[str]) -> None:
        """An origin's sitemaps (robots.txt's, the probe). An origin can be announced again
        (the announcers remember a bounded number of origins), or two list one file: a file
        asked for already is skipped quietly, counted as ``sitemaps/announced_again``."""
        wanted = list(urls)
        if self.probe:
            probe = origin + "/sitemap.xml"
            if probe not in wanted:
                wanted.append(probe)
        if urls:
            self._inc("sitemaps/robots_listed", len(urls))
        for url in wanted:
            if self.book.asked_before(url):
                self._inc("sitemaps/announced_again")
                continue
            self._ask(SitemapFile(url, origin, 0, named=url in urls), host)

    def _feeds_found(self, response: Response, urls: list[str]) -> None:
        """Feeds a page's head names: each read once per crawl as a sitemap of the page's
        host, which may list the page's folder too (``SitemapFile.vouched``). Every page of a
        site names the same feed: one already asked is passed over without a word."""
        parts = urlsplit(response.url)
        origin = f"{parts.scheme}://{parts.netloc}"
        vouched = origin + folder_of(parts.path)
        host = parts.hostname or ""
        for url in urls:
            if url.partition("#")[0] in self.book.asked:
                continue
            if self.book.full_of_files:  # refused and said by _ask; no host counted then
                self._ask(SitemapFile(url, origin, 0, vouched=vouched), host)
                continue
            if self.feeds_named[host] >= FEEDS_PER_HOST:
                self._hostile("feeds_per_host", url, f"named by {response.url}: over "
                              f"{FEEDS_PER_HOST} feeds named by the pages of {host} (a feed "
                              "per post, per tag): this and further ones not read", once=True)
                continue
            self.feeds_named[host] += 1
            self._inc("sitemaps/feeds_linked")
            self._ask(SitemapFile(url, origin, 0, vouched=vouched), host)

    def _seed_feed(self, response: Response) -> SitemapFile:
        """A seed that is a feed, read as one (not as a page): the operator named it, which
        proves as much as robots.txt does, so it may list any page of its host."""
        parts = urlsplit(response.url)
        self.book.asked.add(response.url.partition("#")[0])
        self._inc("sitemaps/seed_feeds")
        return SitemapFile(response.url, f"{parts.scheme}://{parts.netloc}", 0, named=True)

    def _ask(self, file: SitemapFile, host: str, parent: str = "") -> None:
        """Request ``file`` unless the book refuses it (a loop, too deep, too many files)."""
        reason = self.book.want(file)
        if reason:
            self._inc(f"sitemaps/refused/{reason}")
            what = {
                "loop": "already read this crawl (an index listing itself or a loop): not again",
                "nesting": f"index nested deeper than {self.limits.max_index_depth}: ignored",
                "files": f"over {self.limits.max_files} sitemap files: "
                "this and further ones ignored",
            }[reason]
            if reason != "files" or self.book.first_time(reason):
                logger.warning("Sitemap %s%s: %s", file.url,
                               f" (listed in {parent})" if parent else "", what)
            return
        try:
            request_host = urlsplit(file.url).hostname or ""
            meta: dict[str, Any] = {
                SITEMAP_META: {"url": file.url, "origin": file.origin, "depth": file.depth,
                               "named": file.named, "vouched": file.vouched},
                "dont_conditional": True,
                "depth": 0,
            }
            if request_host == host:
                meta["frontier_first"] = True
            request = Request(file.url, meta=meta, dont_filter=True, priority=100)
        except ValueError as exc:
            self._inc("sitemaps/refused/invalid_url")
            logger.info("Sitemap %r is no URL (%s): ignored", file.url, exc)
            return
        engine = self.crawler.engine
        if engine is not None:
            self._inc("sitemaps/requested")
            engine.crawl(request)

    # -- downloader hooks -----------------------------------------------------------------------

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        """A page a sitemap said did not change since its last fetch is not asked, nor a seed
        that robots.txt named as a sitemap (a feed given as a seed): it was asked as one."""
        meta = request.meta
        if SITEMAP_META in meta or meta.get(ROBOTS_META):
            return None
        if meta.get("seed") and request.url.partition("#")[0] in self.book.asked:
            self._inc("sitemaps/seed_read_as_sitemap")
            raise IgnoreRequest(f"seed {request.url} is a sitemap robots.txt named: read so")
        if not self.unchanged:
            return None
        try:
            key = normalize_url(request.url)[0]
        except InvalidUrl:
            return None
        if key not in self.unchanged:
            return None
        self.unchanged.discard(key)
        self._inc("sitemaps/unchanged_skipped")
        self.crawler.signals.send_catch_log(crawler_signals.page_unchanged, request=request)
        raise IgnoreRequest(f"unchanged since its last fetch, says its sitemap: {request.url}")

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        fields = request.meta.get(SITEMAP_META)
        if fields is not None:
            file = SitemapFile(**fields)
        elif request.meta.get("seed") and response.status == 200 and is_feed(response.body):
            file = self._seed_feed(response)
        else:
            return response
        self._inc("sitemaps/response_count")
        try:
            await self._read(file, response)
        except Exception:  # a sitemap must never stop the crawl or reach the spider
            self._inc("sitemaps/errors")
            logger.exception("Sitemap %s could not be read", response.url)
        raise SitemapHandled(f"sitemap {response.url} read")

    # -- reading a sitemap ----------------------------------------------------------------------

    async def _read(self, file: SitemapFile, response: Response) -> None:
        url = response.url
        if response.status != 200:
            self._inc(f"sitemaps/status/{response.status}")
            log = logger.info if file.depth or not self.probe else logger.debug
            log("Sitemap %s answered %d: nothing read", url, response.status)
            return
        args = (response.body, _header(response, b"Content-Type"), url, file, self.limits,
                self.folder_rule)
        worker = content_worker(self.crawler)
        if worker is not None:
            reading = await maybe_deferred_to_future(worker.run(read_sitemap, *args))
        else:
            reading = read_sitemap(*args)
        for reason, what in reading.problems:
            self._hostile(reason, url, what)
        if reading.index:
            self._inc("sitemaps/indexes")
            host = urlsplit(file.origin).hostname or ""
            for loc in reading.children:
                self._ask(SitemapFile(loc, file.origin, file.depth + 1, file.named), host, url)
            if reading.off_site:
                self._refused("off_site", url, reading.off_site, "sitemaps on another site "
                              "than the index (sitemaps.org; SITEMAPS_FOLDER_RULE): ignored")
        if reading.read:
            self._inc("sitemaps/files_read")
        if reading.foreign:
            self._inc("sitemaps/foreign_entries", reading.foreign)
        if reading.out_of_folder:
            self._refused("out_of_folder", url, reading.out_of_folder, "entries outside the "
                          "sitemap's folder (sitemaps.org; SITEMAPS_FOLDER_RULE): ignored")
        if reading.invalid:
            self._inc("sitemaps/invalid_entries", reading.invalid)
        if reading.entries:
            self._take(url, reading.entries)

    def _take(self, url: str, entries: list[Entry]) -> None:
        """A sitemap's entries, up to the site's cap: to the frontier as links (new or
        unknown), asked now (changed since their last fetch), or left out (unchanged: skipped
        when handed out)."""
        allowed = self.book.take(len(entries))
        if allowed < len(entries):
            self._hostile("site_cap", url, f"{len(entries) - allowed} entries over the crawl's "
                          f"{self.limits.max_site_urls} (SITEMAPS_MAX_SITE_URLS): ignored",
                          once=True)
            entries = entries[:allowed]
        self._inc("sitemaps/entries", len(entries))
        db = self.db if self.use_lastmod else None
        if db is None:
            self._hand_over(url, [loc for loc, _, _ in entries])
            return
        links: list[str] = []
        forced: list[Request] = []
        now = self.clock()
        for loc, key, lastmod in entries:
            record = db.get(key)
            fetched = record.fetched_at if record is not None and _usable(record) else None
            verdict = decide(lastmod, fetched, now)
            due = record is not None and record.next_fetch <= self.started
            if verdict == UNCHANGED:
                self._inc("sitemaps/lastmod_unchanged")
                if due:
                    self.unchanged.add(key)
            elif verdict == CHANGED:
                self._inc("sitemaps/lastmod_changed")
                if not due:  # not in the frontier: asked now
                    forced.append(Request(loc, dont_filter=True, meta={"depth": record.depth}))
            else:
                links.append(loc)
        self._hand_over(url, links)
        engine = self.crawler.engine
        if engine is not None:
            for request in forced:
                engine.crawl(request)

    def _hand_over(self, url: str, links: list[str]) -> None:
        """The entries to the frontier in one batch, as the links of a depth-0 page."""
        if not links:
            return
        spider = self.crawler.spider
        engine = self.crawler.engine
        if self.frontier and spider is not None:
            stand_in = Response(url, request=Request(url, meta={"depth": 0}))
            self.crawler.signals.send_catch_log(
                crawler_signals.links_extracted, response=stand_in, urls=links, spider=spider,
                demote=0, forms=None,
            )
        elif engine is not None:
            for link in links:
                try:
                    engine.crawl(Request(link, meta={"depth": 1}))
                except ValueError:
                    self._inc("sitemaps/invalid_entries")

    def _refused(self, reason: str, url: str, n: int, what: str) -> None:
        """Entries the folder rule refused: counted (``sitemaps/<reason>``), said once."""
        self._inc(f"sitemaps/{reason}", n)
        if self.book.first_time(reason):
            logger.info("Sitemap %s lists %d %s (said once per crawl)", url, n, what)

    def _hostile(self, reason: str, url: str, what: str, *, once: bool = False) -> None:
        # a file past the size limit is not refused: its entries up to the limit are read
        self._inc("sitemaps/cut/size" if reason == "size" else f"sitemaps/refused/{reason}")
        if not once or self.book.first_time(reason):
            logger.warning("Sitemap %s %s", url, what)

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        if self.stats is not None and self.book.asked:
            self.stats.set_value("sitemaps/files", len(self.book.asked))

    def _inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)


def _usable(record: Any) -> bool:
    """A record whose last fetch gave the page (2xx, 304): its time can be compared."""
    status = record.status
    return status is not None and (200 <= status < 300 or status == 304)


def _header(response: Response, name: bytes) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None
