"""The politeness policy: how long a host's slot rests after each fetch."""

from __future__ import annotations

from dataclasses import dataclass

from crawler import defaults


@dataclass(frozen=True, slots=True)
class PolitenessPolicy:
    """Mercator's adaptive delay, with Heritrix's defaults (the FRONTIER_* settings').

    After a fetch that took ``d`` seconds, the slot rests
    ``min(max(min_delay, delay_factor * d), max_delay)``, and never less than the host's robots.txt
    ``Crawl-delay``: a Crawl-delay above ``max_delay`` is still honoured in full (a host is never
    crawled faster than it asked); one above ``max_crawl_delay`` makes the host skipped instead.
    """

    min_delay: float = defaults.FRONTIER_MIN_DELAY
    delay_factor: float = defaults.FRONTIER_DELAY_FACTOR
    max_delay: float = defaults.FRONTIER_MAX_DELAY
    host_concurrency: int = defaults.FRONTIER_HOST_CONCURRENCY
    max_crawl_delay: float = defaults.FRONTIER_MAX_CRAWL_DELAY
    max_failures: int = defaults.FRONTIER_HOST_MAX_FAILURES

    def __post_init__(self) -> None:
        if self.min_delay < 0 or self.delay_factor < 0:
            raise ValueError("min_delay and delay_factor must be >= 0")
        if self.max_delay < self.min_delay:
            raise ValueError(f"max_delay {self.max_delay} is below min_delay {self.min_delay}")
        if self.host_concurrency < 1:
            raise ValueError("host_concurrency must be >= 1")

    def delay(self, duration: float | None, crawl_delay: float | None = None) -> float:
        wait = self.min_delay
        if duration:
            wait = max(wait, self.delay_factor * duration)
        wait = min(wait, self.max_delay)
        if crawl_delay:
            wait = max(wait, crawl_delay)
        return wait

    def accepts_crawl_delay(self, crawl_delay: float | None) -> bool:
        return crawl_delay is None or crawl_delay <= self.max_crawl_delay
