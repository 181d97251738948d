"""The crawl's scope registry: which hosts the seeds brought in, kept where the frontier is.

Its own module, not the frontier stores': the scheduler owns the scope (it admits links by it)
and every backend keeps it its own way (``crawler.backends.memory``: memory or ``JOBDIR``;
``crawler.backends.redis.scope``: Redis), so the base class belongs to none of them.
"""

from __future__ import annotations

from pathlib import Path


class ScopeRegistry:
    """Hosts that seeds brought into a crawl's scope (their redirect targets included), kept
    where the frontier is kept: nowhere in memory, beside the frontier on disk, in Redis for a
    shared crawl (so every worker accepts the same links)."""

    def load(self) -> set[str]:
        return set()

    def add(self, host: str) -> None:
        """A seed's host joined the scope."""


class FileScopeRegistry(ScopeRegistry):
    """``JOBDIR/scope-hosts.txt``: a resumed crawl does not see its seeds' redirects again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._hosts = self.load()

    def load(self) -> set[str]:
        if not self.path.exists():
            return set()
        return {line.strip() for line in self.path.read_text().splitlines() if line.strip()}

    def add(self, host: str) -> None:
        if host in self._hosts:
            return
        self._hosts.add(host)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(f"{h}\n" for h in sorted(self._hosts)))
        tmp.replace(self.path)
