"""The near-duplicate decision as pure functions, shared by both detectors: the in-process one
(:mod:`crawler.content.neardup`) and the one whose state is in Redis
(:mod:`crawler.backends.redis.neardup`). Each feeds them what its state answers (the page's own
id, the owner of its fingerprint, the first postings of its anchors, the stored candidates, the
hosts' templates), so both decide alike.

How a decision is made (the defaults are justified by ``bench/neardup.py`` on the synthetic set
and ``bench/realpages.py`` on real documentation pages):

1. The main text is normalized (:func:`crawler.content.normalize.normalize_text`: counters,
   dates, session ids masked, version strings kept) and fingerprinted; a fingerprint already
   owned by another URL is an exact duplicate (similarity 1.0). Mirrors land here. The
   fingerprint is of the *whole* main text, independent of anything learned, so it is also the
   crawl database's stable change fingerprint.
2. Each line of the main text is a block. Blocks that recur on many distinct pages of the host
   are its template (:mod:`crawler.content.template`: rustdoc's trait implementations, the
   shared option sections of one command family) and are left out of the comparison.
3. What is left is shingled (``shingle_size`` words, at most :data:`MAX_SHINGLES`) and kept as a
   bottom-k sketch: the ``num_perm`` smallest 32-bit shingle hashes, each with the hash of the
   block it came from. Because every entry knows its block, a stored sketch can be filtered
   *later* by template blocks learned since, and by the template of the other page's host (a
   mirror on a fresh host), so both sides of a comparison always leave out the same blocks.
   The similarity is the Jaccard similarity of the two filtered sketches over the hash range
   both cover (exact when both pages are small).
4. Candidates come from an inverted index of each original's :data:`ANCHORS` smallest hashes
   (a near-duplicate shares most of them); the candidates sharing the most anchors are
   verified, and the decision is ``similarity >= threshold``.
5. A page that is not a duplicate becomes an original and teaches the host's template model;
   duplicates never become originals, so ``duplicate_of`` always names an original (no chains),
   and the first URL seen with a content is its original.

Deliberate cases: a page whose main text, template left out, is empty (a page that is all
template) is compared exactly only. A *tiny* page, under :data:`MIN_WORDS` words (a stub, an
index of one entry, a redirect stub whose only line of its own is its heading), is compared only
with pages of its title, and only as "the same lines plus one inserted run of lines"
(:func:`tiny_insertion`): a handful of shingles cannot tell a near-duplicate from a sibling, but
an edit (a "last updated" line, a banner, a paragraph) leaves the page's lines whole. Link-list
pages (indexes, tables of contents) are compared on their link texts: main-text extraction keeps
link-heavy blocks when a page has little else, or when they outweigh the rest of a part the page
declares its main content (:mod:`crawler.content.maintext`), so an index page is its list of
entries and one inserted paragraph does not outweigh it. Pages of one ``<title>`` get two more
rules (:func:`pick_best`): a page with *one block inserted* (a paragraph added to a short page,
whose Jaccard similarity is ~0.5 by construction) is a near-duplicate when the smaller page's
sketch is all in the larger's but for the shingles that spanned the insertion point
(:func:`insertion`); and two *short* pages (under :data:`SHORT_PAGE` shingles) must share whole
lines (:func:`keeps_lines`): on a sentence or two, an edited word cannot be told from a sibling
naming something else (Doxygen's "complete list of members for <class>"), but real edits add
lines.

The page's features (fingerprint, blocks, sketch) are :mod:`crawler.content.neardup_features`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from crawler.content.neardup_features import Features

# A page with fewer words than this (template left out) is tiny: compared only as its own lines
# plus one inserted run (tiny_insertion).
MIN_WORDS = 8
VERIFY = 12  # candidates verified, those sharing the most anchors first
# Pages whose titles differ name different things (two commands, two structs of one module):
# they must be this similar to be near-duplicates. A mirror with another title suffix, or an
# original and its edit, are far above it; siblings of one template are below.
OTHER_TITLE_THRESHOLD = 0.95
# A short page of one title (a template names such pages alike: Doxygen's every "Member
# List") must share whole blocks with a near-duplicate: most of one page's text (this share of
# its sketch's entries) is lines the other page has verbatim. On a page of a sentence or two an
# edited word cannot be told from a sibling naming something else ("the complete list of
# members for <class>": Jaccard 0.5-0.65), but a real edit of it adds, drops or moves lines (a
# banner, a date line, a paragraph; dates and counters are masked by normalization). On the
# real-pages set's tuning part every positive of similarity >= 0.5 has >= 0.9, every short
# sibling of one title 0-0.24. Longer pages are left to their words: a page lightly edited in
# every paragraph shares no line, and its many shingles say what it is.
SHARED_BLOCKS = 0.5
# ... when the smaller page has fewer shingles than this (template left out): "little content"
# in the sense of main-text extraction's LINK_LIST_WORDS, a paragraph's worth.
SHORT_PAGE = 40
# A near-duplicate this similar or more repeats its original and teaches the template model
# nothing; a less similar one (a sibling let through while the model was young) still teaches
# it, so a shared section flagged early becomes template instead of staying unlearned.
TEACHING_SIMILARITY = 0.9


@dataclass(frozen=True, slots=True)
class Decision:
    """What the detector concluded about one page."""

    fingerprint: str
    duplicate_of: str | None = None  # URL of the original
    similarity: float | None = None  # estimated Jaccard to the original (1.0 when exact)
    kind: str = "new"  # "new", "exact", "near", "empty"
    words: int = 0

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate_of is not None


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted, non-empty ``sorted_set``: a binary search
    per value. ``np.isin`` sorts (or hashes) both arrays on every call, and the detector makes
    two such calls per candidate and template: it was a third of a crawl's near-duplicate
    time."""
    at = np.searchsorted(sorted_set, values)
    np.minimum(at, len(sorted_set) - 1, out=at)
    return sorted_set[at] == values


