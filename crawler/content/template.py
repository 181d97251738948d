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
most :data:`MAX_TEMPLATE` template blocks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["MIN_PAGES", "MIN_SHARE", "HostTemplates"]

MIN_PAGES = 3  # a block on this many distinct pages of a host can be template ...
MIN_SHARE = 0.02  # ... if it is also on this share of the host's pages
PRUNE_EVERY = 48  # pages of a host between two prunings of its one-off blocks
MAX_TEMPLATE = 20_000  # template blocks kept per host


@dataclass(slots=True)
class _Host:
    pages: int = 0
    counts: dict[int, int] = field(default_factory=dict)
    stale: set[int] = field(default_factory=set)  # seen once at the last pruning
    template: set[int] = field(default_factory=set)


class HostTemplates:
    """Per-host counts of block hashes and the template blocks they reveal."""

    def __init__(self, min_pages: int = MIN_PAGES, min_share: float = MIN_SHARE) -> None:
        self.min_pages = min_pages
        self.min_share = min_share
        self._hosts: dict[str, _Host] = {}
        self._empty: frozenset[int] = frozenset()
        self.journal: list[tuple[str, int]] = []  # (host, block) made template since drained

    def template(self, host: str) -> set[int] | frozenset[int]:
        """The template blocks of ``host`` (a live set: do not modify)."""
        state = self._hosts.get(host)
        return state.template if state is not None else self._empty

    def pages(self, host: str) -> int:
        state = self._hosts.get(host)
        return state.pages if state is not None else 0

    def learn(self, host: str, blocks: Iterable[int]) -> None:
        """Count the distinct ``blocks`` of one more original page of ``host``."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        state.pages += 1
        need = max(self.min_pages, int(self.min_share * state.pages))
        counts, template = state.counts, state.template
        for block in set(blocks):
            if block in template:
                continue
            n = counts.get(block, 0) + 1
            if n >= need and len(template) < MAX_TEMPLATE:
                template.add(block)
                counts.pop(block, None)
                self.journal.append((host, block))
            else:
                counts[block] = n
        if state.pages % PRUNE_EVERY == 0:
            ones = {b for b, n in counts.items() if n == 1}
            for block in ones & state.stale:
                del counts[block]
            state.stale = ones - state.stale

    def add_template(self, host: str, block: int) -> None:
        """Restore one template block (from a saved journal)."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        state.template.add(block)

    def seed(self, host: str, pages: int, template: Iterable[int]) -> None:
        """Start ``host`` with a model learned elsewhere (a benchmark's warm start)."""
        self._hosts[host] = _Host(pages=pages, template=set(template))

    def set_pages(self, host: str, pages: int) -> None:
        """Restore a host's page count (from a saved journal)."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        state.pages = max(state.pages, pages)
