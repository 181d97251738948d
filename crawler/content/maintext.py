"""Main-content extraction: the text of a page without its template (boilerplate removal).

Near-duplicate detection must compare what a page *says*, not the navigation, sidebars and
footers every page of a site shares: shingles of the whole visible text make two different
pages of a template-heavy site look alike, and a changing "quote of the day" makes two fetches
of one page look different. This module keeps the main content with a few cheap, well-known
rules, in one lxml pass over the tree the spider already parses:

1. Drop what is never content: scripts, styles, forms' controls, hidden elements.
2. Skip landmarks that are never the main content: ``nav``, ``aside``, page-level ``header`` and
   ``footer``, ARIA roles ``navigation``/``banner``/``contentinfo``/``complementary``/``search``,
   and elements whose id or class says so (``menu``, ``sidebar``, ``footer``, ``breadcrumb``,
   ``cookie``, ``author``, ``byline``...), unless another of their names says "content" alone
   (``entry-content has-sidebar``; ``related-article``, ``comment-content`` are chrome), nor an
   element holding a ``main``, an ``article`` or the page's first ``h1`` (a layout row named for the
   sidebar beside the article). An ad network's name (``taboola-below-article-...``,
   ``OUTBRAIN``) is chrome whatever else it says. "widget" is no chrome word: Blogger's posts
   are ``<div class="widget Blog">`` and every Elementor block an ``elementor-widget-container``.
3. If the page marks its main content (``<main>``, ``role="main"``, an ``<article>``: the only
   one, or of several, teaser cards and comments, the one holding the first ``h1``; or else one
   outermost element whose id or class names it content: ``contents``, ``main``, ``article``,
   as Readability's class weight reads them; Doxygen's ``doc-content``, asciidoc's
   ``#content``), keep that, if it holds a quarter of the page's words (an empty ``<article>``
   or a ``<div id="main">`` around a heading does not win over the text beside it), narrowed
   to the article inside a ``<main>`` when that holds half of it (``<main>`` also holds the
   related posts). Otherwise score containers like Readability does
   (:mod:`crawler.content.maintext_score`): every text block of ten or more words that is not
   mostly link text scores its parent, and its four ancestors above a share; the element
   holding the ``h1`` and the text right after it gets a bonus; the best container that is not
   mostly links wins, or the ancestor of several near-best ones (a page builder's widget per
   paragraph), or an ancestor that outscores it; with siblings that score at least a fifth of
   it (siblings of its own class, the next section of a manual, less) and are not mostly links
   either (a sidebar is a menu plus a blurb).
4. Inside the chosen part, drop blocks that are mostly link text (lists of related links),
   unless the part's link text is twice the rest and, for a part the page did not declare
   (rule 3), at least ``LINK_LIST_WORDS`` long with the rest under that: then the page is a
   link list (an index, a table of contents, a member list) and its entries are its
   content. Link text is that of links leading away: an anchor to the page itself (a
   heading's permalink) or without ``href`` is text like any other, and no link is chrome by
   its class (as Readability spares links: mdBook's headings are ``<a class="header">``).
5. When names misled: under 500 characters kept, the page is read again judging no id or class
   (Readability's retry), and that is kept if it finds more than twice as much; then, when one
   element dropped for its name (or as the page's header or footer, or as a landmark inside
   its ``main`` or ``article``) held more than twice the text kept, again with it spared.

Why not a library. On 60 real pages of 34 kinds of site (``bench/maintext_set``: Blogger,
WordPress, Elementor, Squarespace, Drupal, SPIP, news sites, Sphinx, texinfo, DocBook...,
each labelled by hand; ``bench/maintext.py``, CPU time on a shared 2-core machine):
word F1 0.949 here against 0.932 for trafilatura 2.3.1, the best maintained extractor (0.907
with ``fast=True``), precision 0.935 against 0.927, recall 0.977 against 0.956, at ~1.7 ms
per page against ~13.5 (~11 fast; two runs); on the 15 held-out pages, never looked at while tuning,
F1 0.894 against 0.850 (precision 0.861 against 0.812). Neither returned an empty text; one
page each scored under F1 0.5. So on real pages precision is on a par with trafilatura's, not
clearly better: the earlier claim rested on the synthetic pages of ``devsite/testset.py``
(480 of ~13 KB: precision 0.97 here against 0.89, mostly its keeping a short page's tagline
and sidebar prose, at 0.4 ms against 4.2). On 120 unlabelled documentation pages under
``/usr/share/doc`` (~46 KB): ~2.1 ms against ~24. And it pulls in twelve packages more than
ours (dateparser, regex, babel, pytz, htmldate, courlan, justext, lxml_html_clean...). Most
of the real pages come from trafilatura's own evaluation cache, which flatters it if anything.
Reproduce with ``/tmp/trafvenv/bin/python bench/maintext.py`` (its docstring makes that
venv). ``bench/neardup.py`` measures this module's cost next to a bare lxml parse.
"""

