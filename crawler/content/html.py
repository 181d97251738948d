"""One lean parse per page: title, visible text, main text and links with their anchor text."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from crawler.content.document import parse_document_checked
from crawler.content.maintext import _BLOCK_TAGS, main_blocks_from_tree
from crawler.content.markdown import render_markdown
from crawler.content.metadata import page_metadata
from crawler.content.normalize import lines_fingerprint, normalize_lines
from crawler.content.requisites import tree_requisites
from crawler.net.weburl import join as web_join

# <link rel="alternate" type=...> of the feeds a crawl reads (crawler.sitemaps.feeds)
FEED_TYPES = frozenset(
    {"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+json"}
)
MAX_FEEDS = 8  # feeds kept from one page's head: a site has a few; a page of 10,000 is hostile

_INVISIBLE = {"script", "style", "noscript", "template", "head", "svg"}


@dataclass
class ParsedPage:
    title: str = ""
    text: str = ""
    main_text: str = ""  # the text without the site's template (crawler.content.maintext)
    base_href: str | None = None
    canonical_href: str | None = None  # <link rel="canonical" href>, the first (as written)
    feed_hrefs: list[str] = field(default_factory=list)  # <link rel="alternate"> feeds, raw
    links: list[tuple[str, str]] = field(default_factory=list)  # (raw href, anchor text)
    metas: dict[str, str] = field(default_factory=dict)  # <meta name> (lower-case) -> content
    nofollow_hrefs: set[str] = field(default_factory=set)  # hrefs only ever rel="nofollow"
    flattened: bool = False  # nested too deep for libxml2: parsed again without nesting tags
    # raw references of embedded resources (crawler.content.requisites), when asked for
    requisites: list[str] = field(default_factory=list)
    markdown: str = ""  # the main content as Markdown (crawler.content.markdown), when asked for
    # description, cards, JSON-LD, microdata, dates (crawler.content.metadata), when asked for
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def meta_robots(self) -> str:
        return self.metas.get("robots", "").lower()


def parse_html(
    body: bytes | str,
    encoding: str | None = None,
    *,
    main_text: bool = True,
    requisites: bool = False,
    markdown: bool = False,
    metadata: bool = False,
    url: str = "",
) -> ParsedPage:
    """Parse once with lxml and pull out what the crawler needs; broken HTML never raises.

    ``encoding`` is the ``Content-Type`` charset (``crawler.content.encoding.transport_encoding``;
    ``None`` lets the page say); decoding is :func:`crawler.content.document.decode_html`, the
    same for every reader of a page.

    ``main_text`` (boilerplate removal, ~1 ms on a page of a few hundred links) is skipped when
    nothing will use it; ``requisites`` (the page's embedded resources, for an archival crawl:
    ``crawler.content.requisites``) is collected in the same parse when asked for.
    """
    page = ParsedPage()
    if not body:
        return page
    try:
        root, page.flattened = parse_document_checked(body, encoding)
    except (etree.ParserError, ValueError):
        return page
    title = root.find(".//title")
    if title is not None and title.text:
        page.title = " ".join(title.text.split())
    base = root.find(".//base[@href]")
    if base is not None:
        page.base_href = base.get("href", "").strip() or None
    for link in root.iterfind(".//link[@rel]"):
        rels = link.get("rel", "").lower().split()
        href = link.get("href", "").strip()
        if not href:
            continue
        if "canonical" in rels and page.canonical_href is None:
            page.canonical_href = href
        elif (
            "alternate" in rels
            and link.get("type", "").split(";")[0].strip().lower() in FEED_TYPES
            and len(page.feed_hrefs) < MAX_FEEDS
            and href not in page.feed_hrefs
        ):
            page.feed_hrefs.append(href)
    metas = page.metas
    for meta in root.iterfind(".//meta[@name]"):
        name = meta.get("name", "").strip().lower()
        content = meta.get("content", "")
        metas[name] = f"{metas[name]} {content}" if name in metas else content
    links = page.links
    followed: set[str] = set()
    for el in root.iterfind(".//a[@href]"):
        href = el.get("href", "")
        # most anchors hold plain text: reading it directly is 3x cheaper than the string value
        text = _string(el) if len(el) else el.text or ""
        links.append((href, " ".join(text.split())))
        rel = el.get("rel")
        if rel is not None and "nofollow" in rel.lower().split():
            page.nofollow_hrefs.add(href)
        else:
            followed.add(href)
    for el in root.iterfind(".//area[@href]"):
        href = el.get("href", "")
        links.append((href, el.get("alt", "")))
        followed.add(href)
    page.nofollow_hrefs -= followed
    if requisites:
        page.requisites = tree_requisites(root)
    if metadata:  # before the head and scripts go
        page.metadata = page_metadata(root, metas)
    page.text = visible_text(root)
    if main_text or markdown:
        blocks = main_blocks_from_tree(root)  # last: both strip the tree in place
        page.main_text = "\n".join(text for _, text in blocks)
        if markdown:
            base = url
            if page.base_href:
                with contextlib.suppress(ValueError):  # a broken <base href> is ignored
                    base = web_join(url, page.base_href)
            page.markdown = render_markdown(blocks, base)
    return page


@dataclass
class ClippedPage:
    """:func:`parse_page`'s answer: the page cut to what a crawl keeps, and what was cut."""

    page: ParsedPage  # links and texts no longer than the limits
    links: int  # links on the page before the cut
    text: int  # characters of text before the cut
    fingerprint: str  # change fingerprint of the title and the (cut) main text, else text
    # normalize_lines of the (cut) main text: the near-duplicate detector's input, made here
    # with the fingerprint so the text is normalized once
    main_lines: list[str] = field(default_factory=list)


