"""Main-content extraction: the text of a page without its template (boilerplate removal).

Near-duplicate detection must compare what a page *says*, not the navigation, sidebars and
footers every page of a site shares: shingles of the whole visible text make two different
pages of a template-heavy site look alike, and a changing "quote of the day" makes two fetches
of one page look different. This module keeps the main content with a few cheap, well-known
rules, in one lxml pass over the tree the spider already parses:

1. Drop what is never content: scripts, styles, forms' controls, hidden elements.
2. Drop landmarks that are never the main content: ``nav``, ``aside``, page-level ``header`` and
   ``footer``, ARIA roles ``navigation``/``banner``/``contentinfo``/``complementary``/``search``,
   and elements whose id or class says so (``menu``, ``sidebar``, ``footer``, ``breadcrumb``,
   ``cookie``...), unless they also say "content".
3. If the page marks its main content (``<main>``, ``role="main"``, a single ``<article>``, or
   else one outermost element whose id or class names it content: ``contents``, ``main``,
   ``article``, as Readability's class weight reads them; Doxygen's ``doc-content``, asciidoc's
   ``#content``), keep that. Otherwise score containers like Readability does: every text
   block of ten or more words that is not mostly link text adds its length to its parent and
   half to its grandparent, the element holding the ``h1`` and the text right after it gets a
   bonus, and the best container that is not mostly links wins, with siblings that score at
   least a fifth of it and are not mostly links either (a sidebar is a menu plus a blurb).
4. Inside the chosen part, drop blocks that are mostly link text (lists of related links),
   unless what is left has fewer than ``LINK_LIST_WORDS`` words and the page's link text is
   at least that long and twice the rest: then the page is a link list (an index, a table of
   contents, a member list) and its entries are its content.

Why not a library: trafilatura 2.3.1, the best maintained extractor, was measured on the
labelled set of ``devsite/testset.py`` (480 pages of ~13 KB): 6.5 ms per page against
0.7 ms here, word precision 0.90 (worst page 0.26: a sidebar taken for the article) against 0.96
(worst 0.80), both with recall 1.0; and it pulls in fourteen packages (dateparser, regex, babel,
pytz, htmldate, courlan, justext...). ``bench/neardup.py`` measures this module's cost.
"""

from __future__ import annotations

import re

from lxml import etree

from .document import parse_document

__all__ = ["main_text", "main_text_from_tree"]

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
    r"pagination|pager|toolbar|skip|widget|comments?|disqus|tags|tagcloud|modal|popup)"
    r"(?:$|[-_\s\d])",
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
_GOOD_WORDS = 10  # a block this long, not mostly links, is content-like
_LINK_HEAVY = 0.5  # a block with more link text than this share is navigation
_SIBLING_SHARE = 0.2
_SIBLING_LINKS = 0.3  # a sibling with more link text than this is a sidebar
_HEADING_BONUS = 25.0
LINK_LIST_WORDS = 40  # less content than this (not counting link text): a link-list page


