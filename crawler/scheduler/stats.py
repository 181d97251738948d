"""What the frontier scheduler counts and says: admissions and rejections by reason (a reason's
first URL logged, the rest only counted), hosts given up, and the frontier's state at close.
Free of Scrapy: it writes to any object with Scrapy's stats collector's ``inc_value`` and
``set_value``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from crawler.frontier import AddResult, Entry, Frontier
from crawler.frontier.buffered import PENDING
from crawler.frontier.politeness import PolitenessPolicy

logger = logging.getLogger(__name__)


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1) -> None: ...
    def set_value(self, key: str, value: Any) -> None: ...


class FrontierStats:
    """The scheduler's ``frontier/*`` stats and log lines. ``over_budget(url, depth)`` hears of
    each URL refused only for its host's page budget (kept for a rerun with a larger one)."""

    def __init__(
        self,
        stats: Stats | None,
        politeness: PolitenessPolicy | None = None,
        over_budget: Callable[[str, int], None] | None = None,
    ) -> None:
        self.stats = stats
        self.politeness = politeness or PolitenessPolicy()  # its give-up rules, for the log
        self.over_budget = over_budget
        self.max_depth = 0
        self._logged_reasons: set[str] = set()

    def inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)

    def set(self, key: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(key, value)

    def rejected(self, reason: str, url: str, seed: bool = False) -> None:
        self.inc(f"frontier/rejected/{reason}")
        if seed:
            logger.warning("Seed %s rejected: %s", url, REASONS.get(reason, reason))
        elif reason not in self._logged_reasons:
            self._logged_reasons.add(reason)
            logger.info(
                "URL %s rejected: %s (further URLs rejected for this reason are counted in "
                "the stat frontier/rejected/%s)",
                url[:300],
                REASONS.get(reason, reason),
                reason,
            )

    def submitted(self, entry: Entry, result: AddResult) -> bool:
        """What ``Frontier.add`` returned for ``entry``; a shared frontier's real answer comes
        later (:meth:`answered`). Returns whether the entry went in (or may have)."""
        if result.reason != PENDING:
            self.answered(entry, result)
        if not result.added:
            return False
        if entry.depth > self.max_depth:
            self.max_depth = entry.depth
        return True

    def answered_many(self, entries: list[Entry], results: list[AddResult]) -> None:
        """A shared frontier's answers to queued adds (the common two counted once a batch:
        a seed batch or a page's links is thousands of answers)."""
        enqueued = seen = 0
        for entry, result in zip(entries, results, strict=True):
            if result.added:
                enqueued += 1
            elif result.reason == "seen":
                seen += 1
            else:
                self.answered(entry, result)
        if enqueued:
            self.inc("frontier/enqueued", enqueued)
        if seen:
            self.inc("frontier/rejected/seen", seen)

    def answered(self, entry: Entry, result: AddResult) -> None:
        """The frontier's answer to one add."""
        if result.added:
            self.inc("frontier/enqueued")
        elif result.reason == "seen":
            self.inc("frontier/rejected/seen")  # the common case: no log line
        else:
            if result.reason == "host_budget" and self.over_budget is not None:
                self.over_budget(entry.url, entry.depth)
            self.rejected(result.reason, entry.url)  # page budget, given-up host: said once

    def host_given_up(self, host: str, reason: str, dropped: int) -> None:
        p = self.politeness
        if reason == "host_dead":
            logger.warning(
                "Giving up host %s after %d failed fetches in a row or %s%% of its last %d "
                "(FRONTIER_HOST_MAX_FAILURES; TUNING's host_failure_ratio); "
                "%d queued URLs dropped",
                host,
                p.max_failures,
                f"{100 * p.max_failure_ratio:g}",
                p.failure_window,
                dropped,
            )
        elif reason == "host_blocked":  # the operator's own act: said once, as a fact
            logger.info("Host %s blocked (scrapy frontier): %d queued URLs dropped", host,
                        dropped)
        else:
            logger.warning(
                "Skipping host %s: its Crawl-delay exceeds FRONTIER_MAX_CRAWL_DELAY (%.0fs); "
                "%d queued URLs dropped",
                host,
                p.max_crawl_delay,
                dropped,
            )
        self.inc(f"frontier/hosts_given_up/{reason}")

    def closing(
        self,
        frontier: Frontier,
        finished: bool,
        horizon: float,
        persistent: bool = False,
        jobdir: str | None = None,
    ) -> None:
        """The frontier's state when the crawl closes (``persistent``: what stays queued is
        kept for the next run, in ``jobdir`` for a frontier on disk). Only a crawl that ended
        by itself has hosts "left behind" (not due within ``horizon``); a stopped one keeps
        them queued (and on disk a full scan of the queue would slow the stop down)."""
        left = frontier.waiting_hosts() if finished and len(frontier) else []
        if left:
            shown = ", ".join(
                f"{r.host} ({r.queued} URLs, {r.reason}, due in {r.due_in:.0f}s)" for r in left[:10]
            )
            logger.warning(
                "Crawl ended with %d URLs of %d hosts not due within %.0fs: %s%s",
                sum(r.queued for r in left),
                len(left),
                horizon,
                shown,
                " ..." if len(left) > 10 else "",
            )
        counts = frontier.counts()
        self.set("frontier/queued_at_close", counts.queued)
        self.set("frontier/hosts", counts.hosts)
        self.set("frontier/seen", counts.seen)
        self.set("frontier/hosts_waiting_at_close", len(left))
        self.set("frontier/depth_max", self.max_depth)
        for why, n in counts.extra.items():
            self.set(f"frontier/dropped/{why}", n)
        if persistent and counts.queued and jobdir:
            logger.info(
                "%d URLs stay queued in %s; run the crawl again with the same JOBDIR to go on",
                counts.queued,
                jobdir,
            )
        elif persistent and counts.queued:  # a shared frontier (Redis) keeps them
            logger.info(
                "%d URLs stay queued in the shared frontier; a worker started with the same "
                "settings goes on with them",
                counts.queued,
            )


REASONS = {
    "host_blocked": "the operator blocked the host (scrapy frontier block)",
    "invalid_url": "malformed URL",
    "scheme": "not an http or https URL",
    "out_of_scope": "host outside the site's scope",
    "too_deep": "deeper than the site's max_depth",
    "too_long": "longer than the maximum URL length",
    "denied": "matches a deny pattern",
    "not_allowed": "matches no allow pattern",
    "repeated_segments": "a path segment repeats too often (spider trap)",
    "query_variants": "too many query variants of one path (URL_MAX_QUERY_VARIANTS)",
    "date_distance": "a date in the path far from today (calendar trap)",
    "domain_hosts": "too many hosts of one registered domain (URL_MAX_HOSTS_PER_DOMAIN)",
    "host_budget": "the host's page budget is used up (max_pages_per_host)",
    "host_dead": "the host was given up after failed fetches",
    "host_skipped": "the host asks for a Crawl-delay over FRONTIER_MAX_CRAWL_DELAY",
    "requisite_denied": "a page requisite matches the site's requisites.deny",
}