from __future__ import annotations

import re

from lxml import etree

from crawler.content.document import parse_document
from crawler.content.maintext_score import Block, Totals, best_cluster, link_heavy

__all__ = ["MainBlock", "main_blocks_from_tree", "main_text", "main_text_from_tree"]

# A block of the main text: the block element that holds it, and its text (whitespace folded).
MainBlock = tuple[etree._Element, str]

_NEVER_CONTENT = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
    "button",
    "input",
    "select",
    "textarea",
    "option",
    "label",
    "head",
)
_BOILERPLATE_TAGS = frozenset({"nav", "aside", "menu", "dialog"})
_BOILERPLATE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog"}
)
# Readability's "unlikely candidates", trimmed to what reliably means chrome.
_BOILERPLATE_NAME = re.compile(
    r"(?:^|[-_\s])(?:nav|navbar|navigation|menu|menubar|sidebar|side-bar|breadcrumbs?|footer|"
    r"masthead|header|banner|cookies?|consent|share|sharing|social|related|recommended|"
    r"popular|trending|advert|ads|ad-|sponsor|promo|newsletter|subscribe|signup|login|"
    r"pagination|pager|toolbar|skip|comments?|disqus|tags|tagcloud|modal|popup|author|byline)"
    r"(?:$|[-_\s\d])",
    re.IGNORECASE,
)
# Recommendation and ad networks' blocks ("taboola-below-article-thumbnails"): chrome whatever
# other word their names hold.
_AD_NETWORK = re.compile(
    r"taboola|outbrain|plista|zergnet|revcontent|ligatus|nativendo|mgid|adsbygoogle",
    re.IGNORECASE,
)
_CONTENT_NAME = re.compile(
    r"(?:^|[-_\s])(?:content|article|main|post|entry|story|body|text)(?:$|[-_\s\d])",
    re.IGNORECASE,
)
# What names *the* content container (Readability's positive class weight, its strongest
# names): "entry", "post", "text" also name table cells and list items of one page.
_MAIN_NAME = re.compile(r"(?:^|[-_\s])(?:contents?|main|article)(?:$|[-_\s\d])", re.IGNORECASE)
_BLOCK_TAGS = frozenset(
    {
        "address", "article", "blockquote", "body", "caption", "center", "dd", "details", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4",
        "h5", "h6", "header", "hr", "html", "li", "main", "ol", "p", "pre", "section", "summary",
        "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "br",
    }
)
_SHORT_TEXT = 500  # characters: less kept than this, the names misled (Readability's bound)
_MISNAMED_RATIO = 2.0  # an element dropped for its name with this many times the text kept
_DECLARED_SHARE = 0.25  # a declared main part holding less of the page's words is not it
_ARTICLE_SHARE = 0.5  # the article inside a declared <main> holding this much of it is it
LINK_LIST_WORDS = 40  # less content than this (not counting link text): a link-list page


def main_text(body: bytes | str, encoding: str | None = None) -> str:
    """The main text of an HTML page (boilerplate removed), paragraphs separated by newlines.

    ``encoding`` is the transport's (the ``Content-Type`` charset), not ``response.encoding``;
    the page is decoded by :func:`crawler.content.document.decode_html` like everywhere else.
    Broken or empty HTML gives ``""`` and never raises.
    """
    if not body:
        return ""
    try:
        root = parse_document(body, encoding)
    except (etree.ParserError, ValueError):
        return ""
    return main_text_from_tree(root)