def rank_candidates(postings: Iterable[Iterable[int]], exclude: int | None) -> list[int]:
    """The originals to verify, in order (the detectors keep the first :data:`VERIFY` live
    ones): one vote per posting (each anchor's first
    :data:`~crawler.content.neardup_index.MAX_POSTING` originals), all but ``exclude`` (the
    page's own id), most votes first, then the earliest stored."""
    votes: dict[int, int] = {}
    for posting in postings:
        for d in posting:
            votes[d] = votes.get(d, 0) + 1
    votes.pop(exclude, None)  # type: ignore[arg-type]
    return sorted(votes, key=lambda d: (-votes[d], d))


@dataclass(slots=True)
class Candidate:
    """A stored original as :func:`pick_best` compares it."""

    doc: int  # its id (ties go to the earliest)
    sketch: np.ndarray
    blocks: np.ndarray
    cover: int
    title: int  # title_hash of its title, 0 if none
    template: np.ndarray | None  # its host's template blocks (sorted); None: the page's host


def _filtered(
    sketch_a: np.ndarray,
    blocks_a: np.ndarray,
    cover_a: int,
    sketch_b: np.ndarray,
    blocks_b: np.ndarray,
    cover_b: int,
    template_a: np.ndarray,
    template_b: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Both sketches (and the block of each entry) over the hash range both cover, without
    either host's template: within that range each holds *every* kept hash of its page, so
    what one has and the other lacks is exact there."""
    limit = min(cover_a, cover_b)
    filters = [t for t in (template_a, template_b) if t is not None and len(t)]
    mine_keep = sketch_a <= limit
    other_keep = sketch_b <= limit
    for t in filters:  # templates are sorted: a binary search per block, no sort per call
        mine_keep &= ~_member(blocks_a, t)
        other_keep &= ~_member(blocks_b, t)
    return sketch_a[mine_keep], blocks_a[mine_keep], sketch_b[other_keep], blocks_b[other_keep]


def similarity(
    sketch_a: np.ndarray,
    blocks_a: np.ndarray,
    cover_a: int,
    sketch_b: np.ndarray,
    blocks_b: np.ndarray,
    cover_b: int,
    template_a: np.ndarray,
    template_b: np.ndarray | None,
) -> tuple[float, float]:
    """Jaccard similarity and containment of two sketches, both without either host's
    template, over the hash range both cover."""
    a, _, b, _ = _filtered(sketch_a, blocks_a, cover_a, sketch_b, blocks_b, cover_b,
                           template_a, template_b)
    if not len(a) or not len(b):
        return 0.0, 0.0
    shared = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - shared
    if union < MIN_WORDS:
        return 0.0, 0.0  # too little left to judge
    small, large = sorted((len(a), len(b)))
    # containment only between pages of comparable size: one added paragraph, not a page
    # that lists everything a smaller one lists (an inherited-members list)
    contained = shared / small if 2 * small >= large else 0.0
    return shared / union, contained


def insertion(f: Features, own_template: np.ndarray, c: Candidate) -> float:
    """The share of the smaller page found in the larger when the larger is the smaller one
    plus *one inserted run of blocks* (a paragraph added, or removed), else 0.

    One added paragraph leaves a short page's Jaccard similarity near 0.5 by construction (a
    page of N words plus N words), yet the edit is plain to see in the sketches, whose entries
    know their block: within the hash range both sketches cover,

    * the smaller page lacks at most ``shingle_size - 1`` of the larger's shingles: those that
      spanned the point where the run went in (nothing of it was rewritten);
    * the larger page's other shingles start in blocks the smaller page does not have (the
      run), but for at most ``shingle_size - 1`` starting just before it;
    * those blocks are one run: when the larger page is the one being checked, no block the
      smaller page has sits between them in its block order; when it is the stored one (whose
      block order is not stored), they are one block.

    A sibling of one template fails the first test as soon as it names anything of its own (a
    member list's "complete list of members for <class>", a function's signature): this is
    why the rule is about containment *and* one run, not containment alone.
    """
    a, a_blocks, b, b_blocks = _filtered(
        f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
        own_template, c.template,
    )
    if not len(a) or not len(b) or len(a) == len(b):
        return 0.0
    boundary = f.shingle_size - 1
    page_larger = len(a) > len(b)
    large, large_blocks, small = (a, a_blocks, b) if page_larger else (b, b_blocks, a)
    in_small = _member(large, small)
    shared = int(in_small.sum())
    if len(small) - shared > boundary:
        return 0.0
    if page_larger:
        small_has = np.unique(c.blocks)  # every block of the stored page with an entry
    else:
        small_has = np.unique(np.fromiter(f.blocks, np.uint32, len(f.blocks)))
    extra_blocks = large_blocks[~in_small]
    known = _member(extra_blocks, small_has)  # both pages have entries: neither is empty
    if int(known.sum()) > boundary:
        return 0.0
    run = np.unique(extra_blocks[~known])
    if not len(run):
        return 0.0
    if page_larger:
        order = np.fromiter(f.blocks, np.uint32, len(f.blocks))
        if len(own_template):
            order = order[~_member(order, own_template)]
        at = np.flatnonzero(_member(order, run))
        if not len(at):
            return 0.0
        between = order[at[0] : at[-1] + 1]
        if _member(between, small_has).any():
            return 0.0
    elif len(run) > 1:
        return 0.0
    return shared / len(small)


def keeps_lines(f: Features, own_template: np.ndarray, c: Candidate) -> bool:
    """False for a short pair that shares too few whole lines to be an edit (see
    :data:`SHARED_BLOCKS`): the smaller has under :data:`SHORT_PAGE` entries over the range both
    cover, templates out, and neither page has :data:`SHARED_BLOCKS` of its entries in blocks the
    other has verbatim. The page's own blocks are all known (``f.blocks``); the stored page's
    are those of its sketch's entries."""
    a, a_blocks, b, b_blocks = _filtered(
        f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
        own_template, c.template,
    )
    if not len(a) or not len(b) or min(len(a), len(b)) >= SHORT_PAGE:
        return True
    page_has = np.unique(np.fromiter(f.blocks, np.uint32, len(f.blocks)))
    stored_has = np.unique(c.blocks)
    share = max(float(_member(b_blocks, page_has).mean()),
                float(_member(a_blocks, stored_has).mean()))
    return share >= SHARED_BLOCKS


