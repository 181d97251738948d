"""The crawl's scope registry: which hosts the seeds brought in, kept where the frontier is.

Its own module, not the frontier stores': the scheduler owns the scope (it admits links by it)
and every backend keeps it its own way (``crawler.backends.memory``: memory or ``JOBDIR``;
``crawler.backends.redis.inbox``: Redis), so the base class belongs to none of them.
"""

from __future__ import annotations


class ScopeRegistry:
    """Hosts that seeds brought into a crawl's scope (their redirect targets included), kept
    where the frontier is kept: nowhere in memory, beside the frontier on disk, in Redis for a
    shared crawl (so every worker accepts the same links)."""

    def load(self) -> set[str]:
        return set()

    def add(self, host: str) -> None:
        """A seed's host joined the scope."""

    def add_many(self, hosts: set[str]) -> None:
        """Seeds' hosts joined the scope (a batch of a seeds file: one write where it can)."""
        for host in hosts:
            self.add(host)
