"""A worker's own memory in a broad crawl: what grows in a worker (not in the shared frontier)
as it meets new hosts and paths, and what stays bounded.

Drives the scheduler's real admission and link intake (an open scope, OPIC, the default trap
budgets) with pages of 50 links to hosts of distinct registered domains (nearly every link a new
host and a new path with a query), into a frontier that keeps nothing (as a Redis frontier
keeps nothing in the worker); then the robots.txt book with a parsed copy per origin. Reports
Python heap growth (tracemalloc) per link and per origin, step by step, and the sizes of the
structures that hold it.

    .venv/bin/python bench/worker_memory.py [--steps 8] [--origins 30000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.config import defaults
from crawler.config.tuning import knob_default
from crawler.frontier import Prioritizer, UrlPolicy
from crawler.frontier.api import AddResult
from crawler.frontier.scope import ScopeRegistry
from crawler.robots.book import RobotsBook
from crawler.robots.cache import MemoryRobotsCache
from crawler.robots.rules import RULES, RobotsRecord
from crawler.scheduler.admission import Admission
from crawler.scheduler.intake import LinkIntake
from crawler.scheduler.stats import FrontierStats
from tests.test_scheduler_intake import Stats

ROBOTS = "\n".join(
    ["User-agent: *", *(f"Disallow: /private{i}/" for i in range(30)), "Allow: /public/",
     "Crawl-delay: 2", "Sitemap: https://x.example.org/sitemap.xml", "",
     "User-agent: Googlebot", "Disallow: /nogoogle/", ""]
)  # fmt: skip


class KeepsNothing:
    """A frontier whose state lives elsewhere (Redis): accepts everything, keeps nothing."""

    def add_many(self, entries: list[Any]) -> list[AddResult]:
        return [AddResult(True)] * len(entries)

    def credit(self, credits: Any) -> None:
        pass

    def ack(self, token: str) -> None:
        pass


def intake_growth(steps: int, pages: int) -> None:
    policy = UrlPolicy(
        any_host=True,
        max_query_variants=defaults.URL_MAX_QUERY_VARIANTS,
        max_hosts_per_domain=defaults.URL_MAX_HOSTS_PER_DOMAIN,
    )
    admission = Admission(
        policy, Prioritizer("opic", 8), ScopeRegistry(), lambda o, h: None,
        discovering=lambda origins: None,
    )  # fmt: skip
    intake = LinkIntake(admission, KeepsNothing(), FrontierStats(Stats()),  # type: ignore[arg-type]
                        slice_size=10**9, cache_size=100_000)  # fmt: skip
    rnd = random.Random(1)
    print("| links taken | heap growth per link (B) | origins announced | hosts in the budget "
          "| paths in the variant budget |")  # fmt: skip
    print("|--:|--:|--:|--:|--:|")
    taken = 0
    tracemalloc.start()
    for _ in range(steps):
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(pages):
            links = [
                f"https://www.site{rnd.randrange(10**7)}.com/docs/p{rnd.randrange(10**9)}.html"
                f"?q={rnd.randrange(100)}"
                for _ in range(50)
            ]
            intake.take(links, 1, None, None, cash=1.0, page="https://a.example.com/")
        taken += 50 * pages
        grown = tracemalloc.get_traced_memory()[0] - before
        print(f"| {taken:,} | {grown / (50 * pages):,.0f} | {len(admission._origins):,} "
              f"| {len(policy._known_hosts):,} | {len(policy._variants):,} |")  # fmt: skip
    tracemalloc.stop()


def robots_growth(origins: int, bound: int) -> None:
    cache = MemoryRobotsCache()
    names = [f"https://host{i}.example.org" for i in range(origins)]
    for o in names:
        cache.put(RobotsRecord(o, RULES, 200, 0, 1e12, ROBOTS))
    for label, size in (("unbounded", 0), (f"robots_book_size={bound:,}", bound)):
        book = RobotsBook(cache, "mybot", max_origins=size)
        tracemalloc.start()
        for o in names:
            book.verdict(o, o + "/page.html")
        grown = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(f"| {label} | {origins:,} | {len(book.states()):,} | {grown / 2**20:,.1f} MiB "
              f"| {grown / origins:,.0f} B |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--pages", type=int, default=4000, help="pages of 50 links per step")
    parser.add_argument("--origins", type=int, default=30000)
    args = parser.parse_args()
    intake_growth(args.steps, args.pages)
    print("\n| robots.txt book | origins met | kept parsed | heap | per origin met |")
    print("|---|--:|--:|--:|--:|")
    robots_growth(args.origins, knob_default("robots_book_size"))


if __name__ == "__main__":
    main()