def main_text(body: bytes | str, encoding: str | None = None) -> str:
    """The main text of an HTML page (boilerplate removed), paragraphs separated by newlines.

    ``encoding`` is the response's encoding (``response.encoding``); the page is decoded by
    :func:`crawler.content.document.decode_html` like everywhere else. Broken or empty HTML
    gives ``""`` and never raises.
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
    etree.strip_elements(root, *_NEVER_CONTENT, etree.Comment, etree.ProcessingInstruction,
                         with_tail=False)
    named = _drop_boilerplate(root)
    body = root.find("body")
    if body is None:
        body = root
    container = _marked_main(body)
    if container is None:
        container = _named_content(named, body)
    all_blocks, totals = _blocks(container if container is not None else body)
    blocks = all_blocks
    if container is None:
        blocks = _best_cluster(all_blocks, totals, _heading(body))
    kept = [(text, words) for _, text, words, links in blocks if not _link_heavy(words, links)]
    content = sum(words for _, words in kept)
    listed = sum(links for _, _, _, links in all_blocks)
    if content < LINK_LIST_WORDS and listed >= max(LINK_LIST_WORDS, 2 * content):
        # A link-list page (an index, a table of contents, a list of members): its entries are
        # what it says, so they are its main text; without them a page of 300 links would be
        # compared on its two sentences of intro (or a survey banner), which one added
        # paragraph outweighs. Every block of the declared main part, else of the body (its
        # navigation, sidebars and footers are already gone).
        return "\n".join(text for _, text, _, _ in all_blocks)
    return "\n".join(text for text, _ in kept)



# Only elements with one of these attributes, or of these tags, can be boilerplate.
_CANDIDATE_ATTRIBUTES = frozenset({"hidden", "aria-hidden", "style", "role", "id", "class"})
_CANDIDATE_TAGS = frozenset({"nav", "aside", "menu", "dialog", "header", "footer"})


def _candidates(root: etree._Element) -> list[etree._Element]:
    """The elements that may be boilerplate, in document order.

    A plain walk: libxml2's XPath for the same test (``//*[@id or @class or ...]``) took 20 ms
    on a 300 KB rustdoc page and 3.4 s on a 4 MB single-page book (its ``//`` merges node sets
    in quadratic time); ``keys()`` is one C call per element.
    """
    attributes, tags = _CANDIDATE_ATTRIBUTES, _CANDIDATE_TAGS
    return [
        el for el in root.iter(etree.Element)
        if el.tag in tags or not attributes.isdisjoint(el.keys())
    ]


def _drop_boilerplate(root: etree._Element) -> list[etree._Element]:
    """Remove what is never the main content (see the module docstring, rule 2), in one pass;
    return the elements it kept whose id or class names them content (rule 3).

    Linear in the page: which elements hold a ``main``/``article`` and which sit inside one is
    worked out once from the few such elements, not by a subtree search per candidate (that
    made a 4 MB single-page book cost seconds), and an id/class string is matched once per
    distinct string (generated documentation repeats a few dozen of them thousands of times).
    """
    holders: set[etree._Element] = set()  # elements with a main/article below them
    inside: set[etree._Element] = set()  # main and article elements themselves
    for el in root.iter("main", "article"):
        inside.add(el)
        holders.update(el.iterancestors())
    names_cache = _names_cache
    doomed = []
    named = []
    for el in _candidates(root):
        tag = el.tag
        if tag in ("html", "body", "main", "article"):
            continue
        if el.get("hidden") is not None or el.get("aria-hidden") == "true":
            doomed.append(el)
            continue
        style = el.get("style")
        if style and "none" in style and re.search(r"display\s*:\s*none", style):
            doomed.append(el)
            continue
        if tag in _BOILERPLATE_TAGS or el.get("role", "").lower() in _BOILERPLATE_ROLES:
            doomed.append(el)
            continue
        if tag in ("header", "footer") and not (inside and _inside_content(el, inside)):
            doomed.append(el)
            continue
        names = f"{el.get('id', '')} {el.get('class', '')}".strip()
        if not names:
            continue
        judged = names_cache.get(names)
        if judged is None:
            judged = (
                bool(_BOILERPLATE_NAME.search(names) and not _CONTENT_NAME.search(names)),
                bool(_MAIN_NAME.search(names)),
            )
            if len(names_cache) >= _NAMES_CACHE_MAX:
                names_cache.clear()
            names_cache[names] = judged
        if judged[0] and el not in holders:
            doomed.append(el)
        elif judged[1] and tag in _CONTAINERS:
            named.append(el)
    for el in doomed:
        parent = el.getparent()
        if parent is not None:  # an ancestor may already be gone
            _remove_keep_tail(el)
    return named


# What can be the part a page names its content: a container, not a ``<span class="article">``
# (DocBook's inline reference to an article) or a ``<pre class="content">`` (asciidoc's example)
_CONTAINERS = frozenset({"div", "section", "td"})
# id/class strings already judged (boilerplate?, names the content?): most pages of a site
# repeat the same few
_names_cache: dict[str, tuple[bool, bool]] = {}
_NAMES_CACHE_MAX = 4096


def _inside_content(el: etree._Element, content: set[etree._Element]) -> bool:
    """A ``header``/``footer`` inside an ``article`` or ``main`` belongs to that content."""
    return any(a in content for a in el.iterancestors())


def _remove_keep_tail(el: etree._Element) -> None:
    parent = el.getparent()
    if el.tail and el.tail.strip():
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + " " + el.tail
        else:
            parent.text = (parent.text or "") + " " + el.tail
    parent.remove(el)


def _marked_main(body: etree._Element) -> etree._Element | None:
    """The element the page itself declares as main content, if it declares exactly one."""
    for path in (".//main", ".//*[@role='main']", ".//article"):
        found = body.findall(path) if not path.startswith(".//*") else body.xpath(path)
        if len(found) == 1:
            return found[0]
        if len(found) > 1 and path != ".//article":
            return None
    return None


Block = tuple[etree._Element, str, int, int]  # (block element, text, words, words in links)
Totals = dict[etree._Element, list[int]]  # block element -> [words, words in links] under it


def _blocks(container: etree._Element) -> tuple[list[Block], Totals]:
    """The text blocks of ``container`` in document order, and word counts per block element.

    A block is the text between two block-level boundaries; its element is the block-level
    element that holds it (a ``<p>``, or the ``<div>``/``<td>`` for text not wrapped in one).
    """
    blocks: list[Block] = []
    totals: Totals = {}
    parts: list[str] = []
    link_words = 0
    link_depth = 0
    stack: list[etree._Element] = [container]

    def flush() -> None:
        nonlocal parts, link_words
        if parts:
            text = " ".join(" ".join(parts).split())
            if text:
                words = text.count(" ") + 1
                links = min(link_words, words)
                blocks.append((stack[-1], text, words, links))
                for el in stack:
                    total = totals.get(el)
                    if total is None:
                        totals[el] = [words, links]
                    else:
                        total[0] += words
                        total[1] += links
        parts = []
        link_words = 0

    for event, el in etree.iterwalk(container, events=("start", "end")):
        tag = el.tag
        if not isinstance(tag, str):
            continue
        if event == "start":
            if tag in _BLOCK_TAGS:
                flush()
                stack.append(el)
            elif tag == "a":
                link_depth += 1
            if el.text:
                parts.append(el.text)
                if link_depth:
                    link_words += len(el.text.split())
        else:
            if tag in _BLOCK_TAGS:
                flush()
                stack.pop()
            elif tag == "a":
                link_depth -= 1
            if el.tail and stack:
                parts.append(el.tail)
                if link_depth:
                    link_words += len(el.tail.split())
    flush()
    return blocks, totals


def _link_heavy(words: int, link_words: int) -> bool:
    return link_words > _LINK_HEAVY * words


def _heading(body: etree._Element) -> etree._Element | None:
    """The page's main heading: the first ``h1`` (most templates put the site name in a logo)."""
    return body.find(".//h1")


