"""The one spider class behind every site: seeds in, pages and their links out.

The spider is deliberately policy-free: it does not filter links by scope, depth or URL patterns.
The scheduler applies the site's URL policy (``spider.site``) to every request, seeds included,
so there is one place that decides what is crawled, and it sees the links of every page.

An HTML page is analyzed in one call, on the crawl's content thread, by the content analysis
(``crawler.sites.analysis``, wired in by ``crawler.spiders.analysis``): parse, main text,
robots directives (``noindex`` sets the item's ``noindex``; ``nofollow`` drops the page's links,
``rel="nofollow"`` the link), the site's ``[fields]``, the near-duplicate verdict and the
links' prepared forms. The spider makes the item of it and hands the links to the crawl.

Every answer's usage preferences (``crawler.robots.usage``: robots.txt's, tdmrep.json's, its
headers' and meta tags') are on its item (``usage``, ``usage_denied``); a page they refuse
every purpose of the crawl (``CRAWL_PURPOSE``) gives no item, only its links.

The spider keeps no state of the crawl's. With a crawl database, the conditional-GET middleware
(``crawler.middlewares.conditional``) hands a ``304 Not Modified`` the page's stored record
(``response.meta[NOT_MODIFIED_META]``): the spider makes an item with status 304 and the
outlinks stored from the last full fetch (no parse, no text), whose links are requested again
so they still count for discovery. Once its seeds are scheduled the spider says so
(``seeds_scheduled``): the recrawl extension then schedules the URLs that are due again.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

import scrapy
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.task import deferLater

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.content.encoding import transport_encoding
from crawler.download.limits import limit_log
from crawler.items import NOT_MODIFIED_META, PAGE_FINGERPRINT_META
from crawler.meta import EMBEDS_META, POLICY_META, REQUISITE_META
from crawler.offload.components import ContentWorker, ParseProcess, content_worker, parse_process
from crawler.robots import Directives as RobotsDirectives
from crawler.robots import robots_token
from crawler.robots.usage import page_decision, purposes_of
from crawler.sites import (
    SeedsFileError,
    SiteConfig,
    seed_url_problem,
)
from crawler.sites.analysis import PageAnalysis
from crawler.sites.fields import page_selector
from crawler.sites.policy import policy_book_for
from crawler.sites.seeds import iter_seed_lines, seeds_argument
from crawler.spiders.analysis import CrawlContentAnalysis
from crawler.spiders.canonical import apply_canonical, canonical_policy
from crawler.spiders.links import follow_links, has_frontier
from crawler.spiders.requisites import nested_requisites, requisite_requests
from crawler.spiders.site_documents import DocumentParsing
from crawler.spiders.site_items import PageItem, item_feed_settings, with_site_fields

if TYPE_CHECKING:
    from scrapy.http.headers import Headers

    from crawler.content.canonical import CanonicalPolicy


DEFAULT_PURPOSE = defaults.CRAWL_PURPOSE
SEED_BATCH = 2000  # seeds handed to the frontier at once (a seeds file of millions: batches)
# Distinct usage-signal stats keys a crawl makes at most: each names a word or value a page
# wrote, so a hostile header could add thousands a response; past the cap they count in
# ``usage/other`` (the item and the WARC metadata still carry every signal as written).
USAGE_STAT_KEYS = 200


async def _reactor_turn() -> None:
    """Let the reactor run what is due (downloads, timers) before going on."""
    from twisted.internet import reactor  # installed by now (never at import: Scrapy's)

    await maybe_deferred_to_future(deferLater(reactor, 0, lambda: None))


class SiteSpider(DocumentParsing, scrapy.Spider):
    """Crawls one site config; :meth:`for_site` makes the subclass for a given config.

    Spider argument ``-a seeds=`` adds seeds to the config's own: one URL, several (separated
    by commas or spaces), or a FILE of them (one per line, ``#`` comments); a FILE that cannot be
    read stops the crawl before any request (:func:`crawler.sites.seeds.seeds_argument`).
    """

    site: ClassVar[SiteConfig]
    handle_httpstatus_list: list[int]  # set per crawl: HTTPERROR_ALLOWED_CODES and 304
    robots_token: str = "*"  # robots.txt product token, for X-Robots-Tag addressed to it
    content: CrawlContentAnalysis  # set by from_crawler
    canonical: CanonicalPolicy | None = None  # set by from_crawler (CANONICAL_SCOPE)
    purposes: tuple[str, ...] = DEFAULT_PURPOSE  # CRAWL_PURPOSE, set by from_crawler

    def __init__(self, name: str | None = None, seeds: str | None = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        if not isinstance(getattr(type(self), "site", None), SiteConfig):
            raise TypeError(f"{type(self).__name__} has no site config; use SiteSpider.for_site()")
        self.seeds_given: list[str] = []  # URLs given as -a seeds=URL[,URL...]
        self.seeds_path: str | None = None
        if seeds is not None:
            try:
                self.seeds_given, self.seeds_path = seeds_argument(seeds)
            except SeedsFileError as exc:
                # One clean log line before Scrapy's traceback of the failed start.
                self.logger.error("Not starting: %s", exc)
                raise

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SiteSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        # A conditional refetch answers 304, which HttpErrorMiddleware would otherwise drop.
        allowed = [int(c) for c in settings.getlist("HTTPERROR_ALLOWED_CODES")]
        spider.handle_httpstatus_list = allowed if 304 in allowed else [*allowed, 304]
        spider.robots_token = robots_token(settings)
        spider.content = CrawlContentAnalysis(crawler, spider)
        spider.canonical = canonical_policy(settings)
        spider.purposes = purposes_of(settings)
        return spider

    @classmethod
    def update_settings(cls, settings: Any) -> None:
        super().update_settings(settings)
        item_feed_settings(settings, getattr(cls, "site", None))  # ITEM_OUTLINKS

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

    def _seed_urls(self) -> Iterator[tuple[str, str, str]]:
        """(url, where it came from, crawl policy) for every seed, in order: config, the
        config's ``[policies.NAME]`` seeds, -a URLs, config file, -a file (``URL POLICY``
        lines)."""
        for url in self.site.seeds:
            yield url, self.site.path, ""
        for url, name in self.site.policy_seeds:
            yield url, self.site.path, name
        for url in self.seeds_given:
            yield url, "-a seeds=", ""
        for path in (self.site.seeds_file, self.seeds_path):
            if path is None:
                continue
            try:
                for url, name in iter_seed_lines(path):
                    yield url, path, name
            except SeedsFileError as exc:
                # Checked before the crawl started; this is a file that broke mid-read.
                self.logger.error("%s", exc)
                self.crawler.stats.inc_value("seeds/file_errors")

    async def start(self) -> AsyncIterator[Any]:
        """One request per valid seed (``meta["seed"] = True``); invalid seeds are logged, counted
        and skipped, so one typo in a long seeds file does not cost the whole crawl.

        With the crawl's frontier (``has_frontier``) the seeds go to it in batches of
        ``SEED_BATCH`` instead (``seeds_found``: checked and queued in bulk, no Request each),
        a reactor turn between batches."""
        stats = self.crawler.stats
        valid = 0
        seed_urls: list[str] = []
        policies = self.site.policies
        # In bulk (plain SEED entries) unless crawl policies or domain lists must be applied to
        # each seed as it is admitted (crawler.frontier.policies): then one Request per seed.
        settings = self.crawler.settings
        bulk = has_frontier(self) and not (
            policies
            or self.site.trusted_domains
            or self.site.distrusted_domains
            or settings.get("FRONTIER_TRUSTED_DOMAINS")
            or settings.get("FRONTIER_DISTRUSTED_DOMAINS")
        )
        named: list[tuple[str, str, str]] = []  # seeds naming a policy: one Request each
        if bulk:
            batch: list[tuple[str, str]] = []
            for url, source, policy in self._seed_urls():
                if policy:
                    named.append((url, source, policy))
                    continue
                batch.append((url, source))
                if len(batch) >= SEED_BATCH:
                    await self._send_seeds(batch)
                    batch = []
            if batch:
                await self._send_seeds(batch)
            valid = stats.get_value("seeds/valid", 0)
        for url, source, policy in named if bulk else self._seed_urls():
            problem = seed_url_problem(url)
            if problem is None and policy and policy not in policies and policy != "default":
                problem = f"no crawl policy named {policy!r} in {self.site.path}"
            request = None
            if problem is None:
                meta: dict[str, Any] = {"seed": True}
                if policy:
                    meta[POLICY_META] = policy
                try:
                    request = scrapy.Request(url, callback=self.parse, meta=meta)
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
        # Every seed is scheduled now (the engine asks for the next start request only then):
        # whoever has start requests that must follow them schedules them (the recrawl
        # extension's due pages, which a seed-scoped site admits only once the seeds did).
        self.crawler.signals.send_catch_log(
            crawler_signals.seeds_scheduled, spider=self, urls=seed_urls
        )
        if not valid and not stats.get_value("crawldb/due_at_start"):
            # Not an error yet: a worker joining a shared crawl, or a resumed JOBDIR, works on
            # what its frontier already knows. :meth:`closed` says so if that was nothing (and
            # a frontier in memory holds nothing: no word here then, only that one at the end).
            kept = settings.get("JOBDIR") or str(settings.get("FRONTIER_BACKEND")) == "redis"
            if kept:
                self.logger.info(
                    "No seeds of its own: working on what the frontier already holds "
                    "(a shared crawl or a resumed JOBDIR)"
                )
            stats.inc_value("seeds/none")

    async def _send_seeds(self, batch: list[tuple[str, str]]) -> None:
        """Hand a batch of seeds to the crawl's frontier, then give the reactor a turn."""
        self.crawler.signals.send_catch_log(crawler_signals.seeds_found, spider=self, seeds=batch)
        await _reactor_turn()

    def closed(self, reason: str) -> None:
        """Say "no valid seeds" at the end, and only when the crawl had nothing at all: no
        seed, nothing due, and a frontier that never knew a URL (the exit status is 2 then)."""
        stats = self.crawler.stats
        if stats.get_value("seeds/none") and not stats.get_value("frontier/seen"):
            self.logger.error(
                "No valid seeds to crawl: give some in %s (seeds, seeds_file) or with "
                "-a seeds=URL[,URL...] or -a seeds=FILE (one URL per line)",
                self.site.path,
            )

    # --- pages ---

    def parse(
        self, response: Response, **kwargs: Any
    ) -> Iterator[PageItem | scrapy.Request] | AsyncIterator[PageItem | scrapy.Request]:
        """The page as a :class:`PageItem`, then one request per distinct http(s) link on it.

        A PDF, DOCX, ODT or plain-text file of a kind the site reads is read like a page
        (:mod:`crawler.spiders.site_documents`); other non-HTML responses give an item with no
        text and no links; a 304 gives a "not modified" item (see the module docstring). In a
        running crawl an HTML page is analyzed on the crawl's content thread
        (:mod:`crawler.offload.components`), and this returns an async iterator; called
        directly (no engine, or ``TUNING``'s ``content_thread`` off) it is a plain generator.
        """
        if response.status != 304:
            content_type = _header(response.headers, b"Content-Type")
            if _is_html(response, content_type):
                worker = content_worker(getattr(self, "crawler", None))
                if worker is not None:
                    return self._parse_offloaded(response, worker)
            else:
                kind = self._document_kind(response, content_type)
                if kind is not None:
                    return self._parse_document(response, kind)
        return self._parse_inline(response)

    async def _parse_offloaded(
        self, response: Response, worker: ContentWorker
    ) -> AsyncIterator[PageItem | scrapy.Request]:
        _, meta, item, directives = self._start_item(response)
        item, analysis = await maybe_deferred_to_future(
            worker.run(
                self._html_page, response, meta, item, directives, parse_process(self.crawler)
            )
        )
        self.crawler.stats.inc_value("content/offloaded")
        for request_or_item in self._finish_html(response, item, analysis):
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
            if self._usage_keeps(response):
                yield item
            return
        yield from self._finish_html(response, *self._html_page(response, meta, item, directives))

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
        usage = page_decision(response, meta, token, getattr(self, "purposes", DEFAULT_PURPOSE))
        item["usage"] = [str(signal) for signal in usage.signals]
        item["usage_denied"] = sorted(usage.denied)
        # the X-Robots-Tag directives the decision read; the page's own are added to a copy
        return url, meta, item, usage.robots.copy()

    def _html_page(
        self,
        response: Response,
        meta: dict[str, Any],
        item: PageItem,
        directives: RobotsDirectives,
        pool: ParseProcess | None = None,
    ) -> tuple[PageItem, PageAnalysis]:
        """Analyze an HTML page (one call: ``crawler.sites.analysis``) and fill its item: the
        heavy part, safe on the content thread (it touches no reactor state; stats and limit
        lines are applied by :meth:`_finish_html` on the reactor thread). A page of at least
        ``pool.min_bytes`` is parsed in ``pool``'s child process (``process_min_bytes``).
        """
        analysis = self.content.analysis.analyze(
            response.body,
            # the transport's charset only: the page's <meta> is the prescan's (decode_html)
            transport_encoding(response.headers.getlist(b"Content-Type")),
            response.url,
            directives,
            status=response.status,
            pool=pool,
        )
        item["title"] = analysis.title
        item["text"] = analysis.text  # cut to CONTENT_MAX_TEXT, as is the main text
        item["main_text"] = analysis.main_text
        if self.content.analysis.markdown:
            item["markdown"] = analysis.markdown
        if self.content.analysis.metadata:
            metadata = dict(analysis.metadata)
            item["language"] = analysis.language
            item["description"] = metadata.pop("description", "")
            item["published"] = metadata.pop("published", None)
            item["modified"] = metadata.pop("modified", None)
            item["metadata"] = metadata
        item["noindex"] = analysis.noindex
        item["outlinks"] = analysis.outlinks
        item = with_site_fields(self.site, item, analysis.fields)  # [fields]
        if analysis.verdict is not None:
            item.judged(analysis.verdict)
        canonical = getattr(self, "canonical", None)
        if canonical is not None:
            apply_canonical(canonical, response, item, analysis)
        self._record(response, meta, item, analysis.fingerprint)
        return item, analysis

    def _finish_html(
        self, response: Response, item: PageItem, analysis: PageAnalysis
    ) -> Iterator[PageItem | scrapy.Request]:
        """Back on the reactor thread: count, log, yield the item and hand over the links."""
        log = limit_log(self.crawler)
        for name, detail in analysis.limits:
            log.fire(name, response.url, detail)
        stats = self.crawler.stats
        for key, count in analysis.stats.items():
            if count:
                stats.inc_value(key, count)
        self._count_directives(analysis.noindex, analysis.nofollow)
        self._page_policy(response, item)
        if analysis.requisites:
            response.meta[EMBEDS_META] = analysis.requisites  # the WARC metadata's embeds
        if analysis.feeds:  # read as sitemaps of the page's host (crawler.middlewares.sitemaps)
            self.crawler.signals.send_catch_log(
                crawler_signals.feeds_found, response=response, urls=analysis.feeds
            )
        if not self.site.content.keeps_language(analysis.language):
            stats.inc_value("language/not_kept")  # [content] languages: links followed, no item
        elif self._usage_keeps(response):
            yield item
        # The frontier takes the links in bulk (no Request per link); Requests come back only
        # when another scheduler runs the crawl.
        yield from follow_links(self, response, analysis.follow, analysis.demote, analysis.forms)
        if analysis.requisites:  # the site's [requisites]: the page's embeds, archived with it
            yield from requisite_requests(self, response, analysis.requisites, 1)

    def parse_requisite(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        """A page requisite's answer (``crawler.spiders.requisites``): no item, no links; a
        stylesheet's or a frame's own requisites are requested, up to ``max_hops``."""
        hops = int(response.meta.get(REQUISITE_META) or 1)
        rule = self.site.requisites
        if hops >= rule.max_hops or response.status != 200:
            return
        urls, over = nested_requisites(response, rule.max_per_page)
        stats = self.crawler.stats
        if urls:
            stats.inc_value("requisites/found", len(urls))
        if over:
            stats.inc_value("requisites/over_bound", over)
        yield from requisite_requests(self, response, urls, hops + 1)

    def _page_policy(self, response: Response, item: PageItem) -> None:
        """A crawl policy's content rule: a page may switch the policy its links inherit."""
        book = self.__dict__.get("_policy_book", False)
        if book is False:
            book = self.__dict__["_policy_book"] = policy_book_for(self, self.crawler.settings)
        if book is None:
            return
        meta = response.meta
        label = meta.get(POLICY_META, "")
        html = _is_html(response, item.get("content_type"))  # a document has no selectors

        def select(css: str) -> bool:
            encoding = transport_encoding(response.headers.getlist(b"Content-Type"))
            return html and bool(page_selector(response.body, encoding).css(css))

        new = book.page_policy(
            label, response.url, item.get("text") or "", select=select, depth=meta.get("depth", 0)
        )
        name = new.partition("@")[0] or "default"
        self.crawler.stats.inc_value(f"policies/pages/{name}")
        if new != label:
            meta[POLICY_META] = new
            self.crawler.stats.inc_value("policies/switched")

    def _usage_keeps(self, response: Response) -> bool:
        """Count the page's usage signals and their effect; False when the page is not to be
        kept (every purpose of the crawl refused: no item, so no index; its links are still
        followed, since finding pages is no use of this one)."""
        decision = page_decision(
            response,
            response.meta,
            getattr(self, "robots_token", "*"),
            getattr(self, "purposes", DEFAULT_PURPOSE),
        )
        stats = self.crawler.stats
        keys = [signal.stat for signal in decision.signals] + [
            f"usage/unknown/{signal.name}:{signal.key}/{signal.value or 'set'}"
            for signal in decision.unknown
        ]
        made = self.__dict__.setdefault("_usage_keys", set())
        for key in keys:
            if key not in made:
                if len(made) >= USAGE_STAT_KEYS:
                    key = "usage/other"
                else:
                    made.add(key)
            stats.inc_value(key)
        if decision.effect:
            stats.inc_value(f"usage/effect/{decision.effect}")
        return decision.keep

    def _count_directives(self, noindex: bool, nofollow: bool) -> None:
        if noindex:
            self.crawler.stats.inc_value("robots/noindex")
        if nofollow:
            self.crawler.stats.inc_value("robots/nofollow")

    def _not_modified(
        self, response: Response, url: str, meta: dict[str, Any]
    ) -> Iterator[PageItem | scrapy.Request]:
        """304: nothing to parse. The item says "not modified" by its status; the outlinks of
        the last full fetch (``NOT_MODIFIED_META``) are requested again (the frontier drops the
        ones it has seen)."""
        previous = response.meta.get(NOT_MODIFIED_META)
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