def tiny(sketch: np.ndarray, shingle_size: int) -> bool:
    """A sketch of a page under :data:`MIN_WORDS` words (template left out): fewer entries than
    such a page's shingles. Told from the sketch alone, so a stored page (whose word count is
    not kept) is judged as the page being checked is."""
    return len(sketch) < max(1, MIN_WORDS - shingle_size + 1)


def tiny_insertion(f: Features, own_template: np.ndarray, c: Candidate, threshold: float) -> float:
    """For a pair with a :func:`tiny` page: the similarity when the larger page is the smaller
    one, every line of it verbatim, plus one inserted run of lines (:func:`insertion`), else 0.

    A handful of words says too little for a similarity of words: two stubs of one template
    ("GLib Tools / glib-gettextize", a redirect stub whose only line of its own is its
    heading) share most of their shingles. But the edits a page goes through (a "last updated"
    line, a banner, a paragraph added) leave its lines as they were and add lines next to them,
    which siblings do not: they differ *inside* their lines.

    Such a pair is only verified when it is a candidate: when one of the tiny page's few hashes
    is among the larger page's :data:`ANCHORS` (the index is not widened for them).
    """
    sim = insertion(f, own_template, c)
    if not sim:
        return 0.0
    a, a_blocks, b, b_blocks = _filtered(
        f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
        own_template, c.template,
    )
    if len(a) < len(b):  # the page is the smaller: every line of it is one of the stored page's
        small_blocks, large_has = a_blocks, np.unique(c.blocks)
    else:
        small_blocks, large_has = b_blocks, np.unique(np.fromiter(f.blocks, np.uint32,
                                                                   len(f.blocks)))
    if not _member(small_blocks, large_has).all():
        return 0.0
    return max(sim, threshold)