def main_text_from_tree(root: etree._Element) -> str:
    """Like :func:`main_text` on a parsed document; *modifies* ``root`` (pass a copy to keep it).

    For a spider that already parsed the page: call it before anything else strips the tree,
    or on ``copy.deepcopy(root)`` (a copy costs far less than a second parse).
    """
    return "\n".join(text for _, text in main_blocks_from_tree(root))


def main_blocks_from_tree(root: etree._Element) -> list[MainBlock]:
    """The blocks of :func:`main_text_from_tree` (which joins their texts), each with its
    element, for a renderer that keeps the page's structure (``crawler.content.markdown``);
    *modifies* ``root`` likewise."""
    etree.strip_elements(root, *_NEVER_CONTENT, etree.Comment, etree.ProcessingInstruction,
                         with_tail=False)
    body = root.find("body")
    if body is None:
        body = root
    text, page = _extract(body, root, set())
    if _length(text) < _SHORT_TEXT:
        # Names misled (a platform whose article container's class reads as chrome): what is
        # left without judging names at all, if that finds far more (a share button's word is
        # no reason to drop every name). Landmarks still count.
        again, _ = _extract(body, root, None)
        if _length(again) > 2 * _length(text):
            text = again
    misnamed = _misnamed(page.dropped, _length(text))
    if misnamed is not None:
        # one element dropped for its name or as the page's header held far more text than
        # was kept: a layout wrapper ("c-fixed-sidebar-layout") around the article, a <header>
        # the markup never closed; again with it spared (its own chrome still dropped)
        again, _ = _extract(body, root, {misnamed})
        if _length(again) > _length(text):
            text = again
    return text


def _length(blocks: list[MainBlock]) -> int:
    """Characters of the blocks' text joined by newlines."""
    return sum(len(text) for _, text in blocks) + max(len(blocks) - 1, 0)


def _misnamed(dropped: list[etree._Element], kept: int) -> etree._Element | None:
    """The element among those dropped for their name (or as the page's header or footer, or a
    landmark inside its main part) with the most text that is not mostly link text, if it has
    more than ``_MISNAMED_RATIO`` times ``kept`` characters and more than ``_SHORT_TEXT``."""
    best, size = None, max(_MISNAMED_RATIO * kept, _SHORT_TEXT)
    for el in dropped:
        length = _string_length(el)
        if length > size:
            links = sum(_string_length(a) for a in el.iter("a"))
            if not link_heavy(int(length), int(links)):  # a menu is no misnamed article
                best, size = el, length
    return best


def _extract(
    body: etree._Element, root: etree._Element, spared: set[etree._Element] | None
) -> tuple[list[MainBlock], _Walked]:
    """One extraction of ``body``'s main text (rules 2 to 4): ids and classes judged but for
    the ``spared`` elements, or not at all (``None``)."""
    page = _walk(body, root, spared)
    container = page.marked_main()
    if container is None:
        container = _named_content(page.named)
    if container is not None and not _holds_content(page, container):
        container = None
    if container is not None and container.tag != "article":
        # the article inside the page's main part, when it holds most of it: <main> also holds
        # the related posts, the donation box, the comments
        article = page.article()
        if (article is not None and container in article.iterancestors()
                and _words(page, article) >= _ARTICLE_SHARE * _words(page, container)):
            container = article
    if container is None:
        all_blocks = page.blocks
        blocks = best_cluster(all_blocks, page.totals, page.heading)
    else:
        span = page.spans.get(container)
        # a declared main part that is no block element (a <span role=main>) is walked alone
        all_blocks = (page.blocks[span[0] : span[1]] if span is not None
                      else _walk(container, root, spared).blocks)
        blocks = all_blocks
    kept = [(el, text, words) for el, text, words, links in blocks
            if not link_heavy(words, links)]
    content = sum(words for _, _, words in kept)
    listed = sum(links for _, _, _, links in all_blocks)
    if (listed >= 2 * content and listed) if container is not None else (
        content < LINK_LIST_WORDS and listed >= max(LINK_LIST_WORDS, 2 * content)
    ):
        # A link-list page (an index, a table of contents, a list of members): its entries are
        # what it says, so they are its main text; without them a page of 300 links would be
        # compared on its two sentences of intro (or a survey banner), which one added
        # paragraph outweighs. Every block of the declared main part, else of the body (its
        # navigation, sidebars and footers are already gone). Inside a declared main part the
        # links only have to outweigh the rest twice, however long or short either is: with
        # the body's "under LINK_LIST_WORDS" as well, a "last updated" line or a paragraph
        # added to a Sphinx chapter page (an intro of 37 words and a table of contents of 300)
        # turned its main text from everything into the intro alone, and an mdBook command
        # index (a heading and five links) had none. The body keeps both bounds: its link text
        # includes whatever navigation no name or landmark gave away.
        return [(el, text) for el, text, _, _ in all_blocks], page
    return [(el, text) for el, text, _ in kept], page


