"""The one spider class behind every site: seeds in, pages and their links out.

The spider is deliberately policy-free: it does not filter links by scope, depth or URL patterns.
The scheduler applies the site's URL policy (``spider.site``) to every request, seeds included,
so there is one place that decides what is crawled, and it sees the links of every page.

What a page itself asks for is honoured here: ``noindex`` (``<meta name="robots">``, a meta
named after the crawler's robots.txt token, or ``X-Robots-Tag``) sets the item's ``noindex``;
``nofollow`` drops the page's links, ``rel="nofollow"`` the link.

With a crawl database (``crawler.extensions.recrawl``): every 2xx and 304 is recorded there, the
URLs due for a refetch are started after the seeds, and a ``304 Not Modified`` becomes an item
with status 304 and the outlinks stored from the last full fetch (no parse, no text), whose
links are requested again so they still count for discovery.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import urljoin, urlsplit

import scrapy
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.content.html import parse_page
from crawler.crawldb import crawldb_enabled
from crawler.download.limits import limit_log
from crawler.extensions.recrawl import RecrawlExtension
from crawler.frontier.urls import link_problem
from crawler.items import PAGE_FINGERPRINT_META, PageItem
from crawler.offload.components import ContentWorker, ParseProcess, content_worker, parse_process
from crawler.robots import Directives as RobotsDirectives
from crawler.robots import robots_token, x_robots_tag
from crawler.sites import (
    SeedsFileError,
    SiteConfig,
    check_seeds_file,
    iter_seeds_file,
    seed_url_problem,
)
from crawler.spiders.links import UrlJoiner, follow_links
from crawler.spiders.site_items import item_feed_settings, with_site_fields

if TYPE_CHECKING:
    from scrapy.http.headers import Headers

_T = TypeVar("_T")


class SiteSpider(scrapy.Spider):
    """Crawls one site config; :meth:`for_site` makes the subclass for a given config.

    Spider argument ``-a seeds=FILE`` adds the URLs of FILE (one per line, ``#`` comments) to the
    config's own seeds; a FILE that cannot be read stops the crawl before any request.
    """

    site: ClassVar[SiteConfig]
    handle_httpstatus_list: list[int]  # set per crawl: HTTPERROR_ALLOWED_CODES and 304
    robots_token: str = "*"  # robots.txt product token, for meta and X-Robots-Tag addressed to it
    max_links: int = defaults.PAGE_MAX_LINKS
    max_text: int = defaults.CONTENT_MAX_TEXT
    max_html: int = defaults.PAGE_MAX_HTML

    def __init__(self, name: str | None = None, seeds: str | None = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        if not isinstance(getattr(type(self), "site", None), SiteConfig):
            raise TypeError(f"{type(self).__name__} has no site config; use SiteSpider.for_site()")
        self.seeds_path: str | None = None
        if seeds is not None:
            if not seeds.strip():
                raise SeedsFileError("-a seeds=", None, "the seeds argument names no file")
            # Resolved now: the message and the later read must not depend on a later chdir.
            path = os.path.abspath(os.path.expanduser(seeds))
            try:
                check_seeds_file(path)
            except SeedsFileError as exc:
                # One clean log line before Scrapy's traceback of the failed start.
                self.logger.error("Not starting: %s", exc)
                raise
            self.seeds_path = path

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SiteSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        # A conditional refetch answers 304, which HttpErrorMiddleware would otherwise drop.
        allowed = [int(c) for c in settings.getlist("HTTPERROR_ALLOWED_CODES")]
        spider.handle_httpstatus_list = allowed if 304 in allowed else [*allowed, 304]
        spider.robots_token = robots_token(settings)
        spider.max_links = settings.getint("PAGE_MAX_LINKS", defaults.PAGE_MAX_LINKS)
        spider.max_text = settings.getint("CONTENT_MAX_TEXT", defaults.CONTENT_MAX_TEXT)
        spider.max_html = settings.getint("PAGE_MAX_HTML", defaults.PAGE_MAX_HTML)
        return spider

    @classmethod
    def update_settings(cls, settings: Any) -> None:
        super().update_settings(settings)
        item_feed_settings(settings, getattr(cls, "site", None))  # ITEM_OUTLINKS

    def _recrawl(self) -> RecrawlExtension | None:
        crawler = getattr(self, "crawler", None)
        return crawler.get_extension(RecrawlExtension) if crawler is not None else None

    @classmethod
    def for_site(cls, site: SiteConfig) -> type[SiteSpider]:
        """A spider class for ``site``: its name, config and Scrapy settings as class attributes."""
        class_name = "".join(p.capitalize() for p in site.name.replace("-", "_").split("_"))
        class_name = f"{class_name}SiteSpider"
        attrs = {
            "name": site.name,
            "site": site,
            "custom_settings": dict(site.settings),
            "__module__": cls.__module__,
            "__qualname__": class_name,
            "__doc__": f"Crawls the site configured in {site.path}.",
        }
        return type(class_name, (cls,), attrs)

    @classmethod
    def handles_request(cls, request: scrapy.Request) -> bool:
        """For ``scrapy fetch``/``shell``: a site handles URLs in its configured scope."""
        site = getattr(cls, "site", None)
        if site is None:
            return False
        return site.scope.contains(urlparse_cached(request).hostname or "")

    # --- seeds ---

    def _seed_urls(self) -> Iterator[tuple[str, str]]:
        """(url, where it came from) for every seed, in order: config, config file, -a file."""
        for url in self.site.seeds:
            yield url, self.site.path
        for path in (self.site.seeds_file, self.seeds_path):
            if path is None:
                continue
            try:
                for url in iter_seeds_file(path):
                    yield url, path
            except SeedsFileError as exc:
                # Checked before the crawl started; this is a file that broke mid-read.
                self.logger.error("%s", exc)
                self.crawler.stats.inc_value("seeds/file_errors")

    async def start(self) -> AsyncIterator[Any]:
        """One request per valid seed (``meta["seed"] = True``); invalid seeds are logged, counted
        and skipped, so one typo in a long seeds file does not cost the whole crawl."""
        stats = self.crawler.stats
        valid = 0
        seed_urls: list[str] = []
        for url, source in self._seed_urls():
            problem = seed_url_problem(url)
            request = None
            if problem is None:
                try:
                    request = scrapy.Request(url, callback=self.parse, meta={"seed": True})
                except ValueError as exc:
                    problem = str(exc)
            if request is None:
                self.logger.warning("Skipping invalid seed %r (from %s): %s", url, source, problem)
                stats.inc_value("seeds/invalid")
                continue
            valid += 1
            seed_urls.append(url)
            stats.inc_value("seeds/valid")
            yield request
        # Pages of earlier crawls that are due again, after the seeds (which admit their hosts
        # into a seed-scoped site); known seeds that are not due are refused as seen.
        due = 0
        recrawl = self._recrawl()
        if recrawl is not None:
            for request in recrawl.due_requests(self, seed_urls):
                due += 1
                yield request
        if not valid and not due:
            # Not an error yet: a worker joining a shared crawl, or a resumed JOBDIR, works on
            # what its frontier already knows. :meth:`closed` says so if that was nothing.
            self.logger.info(
                "No seeds of its own: working on what the frontier already holds "
                "(a shared crawl or a resumed JOBDIR)"
            )
            stats.inc_value("seeds/none")

    def closed(self, reason: str) -> None:
        """Say "no valid seeds" at the end, and only when the crawl had nothing at all: no
        seed, nothing due, and a frontier that never knew a URL (the exit status is 2 then)."""
        stats = self.crawler.stats
        if stats.get_value("seeds/none") and not stats.get_value("frontier/seen"):
            self.logger.error(
                "No valid seeds to crawl: give some in %s (seeds, seeds_file) or with "
                "-a seeds=FILE (one URL per line)",
                self.site.path,
            )

    # --- pages ---

    def parse(
        self, response: Response, **kwargs: Any
    ) -> Iterator[PageItem | scrapy.Request] | AsyncIterator[PageItem | scrapy.Request]:
        """The page as a :class:`PageItem`, then one request per distinct http(s) link on it.

        Non-HTML responses give an item with no text and no links; a 304 gives a "not modified"
        item (see the module docstring). In a running crawl an HTML page is parsed on the
        crawl's content thread (:mod:`crawler.offload.components`), and this returns an async
        iterator;
        called directly (no engine, or ``CONTENT_THREAD`` off) it is a plain generator.
        """
        if response.status != 304 and _is_html(response, _header(response.headers,
                                                                   b"Content-Type")):
            worker = content_worker(getattr(self, "crawler", None))
            if worker is not None:
                return self._parse_offloaded(response, worker)
        return self._parse_inline(response)

    async def _parse_offloaded(
        self, response: Response, worker: ContentWorker
    ) -> AsyncIterator[PageItem | scrapy.Request]:
        url, meta, item, directives = self._start_item(response)
        page = await maybe_deferred_to_future(
            worker.run(self._html_page, response, url, meta, item, directives,
                       parse_process(self.crawler), self._link_preparer())
        )
        self.crawler.stats.inc_value("content/offloaded")
        for request_or_item in self._finish_html(response, page):
            yield request_or_item

    def _parse_inline(self, response: Response) -> Iterator[PageItem | scrapy.Request]:
        url, meta, item, directives = self._start_item(response)
        if response.status == 304:
            yield from self._not_modified(response, url, meta)
            return
        if not _is_html(response, item["content_type"]):
            item["noindex"] = directives.noindex
            self._count_directives(directives.noindex, False)
            self._record(response, meta, item, _body_fingerprint(response.body))
            yield item
            return
        yield from self._finish_html(
            response, self._html_page(response, url, meta, item, directives)
        )

    def _start_item(
        self, response: Response
    ) -> tuple[str, dict[str, Any], PageItem, RobotsDirectives]:
        """The page's URL (the one requested, before redirects), meta, item and header
        directives: what every response gets before its body is looked at."""
        request = response.request
        meta = request.meta if request is not None else {}
        redirect_urls = meta.get("redirect_urls")
        if redirect_urls:
            url = redirect_urls[0]
        else:
            url = request.url if request is not None else response.url
        headers = response.headers
        item = PageItem(
            url=url,
            final_url=response.url,
            status=response.status,
            fetched_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            depth=meta.get("depth", 0),
            site=self.name,
            title="",
            text="",
            outlinks=[],
            last_modified=_header(headers, b"Last-Modified"),
            etag=_header(headers, b"ETag"),
            content_type=_header(headers, b"Content-Type"),
        )
        token = getattr(self, "robots_token", "*")
        directives = x_robots_tag(
            (v.decode("latin-1") for v in headers.getlist(b"X-Robots-Tag")), token
        )
        return url, meta, item, directives

    def _html_page(
        self,
        response: Response,
        url: str,
        meta: dict[str, Any],
        item: PageItem,
        directives: RobotsDirectives,
        pool: ParseProcess | None = None,
        prepare: Callable[[list[str]], dict[str, Any]] | None = None,
    ) -> _HtmlPage:
        """Parse an HTML page and fill its item: the heavy part, safe on the content thread
        (it touches no reactor state; stats and limit lines are collected and applied by
        :meth:`_finish_html` on the reactor thread). A page of at least ``pool.min_bytes`` is
        parsed in ``pool``'s child process (``CONTENT_PROCESS_MIN_BYTES``). ``prepare``: the
        frontier's link preparer (``link_preparer_wanted``), called here on the links to
        follow so their canonicalization is not done on the reactor."""
        out = _HtmlPage(item)
        body = response.body
        if self.max_html and len(body) > self.max_html:
            # Parsing costs memory and time in proportion to the bytes (a 10 MB page of links
            # alone took 400 MB); the page's start holds its own content and first links.
            out.limits.append((
                "page_html",
                f"{len(body)} bytes of HTML, parsed the first {self.max_html} (PAGE_MAX_HTML)",
            ))
            body = body[: self.max_html]
        parse = pool.call if pool is not None and len(body) >= pool.min_bytes else _call
        clipped = parse(
            parse_page, body, response.encoding, main_text=self._wants_main_text(),
            max_links=self.max_links, max_text=self.max_text,
        )
        if parse is not _call:
            out.stats.update(pool.news())  # type: ignore[union-attr]
        page = clipped.page
        if page.flattened:
            out.limits.append((
                "page_depth",
                "nested deeper than libxml2's 2,048 levels: parsed again without its nesting "
                "tags (links and text kept, layout lost)",
            ))
        directives.add(page.meta_robots)
        token = getattr(self, "robots_token", "*")
        if token and token != "robots":
            directives.add(page.metas.get(token, ""))
        links = page.links  # cut to PAGE_MAX_LINKS by parse_page
        if self.max_links and clipped.links > self.max_links:
            # A page of 200,000 links is a trap or a dump: the first ones are the page's own.
            out.limits.append((
                "page_links",
                f"{clipped.links} links, kept the first {self.max_links} (PAGE_MAX_LINKS)",
            ))
        if page.nofollow_hrefs and not directives.nofollow:
            before = len(links)
            links = [link for link in links if link[0] not in page.nofollow_hrefs]
            out.stats["links/nofollow"] += before - len(links)
        if directives.nofollow:
            links = []
        out.noindex, out.nofollow = directives.noindex, directives.nofollow
        item["title"] = page.title
        if self.max_text and clipped.text > self.max_text:
            # Shingling, MinHash and the index cost time and memory in proportion to the text.
            out.limits.append((
                "content_text",
                f"{clipped.text} characters of text, kept {self.max_text} (CONTENT_MAX_TEXT)",
            ))
        item["text"] = page.text  # cut to CONTENT_MAX_TEXT by parse_page, as is the main text
        item["main_text"] = page.main_text
        item["noindex"] = directives.noindex
        outlinks, out.follow = self._links(response.url, page.base_href, links, out.stats)
        if prepare is not None and out.follow:
            out.forms = prepare(out.follow)
        item["outlinks"] = outlinks
        fingerprint = clipped.fingerprint  # of the title and main text (see parse_page)
        item = with_site_fields(self.site, item, body, response.encoding)  # [fields]
        self._record(response, meta, item, fingerprint)
        out.item = item
        # Asked here, before the item is yielded (its pipelines run only after its links are
        # queued), and on the content thread where the near-duplicate detector runs.
        out.demote = self._link_demotion(item)
        return out

    def _finish_html(
        self, response: Response, page: _HtmlPage
    ) -> Iterator[PageItem | scrapy.Request]:
        """Back on the reactor thread: count, log, yield the item and hand over the links."""
        log = limit_log(self.crawler)
        for name, detail in page.limits:
            log.fire(name, response.url, detail)
        stats = self.crawler.stats
        for key, count in page.stats.items():
            if count:
                stats.inc_value(key, count)
        self._count_directives(page.noindex, page.nofollow)
        yield page.item
        # The frontier takes the links in bulk (no Request per link); Requests come back only
        # when another scheduler runs the crawl.
        yield from follow_links(self, response, page.follow, page.demote, page.forms)

    def _link_preparer(self) -> Callable[[list[str]], dict[str, Any]] | None:
        """The frontier's link preparer (asked once, on the reactor thread), or None when the
        crawl's scheduler has none."""
        prepare = getattr(self, "_link_prepare", _UNASKED)
        if prepare is _UNASKED:
            results = self.crawler.signals.send_catch_log(crawler_signals.link_preparer_wanted)
            prepare = next((r for _, r in results if callable(r)), None)
            self._link_prepare = prepare
        return prepare  # type: ignore[no-any-return]

    def _link_demotion(self, item: PageItem) -> int:
        """Levels of depth to add to the page's links (a duplicate page: see
        ``crawler.signals.link_demotion_wanted``); 0 when nobody judges pages."""
        results = self.crawler.signals.send_catch_log(
            crawler_signals.link_demotion_wanted, item=item
        )
        return max((r for _, r in results if isinstance(r, int)), default=0)

    def _wants_main_text(self) -> bool:
        """Main text serves near-duplicate detection and the crawl database's change test."""
        wants = getattr(self, "_main_text_wanted", None)
        if wants is None:
            wants = self._main_text_wanted = self.crawler.settings.getbool(
                "NEARDUP_ENABLED"
            ) or crawldb_enabled(self.crawler.settings)
        return wants

    def _count_directives(self, noindex: bool, nofollow: bool) -> None:
        if noindex:
            self.crawler.stats.inc_value("robots/noindex")
        if nofollow:
            self.crawler.stats.inc_value("robots/nofollow")

    def _not_modified(
        self, response: Response, url: str, meta: dict[str, Any]
    ) -> Iterator[PageItem | scrapy.Request]:
        """304: nothing to parse. The item says "not modified" by its status; the outlinks of
        the last full fetch are requested again (the frontier drops the ones it has seen)."""
        recrawl = self._recrawl()
        previous = recrawl.previous(response.url) if recrawl is not None else None
        outlinks = previous.outlinks if previous is not None else []
        headers = response.headers
        item = PageItem(
            url=url,
            final_url=response.url,
            status=304,
            fetched_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            depth=meta.get("depth", 0),
            site=self.name,
            title="",
            text="",
            outlinks=[{"url": u, "text": t} for u, t in outlinks],
            last_modified=_header(headers, b"Last-Modified")
            or (previous.last_modified if previous else None),
            etag=_header(headers, b"ETag") or (previous.etag if previous else None),
            content_type=None,
        )
        self.crawler.stats.inc_value("spider/not_modified")
        self._record(response, meta, item, None)
        yield item
        yield from follow_links(self, response, list(dict.fromkeys(u for u, _ in outlinks)))

    @staticmethod
    def _record(
        response: Response, meta: dict[str, Any], item: PageItem, fingerprint: str | None
    ) -> None:
        """Leave the page's change fingerprint for the crawl database, which records the fetch
        when the item has left the pipelines (``crawler.extensions.recrawl``)."""
        response.meta[PAGE_FINGERPRINT_META] = fingerprint

    def _links(
        self,
        page_url: str,
        base_href: str | None,
        links: list[tuple[str, str]],
        stats: Counter[str],
    ) -> tuple[list[dict[str, str]], list[str]]:
        """Absolute, fragment-free http(s) links: (outlinks with anchor text, URLs to follow).

        Outlinks keep each distinct (url, anchor text) pair, since every anchor text helps the
        index find the target; the URLs to follow are distinct. This runs for every link of every
        page, so it is plain ``urljoin`` plus string checks: a joined URL that starts with the
        base's own ``scheme://netloc`` (relative links, most absolute ones) needs no second parse;
        any other is kept only if the frontier would take it (:func:`link_problem`).
        """
        base = page_url
        if base_href:
            with contextlib.suppress(ValueError):  # a broken <base href> is ignored
                base = urljoin(page_url, base_href)
        origin = _origin(base)
        cut = len(origin) if origin else 0
        joiner = UrlJoiner(base)
        outlinks: list[dict[str, str]] = []
        pairs: set[tuple[str, str]] = set()
        follow: dict[str, None] = {}
        skipped_scheme = invalid = 0
        for href, text in links:
            try:
                absolute = joiner.join(href)
            except ValueError:
                invalid += 1
                continue
            if not (origin and absolute.startswith(origin) and absolute[cut : cut + 1] in _ENDS):
                problem = link_problem(absolute)
                if problem == "scheme":
                    skipped_scheme += 1
                    continue
                if problem is not None:
                    invalid += 1
                    continue
            absolute = absolute.partition("#")[0]
            if (absolute, text) not in pairs:
                pairs.add((absolute, text))
                outlinks.append({"url": absolute, "text": text})
            follow[absolute] = None
        stats["links/skipped_scheme"] += skipped_scheme
        stats["links/invalid"] += invalid
        return outlinks, list(follow)


@dataclass(slots=True)
class _HtmlPage:
    """What :meth:`SiteSpider._html_page` made of a page, for :meth:`SiteSpider._finish_html`."""

    item: PageItem
    follow: list[str] = field(default_factory=list)
    limits: list[tuple[str, str]] = field(default_factory=list)  # (limit name, detail)
    stats: Counter[str] = field(default_factory=Counter)
    noindex: bool = False
    nofollow: bool = False
    demote: int = 0  # levels of depth added to the links (a near-duplicate page)
    forms: dict[str, Any] | None = None  # the frontier's link preparer's answer for follow


_UNASKED = object()


# What may follow "scheme://netloc" in a URL on the same origin.
_ENDS = frozenset({"", "/", "?", "#"})


def _origin(url: str) -> str | None:
    """``scheme://netloc`` of an http(s) URL the frontier accepts, else ``None``."""
    if link_problem(url) is not None:
        return None
    parts = urlsplit(url)
    if not parts.netloc:  # http:\\host, which the frontier reads as http://host: no prefix
        return None
    return f"{parts.scheme}://{parts.netloc}"


def _call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)`` here (what ``ParseProcess.call`` does in a child)."""
    return fn(*args, **kwargs)


def _body_fingerprint(body: bytes) -> str:
    """Change detection for non-HTML content: the bytes themselves."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def _header(headers: Headers, name: bytes) -> str | None:
    value = headers.get(name)
    return value.decode("latin-1") if value else None


def _is_html(response: Response, content_type: str | None) -> bool:
    if isinstance(response, HtmlResponse):
        return True
    return isinstance(response, TextResponse) and "html" in (content_type or "").lower()