def pick_best(
    f: Features,
    title_id: int,
    candidates: Iterable[Candidate],
    own_template: np.ndarray,
    threshold: float,
) -> tuple[int | None, float]:
    """The id of the candidate most similar to the page (title-aware, see the module) and the
    similarity the threshold is applied to."""
    best: Candidate | None = None
    best_sim = 0.0
    page_tiny = tiny(f.sketch, f.shingle_size)
    for c in candidates:
        if page_tiny or tiny(c.sketch, f.shingle_size):
            # only one page's lines plus a run of others (and one title) say "the same page"
            sim = (tiny_insertion(f, own_template, c, threshold)
                   if title_id and c.title == title_id else 0.0)
            if sim > best_sim or (sim == best_sim and best is not None and c.doc < best.doc):
                best, best_sim = c, sim
            continue
        sim, _ = similarity(
            f.sketch, f.sketch_blocks, f.cover, c.sketch, c.blocks, c.cover,
            own_template, c.template,
        )
        if title_id and c.title and c.title != title_id:
            # a different name: only a near-copy counts (mapped below the threshold else)
            sim = sim if sim >= OTHER_TITLE_THRESHOLD else min(sim, threshold * 0.99)
        elif title_id and c.title == title_id:
            if sim < threshold:
                sim = max(sim, insertion(f, own_template, c))
            if sim >= threshold and not keeps_lines(f, own_template, c):
                sim = min(sim, threshold * 0.99)  # similar words, no line in common: a sibling
        if sim > best_sim or (sim == best_sim and best is not None and c.doc < best.doc):
            best, best_sim = c, sim
    return (best.doc if best is not None else None), best_sim


@dataclass(frozen=True, slots=True)
class Outcome:
    """A :class:`Decision` and what the state must record for it."""

    decision: Decision
    action: str  # "empty", "exact", "unchanged" (refetched original), "near", "new"
    original: int | None = None  # id of the original of an exact or near duplicate
    teaches: bool = False  # a near duplicate that still teaches the host's template model


def decide(
    f: Features,
    own: int | None,
    owner: int | None,
    url_of: Callable[[int], str],
    best: Callable[[], tuple[int | None, float]],
    threshold: float,
) -> Outcome:
    """The decision for a page of features ``f``: ``own`` is the id its URL already has,
    ``owner`` the id of the original owning its fingerprint, ``best`` finds the most similar
    candidate (called only when needed)."""
    if not f.words:
        return Outcome(Decision(f.fingerprint, kind="empty"), "empty")
    if owner is not None and owner != own:
        return Outcome(Decision(f.fingerprint, url_of(owner), 1.0, "exact", f.words),
                       "exact", owner)
    if owner is not None:  # refetched, unchanged original
        return Outcome(Decision(f.fingerprint, kind="new", words=f.words), "unchanged")
    doc, sim = best() if len(f.sketch) else (None, 0.0)
    if doc is not None and sim >= threshold:
        decision = Decision(f.fingerprint, url_of(doc), round(sim, 4), "near", f.words)
        return Outcome(decision, "near", doc, sim < TEACHING_SIMILARITY)
    return Outcome(Decision(f.fingerprint, kind="new", words=f.words), "new")
