"""The content analysis: everything a crawl learns from one HTML page, in one call.

The site spider calls :meth:`ContentAnalysis.analyze` once per HTML page, on the crawl's
content thread (``crawler.offload``), and gets one :class:`PageAnalysis` back:

* the parsed page (title, visible text, main text, links with their anchor text), cut to the
  crawl's limits (``PAGE_MAX_HTML``, ``PAGE_MAX_LINKS``, ``CONTENT_MAX_TEXT``); a big page is
  parsed in the crawl's parse process (``pool``), the rest stays here;
* the page's robots directives (``<meta name="robots">``, a meta named after the crawler's
  token, added to the ``X-Robots-Tag`` ones the caller read): ``nofollow`` drops the links,
  ``rel="nofollow"`` the link;
* the site config's ``[fields]``;
* the near-duplicate verdict (:mod:`crawler.content.analysis_neardup`) when a pipeline consumes
  verdicts, and the links' demotion that follows from it;
* the page's Markdown and metadata (``CONTENT_MARKDOWN``, ``CONTENT_METADATA``: from the same
  parse) and the language of its main text, identified here, in the crawl's process, so a
  parse child never loads the model;
* the page's requisites (embedded resources) when the site asks for them
  (``[requisites]``, ``crawler.content.requisites``), from the same parse;
* the links to follow with their prepared forms (:meth:`UrlPolicy.link_form`: canonical form,
  host, fixed filters) when a frontier takes them: the expensive, stateless part of taking a
  link, done here so the reactor keeps only the stateful part.

Nothing here touches reactor state: stats and limit lines are collected in the result, for
the caller to apply on the reactor thread. Here, not in ``crawler.content``: the analysis puts
together the parser, the robots directives, the frontier's URL rules and the site's fields.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from crawler.config import defaults
from crawler.config.features import crawldb_enabled
from crawler.content.analysis_neardup import NearDuplicateJudge, Verdict
from crawler.content.child import ChildFailed
from crawler.content.config import NeardupConfig
from crawler.content.documents import DocumentText, read_document
from crawler.content.html import parse_page
from crawler.content.language import identify_language
from crawler.content.normalize import lines_fingerprint, normalize_lines
from crawler.content.requisites import absolute_requisites
from crawler.frontier.urls import LinkForm, UrlPolicy, link_problem
from crawler.net.weburl import join as web_join
from crawler.robots import Directives
from crawler.sites.fields import FieldSpec, extract_fields

__all__ = ["ContentAnalysis", "LinkPreparer", "PageAnalysis", "main_text_wanted"]

_T = TypeVar("_T")
logger = logging.getLogger(__name__)

# Raw links (as written in pages) remembered so a repeated link (menus, footers) skips
# normalization: ~100 MB at most, forgotten all at once past it.
LINK_CACHE_SIZE = 1_000_000


def main_text_wanted(settings: Any) -> bool:
    """Main text serves near-duplicate detection and the crawl database's change test; without
    either, the ~1 ms a page it costs is saved."""
    return NeardupConfig.from_settings(settings).enabled or crawldb_enabled(settings)


class Joiner(Protocol):
    def join(self, href: str) -> str: ...


class ParsePool(Protocol):
    """The crawl's parse process (``crawler.offload.components.ParseProcess``)."""

    min_bytes: int

    def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T: ...

    def news(self) -> dict[str, int]: ...


