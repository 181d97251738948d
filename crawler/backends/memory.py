"""Frontier stores: the ``FRONTIER_STORE_CLASS`` choices, each a factory of one frontier backend.

The scheduler adapter asks the configured store for a frontier and never knows which backend it
got. A store reads its own settings (``from_crawler``) and builds the Scrapy-free frontier core;
``persistent`` tells the adapter that queued requests must be serialized, not kept as objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy.settings import BaseSettings

from crawler.backends.sqlite.frontier import SqliteQueueStore
from crawler.config import defaults
from crawler.frontier import (
    Frontier,
    MemoryQueueStore,
    MercatorFrontier,
    QueueStore,
)
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.scope import FileScopeRegistry, ScopeRegistry

logger = logging.getLogger(__name__)

GiveUpCallback = Callable[[str, str, int], None]


@dataclass
class FrontierCallbacks:
    """What a frontier tells the scheduler. An embedded frontier calls ``on_give_up`` only; a
    shared one also says that leases are ready (``notify``), answers queued adds
    (``on_added``), hands over seeds pushed from outside (``on_seeds``) and hosts other workers
    brought into scope (``on_scope``), all on the scheduler's thread."""

    on_give_up: GiveUpCallback | None = None
    notify: Callable[[], None] | None = None
    on_added: Callable[..., None] | None = None
    on_completed: Callable[[str, float | None], None] | None = None  # see Frontier.completes_later
    on_seeds: Callable[[list[str]], None] | None = None
    on_scope: Callable[[set[str]], None] | None = None


class MemoryFrontierStore:
    """The embedded default: the Mercator frontier in this process's memory."""

    persistent = False

    def __init__(self, settings: BaseSettings) -> None:
        self.settings = settings

    @classmethod
    def from_crawler(cls, crawler: Any) -> MemoryFrontierStore:
        return cls(crawler.settings)

    def queue_store(self, front_queues: int) -> QueueStore:
        return MemoryQueueStore(front_queues)

    def scope(self) -> ScopeRegistry:
        return ScopeRegistry()

    def open_frontier(
        self,
        *,
        lease_ttl: float = defaults.FRONTIER_LEASE_TTL,
        max_pages_per_host: int | None = None,
        callbacks: FrontierCallbacks | None = None,
    ) -> Frontier:
        s = self.settings
        front = s.getint("FRONTIER_FRONT_QUEUES", defaults.FRONTIER_FRONT_QUEUES)
        return MercatorFrontier(
            politeness_from_settings(s),
            store=self.queue_store(front),
            lease_ttl=lease_ttl,
            front_queues=front,
            back_queues=s.getint("FRONTIER_BACK_QUEUES", defaults.FRONTIER_BACK_QUEUES)
            or 3 * s.getint("CONCURRENT_REQUESTS", 16),
            max_pages_per_host=max_pages_per_host,
            refill_batch=s.getint("FRONTIER_REFILL_BATCH", defaults.FRONTIER_REFILL_BATCH),
            on_give_up=(callbacks or FrontierCallbacks()).on_give_up,
        )


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
        store = SqliteQueueStore(
            path,
            front_queues,
            commit_interval=self.settings.getfloat(
                "FRONTIER_COMMIT_INTERVAL", defaults.FRONTIER_COMMIT_INTERVAL
            ),
        )
        if resumed:
            logger.info(
                "Resuming the frontier in %s: %d URLs queued, %d seen",
                path,
                sum(store.front_sizes),
                store.seen_count(),
            )
        return store
