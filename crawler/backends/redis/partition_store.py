"""``FRONTIER_STORE_CLASS`` of a crawl whose workers own partitions of its hosts in Redis.

Wires :class:`~crawler.backends.redis.partitioned.PartitionedFrontier`: the one Mercator
frontier per owned partition (built as the embedded backend builds it, over a
:class:`~crawler.backends.redis.queue_store.RedisQueueStore`), each partition's seen-set
(:mod:`crawler.backends.redis.seenset`), served to the reactor by a
:class:`~crawler.frontier.buffered.BufferedFrontier` so no Redis round trip runs on the
reactor thread.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from crawler.backends.redis.connection import redis_client, safe_url
from crawler.backends.redis.frontier_store import RedisFrontierStore, _from_thread, _log_redis_error
from crawler.backends.redis.inbox import SharedInbox
from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.outage import TRANSIENT
from crawler.backends.redis.partitioned import PartitionedFrontier
from crawler.backends.redis.queue_store import RedisQueueStore
from crawler.backends.redis.scope import RedisScopeRegistry
from crawler.backends.redis.seenset import OwnerSeenSet, SeenSetConfig, has_bloom_module
from crawler.config import defaults
from crawler.frontier import Frontier
from crawler.frontier.api import FrontierCallbacks
from crawler.frontier.buffered import BufferedFrontier
from crawler.report.worker import worker_id

logger = logging.getLogger(__name__)

# How long a partition stays a dead worker's: its owner renews the lease every BEAT second, so
# a worker must stall this long to lose it, and a killed worker's hosts wait this long.
PARTITION_TTL = 10.0
PARTITIONS = 16  # partitions of a crawl's hosts: at most this many workers share its work


class PartitionedFrontierStore(RedisFrontierStore):
    """See the module docstring."""

    @property
    def partition_count(self) -> int:
        return PARTITIONS

    def partitioned_frontier(
        self,
        client: Any,
        *,
        lease_ttl: float,
        max_pages_per_host: int | None,
        on_give_up: Any = None,
        clock: Any = None,
    ) -> PartitionedFrontier:
        s = self.settings
        count = self.partition_count
        front = s.getint("FRONTIER_FRONT_QUEUES", defaults.FRONTIER_FRONT_QUEUES)
        # Mercator's B (3 x fetches in flight) for a worker, shared out: a worker holds about
        # count / workers partitions; twice its share each keeps the back queues full
        worker_b = s.getint("FRONTIER_BACK_QUEUES", defaults.FRONTIER_BACK_QUEUES) or 3 * s.getint(
            "CONCURRENT_REQUESTS", 16
        )
        back_queues = max(8, math.ceil(2 * worker_b / count))
        limit = s.getint("FRONTIER_SEEN_EXACT_LIMIT", defaults.FRONTIER_SEEN_EXACT_LIMIT)
        config = SeenSetConfig(
            capacity=max(1, limit // count),
            error=s.getfloat("FRONTIER_SEEN_ERROR", defaults.FRONTIER_SEEN_ERROR),
            bloom=has_bloom_module(client),
        )

        def build(store: RedisQueueStore) -> Any:
            return self.mercator(
                store,
                lease_ttl=lease_ttl,
                max_pages_per_host=max_pages_per_host,
                on_give_up=on_give_up,
                back_queues=back_queues,
                clock=clock,
            )

        def seen(keys: PartitionKeys) -> OwnerSeenSet:
            return OwnerSeenSet(client, keys, config)

        extra = {} if clock is None else {"clock": clock}
        return PartitionedFrontier(
            client,
            self.key,
            count,
            worker_id(s.get("JOBDIR"), s.get("RECORD_WORKER_ID")),
            build=build,
            seen=seen,
            front_queues=front,
            lease_ttl=lease_ttl,
            partition_ttl=PARTITION_TTL,
            **extra,
        )

    def open_frontier(
        self,
        *,
        lease_ttl: float = defaults.FRONTIER_LEASE_TTL,
        max_pages_per_host: int | None = None,
        callbacks: FrontierCallbacks | None = None,
    ) -> Frontier:
        cb = callbacks or FrontierCallbacks()
        client = redis_client(self.settings)
        inner = self.partitioned_frontier(
            client,
            lease_ttl=lease_ttl,
            max_pages_per_host=max_pages_per_host,
            on_give_up=_from_thread(cb.on_give_up),
        )
        inbox = SharedInbox(
            client,
            self.keys.seeds,
            RedisScopeRegistry(client, self.keys.scope),
            on_seeds=_from_thread(cb.on_seeds),
            on_scope=_from_thread(cb.on_scope),
        )
        logger.info(
            "Frontier: Redis at %s, crawl %r in %d partitions, %d owned by this worker",
            safe_url(self.settings),
            self.key,
            self.partition_count,
            len(inner.parts),
        )
        s = self.settings
        return BufferedFrontier(
            inner,
            read_ahead=s.getint("FRONTIER_READ_AHEAD", defaults.FRONTIER_READ_AHEAD),
            refresh=min(1.0, s.getfloat(
                "FRONTIER_REFRESH_INTERVAL", defaults.FRONTIER_REFRESH_INTERVAL
            )),
            max_wait=s.getfloat("FRONTIER_LEASE_MAX_WAIT", defaults.FRONTIER_LEASE_MAX_WAIT),
            notify=_from_thread(cb.notify),
            on_added=_from_thread(cb.on_added),
            on_completed=_from_thread(cb.on_completed),
            on_error=_from_thread(_log_redis_error),
            poll=inbox.poll,
            transient=TRANSIENT,
            linger=s.getfloat("FRONTIER_BATCH_LINGER", defaults.FRONTIER_BATCH_LINGER),
        )
