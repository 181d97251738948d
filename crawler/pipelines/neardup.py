"""Item pipeline: count the near-duplicate verdicts and turn them into host penalties.

The verdict is the content analysis's (:mod:`crawler.content.analysis_neardup`, given on the
content thread before the page's links were queued): the page item arrives with
``content_fingerprint`` (of the normalized main text) and, for a duplicate, ``duplicate_of``
(the original's URL) and ``similarity`` (estimated Jaccard, 1.0 for an exact duplicate), and
carries the verdict itself (``item.verdict``). The item still goes on to the feed exports; the
index pipeline turns a duplicate into an alias of its original instead of a document (unless
``NEARDUP_INDEX_DUPLICATES``). Items without a verdict (a 304, an error page, another spider's
item) pass untouched.

Here each verdict is counted (``neardup/new``, ``/exact``, ``/near``, ``/empty``) and its host's
share of duplicates becomes a priority penalty: a host whose checked pages are at least
``PENALTY_STEPS[0]`` duplicates loses one front queue, at least ``PENALTY_STEPS[1]`` two. Each
change of a host's penalty is announced with ``host_penalty_changed(host, levels)``; the
scheduler's prioritizer applies it.

Settings: ``NEARDUP_ENABLED`` (off: no pipeline, and the content analysis judges nothing),
and the judge's ``HOST_MIN_PAGES`` (crawler/content/neardup_features.py: a host's share counts
from that many pages on).
"""

from __future__ import annotations

from typing import Any, ClassVar

from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from crawler import signals as crawler_signals
from crawler.content.config import NeardupConfig

__all__ = ["NearDuplicatePipeline"]


class NearDuplicatePipeline:
    PENALTY_STEPS: ClassVar[tuple[float, ...]] = (0.5, 0.8)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._penalties: dict[str, int] = {}  # host -> levels last announced (absent: 0)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDuplicatePipeline:
        if not NeardupConfig.from_settings(crawler.settings).enabled:
            raise NotConfigured("NEARDUP_ENABLED is off")
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        verdict = getattr(item, "verdict", None)
        if verdict is None:
            return item
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"neardup/{verdict.kind}")
        levels = self.penalty(verdict.host_duplicates)
        if levels != self._penalties.get(verdict.host, 0):
            self._penalties[verdict.host] = levels
            self.crawler.signals.send_catch_log(
                crawler_signals.host_penalty_changed, host=verdict.host, levels=levels
            )
        return item

    def penalty(self, host_duplicates: float) -> int:
        """How many front queues to push a host's URLs down, for its share of duplicates: 0, 1
        or 2 (mostly duplicates)."""
        return sum(host_duplicates >= step for step in self.PENALTY_STEPS)

    def host_penalty(self, host: str) -> int:
        """The penalty last announced for ``host``."""
        return self._penalties.get(host, 0)