# Only elements with one of these attributes, or of these tags, can be boilerplate.
_CANDIDATE_ATTRIBUTES = frozenset({"hidden", "aria-hidden", "style", "role", "id", "class"})
_CANDIDATE_TAGS = frozenset({"nav", "aside", "menu", "dialog", "header", "footer"})
# What can be the part a page names its content: a container, not a ``<span class="article">``
# (DocBook's inline reference to an article) or a ``<pre class="content">`` (asciidoc's example)
_CONTAINERS = frozenset({"div", "section", "td"})
# id/class strings already judged (boilerplate?, names the content?): most pages of a site
# repeat the same few
_names_cache: dict[str, tuple[bool, bool]] = {}
_NAMES_CACHE_MAX = 4096

class _Walked:
    """What one walk of the body found (see :func:`_walk`)."""

    __slots__ = ("articles", "blocks", "dropped", "heading", "mains", "named", "roles", "spans")

    def __init__(self) -> None:
        self.blocks: list[Block] = []  # text blocks outside boilerplate, in document order
        self.spans: dict[etree._Element, tuple[int, int]] = {}  # block element -> its blocks
        self.named: list[etree._Element] = []  # containers whose id/class names them content
        self.mains: list[etree._Element] = []
        self.roles: list[etree._Element] = []  # role="main"
        self.articles: list[etree._Element] = []
        self.heading: etree._Element | None = None  # the first h1
        # containers dropped for their id/class, and page-level headers and footers
        self.dropped: list[etree._Element] = []

    @property
    def totals(self) -> Totals:
        return Totals(self.blocks, self.spans)

    def marked_main(self) -> etree._Element | None:
        """The element the page itself declares as main content, if it declares exactly one:
        one ``<main>``, else one ``role="main"``, else one ``<article>`` (two mains or two
        main roles name none; several articles leave the choice to the rest)."""
        for found, final in ((self.mains, True), (self.roles, True)):
            if len(found) == 1:
                return found[0]
            if len(found) > 1 and final:
                return None
        return self.article()

    def article(self) -> etree._Element | None:
        """One ``<article>``, or of several the one holding the page's first ``h1``: the
        others are teasers, cards, comments (news sites and blogs mark them up as articles)."""
        if len(self.articles) == 1:
            return self.articles[0]
        if self.articles and self.heading is not None:
            above = set(self.heading.iterancestors())
            holding = [a for a in self.articles if a in above]
            if holding:
                return holding[-1]  # the innermost
        return None


