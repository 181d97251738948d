"""Per crawl policy counts (``crawler.frontier.policies``), from a crawl's stats: what the end
summary, the HTML report and ``scrapy frontier <site> status`` show operators.

Two stats per policy, kept as the crawl runs: ``policies/pages/<name>`` pages fetched under it
(the site spider counts them) and ``frontier/policy/<name>`` URLs queued under it (the link
intake counts them; ``default``: the site's default policy). Both add up across workers (a
shared crawl's merged totals carry them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PAGES = "policies/pages/"
QUEUED = "frontier/policy/"


@dataclass(frozen=True)
class PolicyCount:
    """One crawl policy's pages fetched and URLs queued."""

    name: str
    pages: int
    queued: int


def policy_counts(stats: Mapping[str, Any]) -> list[PolicyCount]:
    """Every policy the stats name, most pages first ([] when the crawl had none)."""
    pages: dict[str, int] = {}
    queued: dict[str, int] = {}
    for key, value in stats.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if key.startswith(PAGES):
            pages[key[len(PAGES):]] = int(value)
        elif key.startswith(QUEUED):
            queued[key[len(QUEUED):]] = int(value)
    names = set(pages) | set(queued)
    rows = [PolicyCount(n, pages.get(n, 0), queued.get(n, 0)) for n in names]
    return sorted(rows, key=lambda r: (-r.pages, -r.queued, r.name))


def policy_line(stats: Mapping[str, Any]) -> str:
    """``favor 120 pages (3,400 URLs queued), distrust 2 pages (40 URLs queued)``; "" when the
    crawl had no crawl policies."""
    return ", ".join(
        f"{r.name} {r.pages:,} page{'s' if r.pages != 1 else ''} "
        f"({r.queued:,} URL{'s' if r.queued != 1 else ''} queued)"
        for r in policy_counts(stats)
    )