def parse_page(
    body: bytes,
    encoding: str | None = None,
    *,
    main_text: bool = True,
    max_links: int = 0,
    max_text: int = 0,
    requisites: bool = False,
    markdown: bool = False,
    metadata: bool = False,
    url: str = "",
) -> ClippedPage:
    """:func:`parse_html` with the links cut to ``max_links`` and the texts to ``max_text``
    characters (0: no cut), and the page's change fingerprint.

    The spider's parse, whether it runs on the content thread or in a child process
    (``crawler.offload.components``): everything here is a pure function of the bytes, and what
    crosses a
    process boundary is already cut to what the crawl keeps (a page of 100,000 links would be
    100,000 tuples to unpickle on the parent's side).
    """
    page = parse_html(
        body,
        encoding,
        main_text=main_text,
        requisites=requisites,
        markdown=markdown,
        metadata=metadata,
        url=url,
    )
    links, text = len(page.links), len(page.text)
    if max_links and links > max_links:
        page.links = page.links[:max_links]
    if max_text and text > max_text:
        page.text = page.text[:max_text]
        page.main_text = page.main_text[:max_text]
    if max_text and len(page.markdown) > max_text:
        page.markdown = page.markdown[:max_text]
    # Change detection compares what the page says (its main text, normalized like the
    # near-duplicate pipeline does), so a counter, a date or a sidebar is not a change.
    main_lines = normalize_lines(page.main_text)
    fingerprint = lines_fingerprint(
        page.title, main_lines if page.main_text else normalize_lines(page.text)
    )
    return ClippedPage(page, links, text, fingerprint, main_lines)


# An element's text with its descendants' (lxml.html's text_content()), in C.
_string = etree.XPath("string()", smart_strings=False)


def visible_text(root: etree._Element) -> str:
    """The text a reader sees: no scripts, styles or head; whitespace folded within a block,
    one line per block element (heading, paragraph, list item, cell...), so a heading and the
    menu after it do not run together ("Test site 127.0.0.4Home").

    Strips the invisible elements from ``root`` in place, so call it after everything else but
    the main text has been read.
    """
    etree.strip_elements(root, *_INVISIBLE, etree.Comment, with_tail=False)
    return block_text(root)


_BLOCK_MARK = "\u2029"  # PARAGRAPH SEPARATOR: where a block starts or ends; whitespace to split()
# The text of a tree with a mark before and after each block element, in libxslt (C): about
# twice as fast as marking the tree from Python, and the tree is left as it was.
_BLOCK_TEXT = etree.XSLT(
    etree.XML(
        '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
        '<xsl:output method="text" encoding="UTF-8"/>'
        f'<xsl:template match="{"|".join(sorted(_BLOCK_TAGS))}">'
        "<xsl:text>&#x2029;</xsl:text><xsl:apply-templates/><xsl:text>&#x2029;</xsl:text>"
        "</xsl:template></xsl:stylesheet>"
    )
)


def block_text(root: etree._Element) -> str:
    """``root``'s text with a line break between block elements."""
    try:
        marked = str(_BLOCK_TEXT(root))
    except etree.XSLTError:  # nesting deeper than libxslt's template depth
        marked = _marked_text(root)
    # whitespace folded in each piece, empty pieces dropped: C loops (map/filter), not a
    # generator's Python frame per piece (most pieces are empty: two marks between blocks)
    return "\n".join(filter(None, map(" ".join, map(str.split, marked.split(_BLOCK_MARK)))))


def _marked_text(root: etree._Element) -> str:
    """The same marks set in the tree itself (they stay: whitespace at block boundaries, which
    every later reader of the tree folds away like any other)."""
    mark = _BLOCK_MARK
    for el in root.iter(*_BLOCK_TAGS):
        # lxml's parser keeps control characters that lxml then refuses to set: such a block
        # gets no mark
        text = el.text
        try:
            el.text = mark + text if text else mark
        except ValueError:
            continue
        tail = el.tail
        try:
            el.tail = mark + tail if tail else mark
        except ValueError:
            el.text = text
    return str(_string(root))