def _walk(
    top: etree._Element, root: etree._Element, spared: set[etree._Element] | None = None
) -> _Walked:
    """One walk of ``top`` (the body): boilerplate left out (the module docstring's rule 2),
    the declared and the named main parts noted (rule 3), the text blocks cut.

    A block is the text between two block-level boundaries; its element is the block-level
    element that holds it (a ``<p>``, or the ``<div>``/``<td>`` for text not wrapped in one).
    A boilerplate element's subtree is skipped where it stands (its tail is kept), so the
    blocks are those of the tree without it; the tree itself is not changed.

    One pass: this was three (removing the boilerplate, finding the declared main part with
    XPath, cutting blocks), each creating a proxy for every element of the page. Linear in the
    page: which elements hold a ``main``/``article`` is worked out once from the few such
    elements, and an id/class string is matched once per distinct string (generated
    documentation repeats a few dozen of them thousands of times).
    """
    # elements with a main/article or the page's first h1 below them, and that h1: no name
    # makes them chrome (a layout row "c-fixed-sidebar-layout" around the article, an h1
    # class="byline")
    holders: set[etree._Element] = set()
    for el in root.iter("main", "article"):
        holders.update(el.iterancestors())
    heading = next(root.iter("h1"), None)
    if heading is not None:  # the headline itself too, whatever its class
        holders.update(heading.iterancestors())
        holders.add(heading)
    page = _Walked()
    blocks, spans = page.blocks, page.spans
    attributes, candidate_tags, block_tags = _CANDIDATE_ATTRIBUTES, _CANDIDATE_TAGS, _BLOCK_TAGS
    parts: list[str] = []
    link_words = 0
    link_depth = 0
    inside = 0  # main/article elements open around the current one
    stack: list[etree._Element] = [top]
    starts: list[int] = [0]
    skipped: etree._Element | None = None
    names_cache = _names_cache
    walker = etree.iterwalk(top, events=("start", "end"))
    for event, el in walker:
        tag = el.tag
        if event == "start":
            keys = el.keys()
            if keys and keys[0] == "class" and len(keys) == 1 and tag not in candidate_tags:
                # the common case (generated documentation classes every span): one cache
                # lookup
                judged = names_cache.get(el.get("class"))
                if judged is None or judged[0] or judged[1]:
                    doomed = _boilerplate(el, tag, inside, holders, page, spared)
                    if doomed:
                        walker.skip_subtree()
                        skipped = el
                        continue
            elif el is not top and (tag in candidate_tags or not attributes.isdisjoint(keys)):
                if _boilerplate(el, tag, inside, holders, page, spared):
                    walker.skip_subtree()
                    skipped = el
                    continue
                if el.get("role") == "main":
                    page.roles.append(el)
            if tag in block_tags:
                if parts:
                    _flush(parts, link_words, stack[-1], blocks)
                    parts = []
                    link_words = 0
                stack.append(el)
                starts.append(len(blocks))
                if tag == "h1" and page.heading is None:
                    page.heading = el
                elif tag == "main":
                    page.mains.append(el)
                    inside += 1
                elif tag == "article":
                    page.articles.append(el)
                    inside += 1
            elif tag == "a" and _leads_away(el):
                link_depth += 1
            text = el.text
            if text and not text.isspace():  # (the newlines between tags end no block)
                parts.append(text)
                if link_depth:
                    link_words += len(text.split())
        else:
            if el is skipped:
                skipped = None
            elif tag in block_tags:
                if parts:
                    _flush(parts, link_words, stack[-1], blocks)
                    parts = []
                    link_words = 0
                stack.pop()
                spans[el] = (starts.pop(), len(blocks))
                if tag == "main" or tag == "article":
                    inside -= 1
            elif tag == "a" and _leads_away(el):
                link_depth -= 1
            if el is top:
                break
            tail = el.tail
            if tail and not tail.isspace():
                parts.append(tail)
                if link_depth:
                    link_words += len(tail.split())
    if parts:
        _flush(parts, link_words, stack[-1], blocks)
    return page