@dataclass(slots=True)
class PageAnalysis:
    """What :meth:`ContentAnalysis.analyze` made of a page."""

    title: str = ""
    text: str = ""
    main_text: str = ""
    outlinks: list[dict[str, str]] = field(default_factory=list)  # distinct (url, anchor text)
    follow: list[str] = field(default_factory=list)  # distinct URLs, in page order
    fields: dict[str, Any] = field(default_factory=dict)  # the site's [fields]
    noindex: bool = False
    nofollow: bool = False
    fingerprint: str | None = None  # change fingerprint: title and main text (parse_page)
    canonical_href: str | None = None  # <link rel="canonical"> as written
    feeds: list[str] = field(default_factory=list)  # <link rel="alternate"> feeds, absolute
    verdict: Verdict | None = None
    forms: dict[str, LinkForm] | None = None  # prepared forms of follow's new links
    requisites: list[str] = field(default_factory=list)  # embedded resources, absolute URLs
    markdown: str = ""  # the main content as Markdown (CONTENT_MARKDOWN)
    metadata: dict[str, Any] = field(default_factory=dict)  # crawler.content.metadata
    language: str = ""  # ISO 639-1 code of the main text (CONTENT_METADATA), "" unknown
    limits: list[tuple[str, str]] = field(default_factory=list)  # (limit name, detail)
    stats: Counter[str] = field(default_factory=Counter)
    document_problem: str | None = None  # a document read in part or not at all: why

    @property
    def demote(self) -> int:
        """Levels of depth to add to the page's links (a near-duplicate page's)."""
        return self.verdict.demote if self.verdict is not None else 0


class LinkPreparer:
    """:meth:`UrlPolicy.link_form` of the links not prepared before.

    The policy is the crawl's own (``crawler.sites.policy.url_policy_for``, as the scheduler
    builds it); ``link_form`` reads only its fixed configuration. Links repeated on every page
    (menus, footers) are prepared once: a raw link already prepared is remembered (by its hash,
    up to ``cache_size``, then forgotten all at once) and left out of the next page's forms.
    The forms are a shortcut, never a verdict of their own: a link without one is normalized
    by whoever takes it, so the crawl queues and counts the same with or without them.
    """

    def __init__(self, policy: UrlPolicy, cache_size: int = LINK_CACHE_SIZE) -> None:
        self.policy = policy
        self.cache_size = cache_size
        self._prepared: set[int] = set()

    def prepare(self, urls: Iterable[str]) -> dict[str, LinkForm]:
        prepared = self._prepared
        if len(prepared) > self.cache_size:
            prepared.clear()
        longest = self.policy.max_url_length
        link_form = self.policy.link_form
        forms: dict[str, LinkForm] = {}
        for raw in urls:
            if len(raw) > longest:
                continue
            key = hash(raw)
            if key in prepared:
                continue
            prepared.add(key)
            forms[raw] = link_form(raw)
        return forms


