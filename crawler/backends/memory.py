"""The embedded default engine: the frontier in this process's memory (``frontier_store``
of the ``memory`` backend; a factory the scheduler asks for its frontier).

The scheduler adapter asks the configured store for a frontier and never knows which backend it
got. A store reads its settings once (``from_crawler``: a
:class:`~crawler.frontier.config.FrontierConfig` and the politeness policy) and builds the
Scrapy-free frontier core;
``persistent`` tells the adapter that queued requests must be serialized, not kept as objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from crawler.frontier import (
    Frontier,
    MemoryQueueStore,
    MercatorFrontier,
    QueueStore,
)
from crawler.frontier.api import Clock, FrontierCallbacks
from crawler.frontier.config import FrontierConfig
from crawler.frontier.mercator import BACK_RUN, FRONT_QUEUES
from crawler.frontier.opic import CashLedger, selector_weights
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.scope import ScopeRegistry

logger = logging.getLogger(__name__)

class MemoryFrontierStore:
    """The embedded default: the Mercator frontier in this process's memory."""

    persistent = False
    # other workers may fill it: a worker that finds it empty waits for them (TUNING join_wait)
    shared = False
    config_class: type[FrontierConfig] = FrontierConfig

    def __init__(self, settings: Any) -> None:  # Scrapy's Settings, or any object with its getters
        self.settings = settings
        self.config = self.config_class.from_settings(settings)
        self.politeness = politeness_from_settings(settings)

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
        lease_ttl: float | None = None,
        max_pages_per_host: int | None = None,
        callbacks: FrontierCallbacks | None = None,
    ) -> Frontier:
        return self.mercator(
            self.queue_store(FRONT_QUEUES),
            lease_ttl=lease_ttl or self.config.lease_ttl,
            max_pages_per_host=max_pages_per_host,
            on_give_up=(callbacks or FrontierCallbacks()).on_give_up,
            back_queues=self.back_queues,
        )

    @property
    def back_queues(self) -> int:
        """Mercator's rule of thumb: three back queues per fetch in flight."""
        return 3 * int(self.settings.getint("CONCURRENT_REQUESTS", 16))

    def mercator(
        self,
        store: QueueStore,
        *,
        lease_ttl: float,
        max_pages_per_host: int | None,
        on_give_up: Callable[[str, str, int], None] | None,
        back_queues: int,
        clock: Clock | None = None,
    ) -> MercatorFrontier:
        """The one Mercator frontier, over ``store``, as the crawl's settings shape it."""
        front = len(store.front_sizes)
        order = self.config.priority_policy
        opic = order == "opic"
        return MercatorFrontier(
            self.politeness,
            store=store,
            clock=clock,
            lease_ttl=lease_ttl,
            front_queues=front,
            back_queues=back_queues,
            max_pages_per_host=max_pages_per_host,
            on_give_up=on_give_up,
            ledger=CashLedger(front) if opic else None,  # OPIC: the ledger of cash
            selector_weights=selector_weights(front) if opic else None,
            back_run=0 if order == "fifo" else BACK_RUN,
        )
