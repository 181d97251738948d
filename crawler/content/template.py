"""Each host's template, learned from its own pages: blocks of text that recur on many of them.

Main-text extraction removes what *looks* like chrome (navigation, sidebars, footers), but
generated documentation keeps long shared parts inside the main content: rustdoc's trait
implementations and "Read more" blurbs, javadoc's inherited-method lists, the option, environment
and exit-status sections every page of one command family repeats. Two sibling pages then share
most of their shingles, and a crawl flags distinct pages as near-duplicates of each other.

What is template cannot be told from one page, but it can from the host's pages together: a
block (a line of the main text, normalized) that appears on :data:`MIN_PAGES` or more *distinct*
pages of a host, and on at least :data:`MIN_SHARE` of them, is template, wherever it sits in the
page. Only originals teach the model (a duplicate repeats its original's blocks, which says
nothing about the template). A block once template stays template (the model only grows), so
what was filtered out of a stored sketch never comes back.

Memory is bounded: counts of blocks seen only once are pruned every :data:`PRUNE_EVERY` pages of
a host (a block that has not recurred within that many pages is rare there), and a host keeps at
most :data:`MAX_TEMPLATE` template blocks. The counts are three parallel numpy arrays per host
(block hash, count, "seen once at the last pruning"), 7 bytes a block: as a dict of Python ints
(with a set for the stale ones) they took ~100 bytes a block, ~5 KB per page of real
documentation, the biggest part of the detector's state.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MIN_PAGES", "MIN_SHARE", "HostTemplates"]

Host = Hashable  # a host's name (a worker of the shared detector: its id in Redis)

MIN_PAGES = 3  # a block on this many distinct pages of a host can be template ...
MIN_SHARE = 0.02  # ... if it is also on this share of the host's pages
PRUNE_EVERY = 48  # pages of a host between two prunings of its one-off blocks
MAX_TEMPLATE = 20_000  # template blocks kept per host


@dataclass(slots=True)
class _Host:
    pages: int = 0
    keys: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint32))  # sorted blocks
    counts: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint16))
    stale: np.ndarray = field(default_factory=lambda: np.empty(0, bool))  # once, last pruning
    template: set[int] = field(default_factory=set)


class HostTemplates:
    """Per-host counts of block hashes and the template blocks they reveal."""

    def __init__(self, min_pages: int = MIN_PAGES, min_share: float = MIN_SHARE) -> None:
        self.min_pages = min_pages
        self.min_share = min_share
        self._hosts: dict[Host, _Host] = {}
        self._empty: frozenset[int] = frozenset()
        self.journal: list[tuple[Host, int]] = []  # (host, block) made template since drained

    def template(self, host: Host) -> set[int] | frozenset[int]:
        """The template blocks of ``host`` (a live set: do not modify)."""
        state = self._hosts.get(host)
        return state.template if state is not None else self._empty

    def pages(self, host: Host) -> int:
        state = self._hosts.get(host)
        return state.pages if state is not None else 0

    def counted(self, host: Host) -> int:
        """Blocks of ``host`` being counted (not template yet, not pruned)."""
        state = self._hosts.get(host)
        return len(state.keys) if state is not None else 0

    def learn(self, host: Host, blocks: Iterable[int]) -> list[int]:
        """Count the distinct ``blocks`` of one more original page of ``host``; returns the
        blocks this page made template (in the order they were added)."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        state.pages += 1
        need = max(self.min_pages, int(self.min_share * state.pages))
        template = state.template
        fresh = np.unique(
            np.fromiter((b for b in blocks if b not in template) if template else blocks, np.uint32)
        )
        keys, counts = state.keys, state.counts
        at = np.searchsorted(keys, fresh)
        known = at < len(keys)
        known[known] = keys[at[known]] == fresh[known]
        hits = at[known]
        if len(hits):
            counts[hits] = np.minimum(counts[hits].astype(np.int64) + 1, 0xFFFF)
        promote = hits[counts[hits] >= need] if len(hits) else hits
        new = fresh[~known]
        if need <= 1 and len(new):  # every block is template at once (min_pages 1)
            promote_new, new = new, new[:0]
        else:
            promote_new = new[:0]
        if len(new):
            where = np.searchsorted(keys, new)
            keys = np.insert(keys, where, new)
            counts = np.insert(counts, where, np.ones(len(new), np.uint16))
            state.stale = np.insert(state.stale, where, np.zeros(len(new), bool))
            if len(promote):  # positions moved by the insertions
                promote = np.searchsorted(keys, state.keys[promote])
        state.keys, state.counts = keys, counts
        promoted = [*state.keys[promote].tolist(), *promote_new.tolist()]
        room = MAX_TEMPLATE - len(template)
        made: list[int] = []
        if promoted and room > 0:
            made = promoted[:room]
            template.update(made)
            self.journal.extend((host, block) for block in made)
            gone = np.isin(state.keys, np.array(made, np.uint32), assume_unique=True)
            self._keep(state, ~gone)
        if state.pages % PRUNE_EVERY == 0:
            ones = state.counts == 1
            self._keep(state, ~(ones & state.stale))
            state.stale = state.counts == 1
        return made

    @staticmethod
    def _keep(state: _Host, keep: np.ndarray) -> None:
        state.keys = state.keys[keep]
        state.counts = state.counts[keep]
        state.stale = state.stale[keep]

    # --- a copy of a host's model kept elsewhere (the shared detector's workers) ---------------

    def checkpoint(self, host: Host) -> tuple[int, np.ndarray, np.ndarray, np.ndarray] | None:
        """What :meth:`rollback` needs to undo the next :meth:`learn` of ``host``."""
        state = self._hosts.get(host)
        if state is None:
            return None
        # learn() replaces keys and stale but counts its hits in place: copy the counts only
        return state.pages, state.keys, state.counts.copy(), state.stale

    def rollback(
        self,
        host: Host,
        saved: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None,
        made: Iterable[int],
    ) -> None:
        """Undo one :meth:`learn` of ``host`` (``saved`` from :meth:`checkpoint` just before
        it, ``made`` what it returned)."""
        if saved is None:
            self._hosts.pop(host, None)
            return
        state = self._hosts[host]
        state.pages, state.keys, state.counts, state.stale = saved
        state.template.difference_update(made)

    def counts(self, host: Host) -> tuple[int, np.ndarray, np.ndarray]:
        """(pages, blocks counted, their counts) of ``host``: right after a pruning (pages a
        multiple of :data:`PRUNE_EVERY`) this and the template are the whole model, since the
        blocks seen once are then exactly those marked stale."""
        state = self._hosts.get(host)
        if state is None:
            return 0, np.empty(0, np.uint32), np.empty(0, np.uint16)
        return state.pages, state.keys, state.counts

    def load(
        self,
        host: Host,
        pages: int,
        keys: np.ndarray,
        counts: np.ndarray,
        template: Iterable[int],
    ) -> None:
        """Set ``host``'s model to what :meth:`counts` gave right after a pruning, with its
        template blocks."""
        keys = np.asarray(keys, np.uint32)
        counts = np.asarray(counts, np.uint16)
        self._hosts[host] = _Host(pages, keys, counts, counts == 1, set(template))

    def forget(self, host: Host) -> None:
        """Drop ``host``'s model."""
        self._hosts.pop(host, None)

    def add_template(self, host: Host, *blocks: int) -> None:
        """Restore template blocks (from a saved journal, or a copy of the model kept
        elsewhere)."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        state.template.update(blocks)

    def uncount_template(self, host: Host) -> None:
        """Stop counting ``host``'s blocks that are template: a copy kept elsewhere, given its
        template before its model caught up, counted them where the model learned page by page
        dropped each as it became template."""
        state = self._hosts.get(host)
        if state is not None and state.template and len(state.keys):
            template = np.fromiter(state.template, np.uint32, len(state.template))
            self._keep(state, ~np.isin(state.keys, template))

    def seed(self, host: Host, pages: int, template: Iterable[int]) -> None:
        """Start ``host`` with a model learned elsewhere (a benchmark's warm start), or with its
        template alone (a copy about to replay the model's log from its first page)."""
        self._hosts[host] = _Host(pages=pages, template=set(template))

    def set_pages(self, host: Host, pages: int) -> None:
        """Restore a host's page count (from a saved journal)."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        state.pages = max(state.pages, pages)
