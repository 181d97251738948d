"""Container scoring for :mod:`crawler.content.maintext` (its rule 3, when the page declares no
main part): which element holds the article, Readability's way.

Kept apart from the walk that cuts the page into blocks: this part only reads the blocks (their
element, text, words and link words) and the tree above them.
"""

from __future__ import annotations

from lxml import etree

__all__ = ["Block", "Totals", "best_cluster", "link_heavy"]

_GOOD_WORDS = 10  # a block this long, not mostly links, is content-like
_LINK_HEAVY = 0.5  # a block with more link text than this share is navigation
_SIBLING_SHARE = 0.2
_SIBLING_LINKS = 0.3  # a sibling with more link text than this is a sidebar
_HEADING_BONUS = 25.0
_DIVIDERS = (1, 2, 6, 9, 12)  # a block's score over its parent, grandparent... (Readability's)
_TOP_CANDIDATES = 5  # Readability's: the best and four more ...
_NEAR_BEST = 0.75  # ... those scoring this share of the best ...
_ALTERNATIVES = 2  # ... this many under one ancestor make it the article (Readability: 3)

Block = tuple[etree._Element, str, int, int]  # (block element, text, words, words in links)


class Totals:
    """Words and words in links under each block element: the blocks under an element are one
    run of the page's blocks (``spans``), so the sums are differences of two prefix sums, not a
    count added to every ancestor of every block."""

    def __init__(self, blocks: list[Block], spans: dict[etree._Element, tuple[int, int]]):
        self._spans = spans
        words = [0]
        links = [0]
        for _, _, w, n in blocks:
            words.append(words[-1] + w)
            links.append(links[-1] + n)
        self._words, self._links = words, links

    def get(self, el: etree._Element, default: tuple[int, int] = (0, 0)) -> tuple[int, int]:
        span = self._spans.get(el)
        if span is None:
            return default
        a, b = span
        return self._words[b] - self._words[a], self._links[b] - self._links[a]


def link_heavy(words: int, link_words: int) -> bool:
    return link_words > _LINK_HEAVY * words


def best_cluster(
    blocks: list[Block], totals: Totals, heading: etree._Element | None
) -> list[Block]:
    """Readability-style: keep the blocks under the best-scoring container (and its siblings).

    Every content-like block (ten words or more, not mostly link text) adds a score to its
    parent, half of it to its grandparent, a sixth, a ninth and a twelfth to the three
    ancestors above (Readability.js's dividers). The element holding both the page's ``h1`` and
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
        if words < _GOOD_WORDS or link_heavy(words, link_words):
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
        # Readability's: the parent gets the score, the grandparent half, the three ancestors
        # above a sixth, a ninth, a twelfth (a section holding definition lists of paragraphs)
        node: etree._Element | None = parent
        for divider in _DIVIDERS:
            if node is None:
                break
            scores[node] = scores.get(node, 0.0) + score / divider
            node = node.getparent()
    if not scores:
        return blocks

    def link_share(el: etree._Element) -> float:
        words, links = totals.get(el, (0, 0))
        return links / words if words else 0.0

    candidates = [el for el in scores if link_share(el) <= _LINK_HEAVY] or list(scores)
    best = max(candidates, key=scores.__getitem__)
    # Readability's alternatives: when the article is cut into many small boxes (a page
    # builder puts each paragraph in a widget of its own), several near-best candidates share
    # an ancestor, and that ancestor holds the article
    top = sorted(candidates, key=scores.__getitem__, reverse=True)[1:_TOP_CANDIDATES]
    near = [el for el in top if scores[el] >= _NEAR_BEST * scores[best]]
    if len(near) >= _ALTERNATIVES:
        for node in best.iterancestors():
            if node.tag in ("body", "html"):
                break
            if sum(1 for el in near if _under(el, {node})) >= _ALTERNATIVES:
                scores[node] = max(scores.get(node, 0.0), scores[best])
                best = node
                break
    # Readability's climb: an ancestor scoring more than the best, through ancestors scoring
    # at least a third of it, holds the whole text (a texinfo section whose definitions,
    # <dd> paragraphs, outscore its own paragraphs one by one)
    last, floor, node = scores[best], scores[best] / 3, best.getparent()
    while node is not None and node.tag not in ("body", "html"):
        score = scores.get(node)
        if score is not None:
            if score < floor:
                break
            if score > last and link_share(node) <= _LINK_HEAVY:
                best = node
                break
            last = score
        node = node.getparent()
    keep = {best}
    parent = best.getparent()
    if parent is not None:
        floor = max(_SIBLING_SHARE * scores[best], 10.0)
        # Readability's class bonus: a sibling of the best's own class and tag (the next
        # section of a manual, the next post body) is held to a fifth of the best's score less
        same = best.get("class") or None
        bonus = _SIBLING_SHARE * scores[best]
        keep.update(
            s for s in parent
            if scores.get(s, 0.0) + (bonus if same and s.tag == best.tag
                                     and s.get("class") == same else 0.0) >= floor
            and link_share(s) <= _SIBLING_LINKS
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