class ContentAnalysis:
    """The analysis of a crawl's HTML pages (see the module docstring).

    ``judge`` is set when a pipeline consumes near-duplicate verdicts, ``links`` when a
    frontier takes the pages' links; either may be ``None``. ``joiner(base)`` joins a page's
    hrefs to its base URL (``crawler.spiders.links.UrlJoiner``). ``requisites``: at most that
    many embedded resources of each page are collected (0: none; the site's ``[requisites]``).
    """

    def __init__(
        self,
        joiner: Callable[[str], Joiner],
        *,
        fields: Mapping[str, FieldSpec] | None = None,
        robots_token: str = "*",
        main_text: bool = False,
        max_links: int = defaults.PAGE_MAX_LINKS,
        max_text: int = defaults.CONTENT_MAX_TEXT,
        max_html: int = defaults.PAGE_MAX_HTML,
        judge: NearDuplicateJudge | None = None,
        links: LinkPreparer | None = None,
        requisites: int = 0,
        markdown: bool = False,
        metadata: bool = False,
    ) -> None:
        self.joiner = joiner
        self.markdown = markdown
        self.metadata = metadata
        self.requisites = requisites
        self.fields: Mapping[str, FieldSpec] = fields or {}
        self.robots_token = robots_token
        self.main_text = main_text
        self.max_links = max_links
        self.max_text = max_text
        self.max_html = max_html
        self.judge = judge
        self.links = links

    def analyze(
        self,
        body: bytes,
        encoding: str | None,
        url: str,
        directives: Directives,
        *,
        status: int = 200,
        pool: ParsePool | None = None,
    ) -> PageAnalysis:
        """Analyze the HTML page ``body`` fetched at ``url`` (after redirects) with answer
        ``status``; ``directives``: what its ``X-Robots-Tag`` headers said (the page's own
        are added). A page of at least ``pool.min_bytes`` is parsed in ``pool``'s process."""
        out = PageAnalysis()
        if self.max_html and len(body) > self.max_html:
            # Parsing costs memory and time in proportion to the bytes (a 10 MB page of links
            # alone took 400 MB); the page's start holds its own content and first links.
            out.limits.append(
                (
                    "page_html",
                    f"{len(body)} bytes of HTML, parsed the first {self.max_html} (PAGE_MAX_HTML)",
                )
            )
            body = body[: self.max_html]
        parse = pool.call if pool is not None and len(body) >= pool.min_bytes else _call
        clipped = parse(
            parse_page,
            body,
            encoding,
            main_text=self.main_text,
            max_links=self.max_links,
            max_text=self.max_text,
            requisites=bool(self.requisites),
            markdown=self.markdown,
            metadata=self.metadata,
            url=url,
        )
        if parse is not _call:
            out.stats.update(pool.news())  # type: ignore[union-attr]
        page = clipped.page
        if page.flattened:
            out.limits.append(
                (
                    "page_depth",
                    "nested deeper than libxml2's 2,048 levels: parsed again without its nesting "
                    "tags (links and text kept, layout lost)",
                )
            )
        directives.add(page.meta_robots)
        token = self.robots_token
        if token and token != "robots":
            directives.add(page.metas.get(token, ""))
        links = page.links  # cut to PAGE_MAX_LINKS by parse_page
        if self.max_links and clipped.links > self.max_links:
            # A page of 200,000 links is a trap or a dump: the first ones are the page's own.
            out.limits.append(
                (
                    "page_links",
                    f"{clipped.links} links, kept the first {self.max_links} (PAGE_MAX_LINKS)",
                )
            )
        if page.nofollow_hrefs and not directives.nofollow:
            before = len(links)
            links = [link for link in links if link[0] not in page.nofollow_hrefs]
            out.stats["links/nofollow"] += before - len(links)
        if directives.nofollow:
            links = []
        out.noindex, out.nofollow = directives.noindex, directives.nofollow
        if self.max_text and clipped.text > self.max_text:
            # Shingling, MinHash and the index cost time and memory in proportion to the text.
            out.limits.append(
                (
                    "content_text",
                    f"{clipped.text} characters of text, kept {self.max_text} (CONTENT_MAX_TEXT)",
                )
            )
        out.title, out.text, out.main_text = page.title, page.text, page.main_text
        out.markdown, out.metadata = page.markdown, page.metadata
        if self.metadata:
            # here, not in the parse (which may run in the parse child): one model a worker
            language = identify_language(
                page.main_text or page.text, page.metadata.get("html_lang", "")
            )
            out.language = language.code
            out.stats[f"language/{out.language or 'unknown'}"] += 1
            if language.agrees is False:  # the text's language is not <html lang>'s
                out.stats["language/html_lang_differs"] += 1
        if self.requisites and page.requisites:
            # robots nofollow does not apply: embeds are part of the page, not links to follow
            out.requisites, over = absolute_requisites(
                url, page.requisites, self.requisites, page.base_href
            )
            out.stats["requisites/found"] += len(out.requisites)
            if over:
                out.stats["requisites/over_bound"] += over
        out.outlinks, out.follow = self._links(url, page.base_href, links, out.stats)
        if page.feed_hrefs and not directives.nofollow:  # the feeds it names: URL sources
            out.feeds = self._links(
                url, page.base_href, [(h, "") for h in page.feed_hrefs], Counter()
            )[1]
        if self.links is not None and out.follow:
            out.forms = self.links.prepare(out.follow)
        if self.fields:
            out.fields = extract_fields(self.fields, body, encoding)
        out.fingerprint = clipped.fingerprint
        out.canonical_href = page.canonical_href
        if self.judge is not None and 200 <= status < 300:
            self._judge(out, url, page.main_text, page.title, clipped.main_lines)
        return out

    def analyze_document(
        self,
        kind: str,
        body: bytes,
        encoding: str | None,
        url: str,
        directives: Directives,
        *,
        status: int = 200,
        reader: ParsePool | None = None,
    ) -> PageAnalysis:
        """Analyze a PDF, DOCX, ODT or plain-text file (``kind``, :mod:`crawler.content.
        documents`) like a page: its text is both text and main text (a document has no site
        template to remove), its links (URI annotations, hyperlinks) go through the same
        joining and checks as a page's, and its text to the near-duplicate judge. A binary
        kind is read in ``reader`` (the crawl's document child, under its limits), plain text
        here; a child that fails gives no text and its reason (:class:`ChildFailed`)."""
        out = PageAnalysis()
        out.stats[f"documents/{kind}"] += 1
        if reader is not None and kind != "text":
            try:
                doc = reader.call(read_document, kind, body, encoding, max_text=self.max_text)
            except ChildFailed as exc:
                doc = DocumentText(kind, problem=exc.reason)
            out.stats.update(reader.news())
        else:
            doc = read_document(kind, body, encoding, max_text=self.max_text)
        if doc.problem is not None:
            out.document_problem = doc.problem
            out.stats[f"documents/{doc.problem}"] += 1
        if self.max_text and doc.text_chars > self.max_text:
            out.limits.append(
                (
                    "content_text",
                    f"{doc.text_chars} characters of text, kept {self.max_text} (CONTENT_MAX_TEXT)",
                )
            )
        out.title, out.text, out.main_text = doc.title, doc.text, doc.text
        out.noindex, out.nofollow = directives.noindex, directives.nofollow
        links = [] if directives.nofollow else doc.links
        if self.max_links and len(links) > self.max_links:
            out.limits.append(
                (
                    "page_links",
                    f"{len(links)} links, kept the first {self.max_links} (PAGE_MAX_LINKS)",
                )
            )
            links = links[: self.max_links]
        out.outlinks, out.follow = self._links(url, None, links, out.stats)
        if self.links is not None and out.follow:
            out.forms = self.links.prepare(out.follow)
        lines = normalize_lines(doc.text)  # once, for the fingerprint and the judge
        out.fingerprint = lines_fingerprint(doc.title, lines)
        if self.judge is not None and 200 <= status < 300 and doc.text:
            self._judge(out, url, doc.text, doc.title, lines)
        return out

    def _judge(
        self, out: PageAnalysis, url: str, text: str, title: str | None, lines: list[str]
    ) -> None:
        """The near-duplicate verdict on the page, before its links are queued (its
        pipelines run only after that), so a duplicate's links are demoted. A judge that
        fails (a bug: Redis away is the detector's to ride out) costs the page its verdict,
        never its links: one ERROR line with the traceback, and ``neardup/errors``."""
        assert self.judge is not None
        try:
            out.verdict = self.judge.judge(
                url, text, title=title or None, noindex=out.noindex, lines=lines
            )
        except Exception:
            logger.exception("Near-duplicate check of %s failed; its links are kept", url)
            out.stats["neardup/errors"] += 1
            return
        if out.verdict.demote:
            out.stats["neardup/links_demoted_pages"] += 1

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
        page, so it is plain joining plus string checks: a joined URL that starts with the
        base's own ``scheme://netloc`` (relative links, most absolute ones) needs no second parse;
        any other is kept only if the frontier would take it (:func:`link_problem`).
        """
        base = page_url
        if base_href:
            with contextlib.suppress(ValueError):  # a broken <base href> is ignored
                base = web_join(page_url, base_href)
        origin = _origin(base)
        cut = len(origin) if origin else 0
        joiner = self.joiner(base)
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
