"""An ``apply`` of the partitioned frontier that its guard runs again, Redis having failed it.

:class:`~crawler.frontier.buffered.BufferedFrontier` runs a call that failed on a transient
error (Redis away, a reply lost) again, whole, until it goes through. The partitioned
frontier's ``apply`` changes its partitions' Mercator frontiers in memory (OPIC cash for URLs
seen before, the links added, the leases settled) before it writes them; run again whole, it
would hand a page's cash to its links twice (the crawl's cash grows, the order drifts) and
answer "seen" for the links it added itself. :class:`Run` keeps what the failed run did, so its
run again does only the rest (the writes, the settlements not made yet).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawler.frontier.api import AddResult, Entry, Settlement


@dataclass
class Run:
    """One ``apply``: its arguments, and what of it was done (``credited``: the cash for URLs
    seen before; ``results``: the links' answers, once added; ``rests``: the settlements made,
    in order)."""

    entries: Sequence[Entry]
    settlements: Sequence[Settlement]
    credits: Sequence[tuple[Any, ...]]
    credited: bool = False
    results: list[AddResult] | None = None
    rests: list[float | None] = field(default_factory=list)

    def same(
        self, entries: Sequence[Entry], settlements: Sequence[Settlement],
        credits: Sequence[tuple[Any, ...]],
    ) -> bool:  # fmt: skip
        """Whether a call is this one given again: the same objects (the guard's run again
        rebuilds its list of links, of the same entries). Equal ones are not enough: the same
        page's links found again are new cash."""
        return all(
            len(mine) == len(given) and all(map(operator.is_, mine, given))
            for mine, given in ((self.entries, entries), (self.settlements, settlements),
                                (self.credits, credits))
        )  # fmt: skip

    def add(
        self, credit: Callable[[Sequence[tuple[Any, ...]]], None],
        add_many: Callable[[Sequence[Entry]], list[AddResult]],
    ) -> list[AddResult]:  # fmt: skip
        """The cash (``credit``), then the links (``add_many``), each unless done already."""
        if self.credits and not self.credited:
            credit(self.credits)
            self.credited = True
        if self.results is None:
            self.results = add_many(self.entries) if self.entries else []
        return self.results

    def settle(self, settle: Callable[[Settlement], float | None]) -> list[float | None]:
        """The settlements not made yet, each recorded once made."""
        for s in self.settlements[len(self.rests) :]:
            self.rests.append(settle(s))
        return self.rests


def rerun(
    last: Run | None, entries: Sequence[Entry], settlements: Sequence[Settlement],
    credits: Sequence[tuple[Any, ...]],
) -> Run:  # fmt: skip
    """The record of this call: ``last`` (a call that failed) if this is its run again, else a
    new one (the failed call was given up: what it did here stands, done once)."""
    if last is not None and last.same(entries, settlements, credits):
        return last
    return Run(entries, settlements, credits)