def _named_content(
    named: list[etree._Element], body: etree._Element
) -> etree._Element | None:
    """The one element of ``named`` (those whose id or class names them content: "contents",
    "main-content", "article") still in ``body`` that no other such element holds: the part
    the page names its content, kept like a ``<main>``.

    Readability's class weight, its positive half (the negative half is dropped before), read
    as a declaration: without it a Doxygen page scored its survey banner above its member list,
    and two git manual pages scored the same included options section over their own text. The
    outermost name is the page's: Doxygen's ``doc-content`` holds ``contents``, asciidoc's
    ``#content`` holds every example block's ``content``; two at the top name none.
    """
    named = [el for el in named if any(a is body for a in el.iterancestors())]
    if not named:
        return None
    named_set = set(named)
    held = {el for el in named if any(a in named_set for a in el.iterancestors())}
    top = [el for el in named if el not in held]
    return top[0] if len(top) == 1 else None


def _best_cluster(
    blocks: list[Block], totals: Totals, heading: etree._Element | None
) -> list[Block]:
    """Readability-style: keep the blocks under the best-scoring container (and its siblings).

    Every content-like block (ten words or more, not mostly link text) adds a score to its
    parent and half of it to its grandparent. The element holding both the page's ``h1`` and
    the first such block after it gets a bonus worth a long article: on a page whose content is
    one short paragraph, a sidebar's "about this site" box would otherwise win. Containers and
    siblings that are mostly link text (a sidebar with a menu and a blurb) are not content.
    """
    scores: dict[etree._Element, float] = {}
    seen_heading = False
    bonus_pending = heading is not None
    for el, text, words, link_words in blocks:
        if bonus_pending and not seen_heading and (el is heading or _under(el, {heading})):
            seen_heading = True
            continue
        if words < _GOOD_WORDS or _link_heavy(words, link_words):
            continue
        score = 1.0 + text.count(",") + min(len(text) / 100.0, 3.0)
        if seen_heading and bonus_pending and heading is not None:
            bonus_pending = False
            common = _common_ancestor(heading, el)
            if common is not None and common.tag not in ("body", "html"):
                scores[common] = scores.get(common, 0.0) + _HEADING_BONUS
        parent = el.getparent() if el.tag in ("p", "li", "dd", "pre", "blockquote") else el
        if parent is None:
            continue
        scores[parent] = scores.get(parent, 0.0) + score
        grand = parent.getparent()
        if grand is not None:
            scores[grand] = scores.get(grand, 0.0) + score / 2
    if not scores:
        return blocks

    def link_share(el: etree._Element) -> float:
        words, links = totals.get(el, (0, 0))
        return links / words if words else 0.0

    candidates = [el for el in scores if link_share(el) <= _LINK_HEAVY] or list(scores)
    best = max(candidates, key=scores.__getitem__)
    keep = {best}
    parent = best.getparent()
    if parent is not None:
        floor = max(_SIBLING_SHARE * scores[best], 10.0)
        keep.update(
            s for s in parent
            if scores.get(s, 0.0) >= floor and link_share(s) <= _SIBLING_LINKS
        )
    return [b for b in blocks if _under(b[0], keep)]


def _common_ancestor(a: etree._Element, b: etree._Element) -> etree._Element | None:
    """The deepest element holding both ``a`` and ``b`` (``b`` itself when it holds ``a``)."""
    mine = set(a.iterancestors())
    if b in mine:
        return b
    return next((el for el in b.iterancestors() if el in mine), None)


def _under(el: etree._Element, roots: set[etree._Element | None]) -> bool:
    node: etree._Element | None = el
    while node is not None:
        if node in roots:
            return True
        node = node.getparent()
    return False