def _boilerplate(
    el: etree._Element, tag: str, inside: int, holders: set[etree._Element],
    page: _Walked, spared: set[etree._Element] | None,
) -> bool:
    """Whether ``el`` (an element with one of the candidate attributes or tags) is never the
    main content (rule 2); an element whose id or class names it content goes to ``named``."""
    if tag in ("main", "article", "html", "body"):
        return False
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    if style and "none" in style and re.search(r"display\s*:\s*none", style):
        return True
    role = el.get("role")
    if tag in _BOILERPLATE_TAGS or (role is not None and role.lower() in _BOILERPLATE_ROLES):
        if not inside:
            return True
        if spared is None or el not in spared:
            # inside the declared main part: a pull quote, a box of related links; or, on a
            # page that wraps its story in an <aside>, the story (see _misnamed)
            page.dropped.append(el)
            return True
    if tag in ("header", "footer") and not inside and (spared is None or el not in spared):
        # (a header inside an article is its own; a page whose markup leaves its <header> open
        # has everything in it: see _misnamed)
        page.dropped.append(el)
        return True
    names = f"{el.get('id', '')} {el.get('class', '')}".strip()
    if not names:
        return False
    judged = _names_cache.get(names)
    if judged is None:
        judged = (_chrome_name(names), bool(_MAIN_NAME.search(names)))
        if len(_names_cache) >= _NAMES_CACHE_MAX:
            _names_cache.clear()
        _names_cache[names] = judged
    if (judged[0] and spared is not None and el not in holders and tag != "a"
            and el not in spared):
        # not a link (as Readability spares them): mdBook's headings are <a class="header">
        if tag in _CONTAINERS or tag in ("ul", "ol", "table"):
            page.dropped.append(el)
        return True
    if judged[1] and tag in _CONTAINERS:
        page.named.append(el)
    return False


def _chrome_name(names: str) -> bool:
    """Whether an id/class string names chrome: an ad network anywhere, else a word of chrome
    ("sidebar", "related", "comments") and no name that is content alone. A name that says both
    is chrome ("related-articles", "comment-content", "post-navigation"): the content word
    there says what the chrome is about; beside it, a name of its own ("entry-content
    has-sidebar") says the element is content."""
    if _AD_NETWORK.search(names):
        return True
    if not _BOILERPLATE_NAME.search(names):
        return False
    return not any(
        _CONTENT_NAME.search(name) and not _BOILERPLATE_NAME.search(name)
        for name in names.split()
    )


def _holds_content(page: _Walked, container: etree._Element) -> bool:
    """Whether the part a page declares or names as its content holds a fair share of the
    page's prose: an empty ``<article>`` (a teaser, a wrapper a theme left empty) or a
    ``<div id="main">`` around a heading alone must not win over the text beside it."""
    span = page.spans.get(container)
    if span is None:
        return True
    # its words, link text included (a declared part that is a list of links, an index, is
    # content), against the prose outside it (not the link lists of a fat footer)
    inside = _words(page, container)
    outside = sum(w for i, (_, _, w, n) in enumerate(page.blocks)
                  if not span[0] <= i < span[1] and not link_heavy(w, n))
    return inside >= _DECLARED_SHARE * (inside + outside)


def _words(page: _Walked, el: etree._Element) -> int:
    """Words of the blocks under ``el`` (a block element of the walk), link text included."""
    a, b = page.spans.get(el, (0, 0))
    return sum(w for _, _, w, _ in page.blocks[a:b])


_string_length = etree.XPath("string-length(.)")


def _leads_away(el: etree._Element) -> bool:
    """Whether an ``<a>`` is a link to somewhere else: an anchor without ``href``, or one to a
    place in the page itself (a heading's permalink, a "¶"), is no navigation."""
    href = el.get("href")
    return href is not None and not href.startswith("#")


def _flush(parts: list[str], link_words: int, el: etree._Element, blocks: list[Block]) -> None:
    """End the block of text ``parts`` held by ``el``."""
    text = " ".join(" ".join(parts).split())
    if text:
        words = text.count(" ") + 1
        blocks.append((el, text, words, min(link_words, words)))


def _named_content(named: list[etree._Element]) -> etree._Element | None:
    """The one element of ``named`` (those whose id or class names them content: "contents",
    "main-content", "article") still in ``body`` that no other such element holds: the part
    the page names its content, kept like a ``<main>``.

    Readability's class weight, its positive half (the negative half is dropped before), read
    as a declaration: without it a Doxygen page scored its survey banner above its member list,
    and two git manual pages scored the same included options section over their own text. The
    outermost name is the page's: Doxygen's ``doc-content`` holds ``contents``, asciidoc's
    ``#content`` holds every example block's ``content``; two at the top name none.
    """
    if not named:
        return None
    named_set = set(named)
    held = {el for el in named if any(a in named_set for a in el.iterancestors())}
    top = [el for el in named if el not in held]
    return top[0] if len(top) == 1 else None
