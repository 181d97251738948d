"""``frontier_store`` of a crawl with a ``JOBDIR``: the embedded frontier with its queues and
seen-set in ``JOBDIR/frontier.sqlite``, so a stopped or killed crawl resumes where it was."""

from __future__ import annotations

import logging
from pathlib import Path

from crawler.backends.memory import MemoryFrontierStore
from crawler.backends.sqlite.frontier import SqliteQueueStore
from crawler.backends.sqlite.scope import FileScopeRegistry
from crawler.frontier import QueueStore
from crawler.frontier.scope import ScopeRegistry

logger = logging.getLogger(__name__)


class SqliteFrontierStore(MemoryFrontierStore):
    """The same frontier kept on disk in ``JOBDIR/frontier.sqlite``: a stopped or killed crawl
    resumes where it was."""

    persistent = True

    def scope(self) -> ScopeRegistry:
        return FileScopeRegistry(Path(self.settings.get("JOBDIR")) / "scope-hosts.txt")

    def queue_store(self, front_queues: int) -> QueueStore:
        jobdir = self.settings.get("JOBDIR")
        if not jobdir:
            raise ValueError("SqliteFrontierStore needs JOBDIR")
        Path(jobdir).mkdir(parents=True, exist_ok=True)
        path = Path(jobdir) / "frontier.sqlite"
        resumed = path.exists()
        store = SqliteQueueStore(path, front_queues)
        if resumed:
            logger.info(
                "Resuming the frontier in %s: %d URLs queued, %d seen",
                path,
                sum(store.front_sizes),
                store.seen_count(),
            )
        return store
