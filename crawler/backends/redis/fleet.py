"""The crawl beyond one worker's partitions, as that worker sees it in Redis: a worker whose
own partitions are done must not end the crawl while another partition still holds work, and
one back from an outage must hear from every server the crawl uses (on a Redis Cluster the
master that went away may hold only other workers' partitions, whose inboxes it mails).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from crawler.backends.redis.keys import CrawlKeys, PartitionKeys

REPUBLISH = 10.0  # seconds: said again though unchanged (a failover may have lost the last)


class FleetView:
    """What the other partitions hold, read at most once per ``every`` seconds in one
    pipeline; and what this worker's hold, published."""

    def __init__(
        self,
        client: Any,
        crawl_keys: CrawlKeys,
        keys: Callable[[int], PartitionKeys],
        count: int,
        front_queues: int,
        every: float,
    ) -> None:
        self.client = client
        self.crawl_keys = crawl_keys
        self.keys = keys
        self.count = count
        self.front_queues = front_queues
        self.every = every
        self._busy = (float("-inf"), False)  # (when asked, the answer)
        self._said: dict[str, str] = {}
        self._said_at = float("-inf")

    def publish(self, work: Mapping[int, tuple[int, int]]) -> None:
        """Say what each owned partition holds (queued, in flight), when it changed or once
        in ``REPUBLISH`` seconds."""
        said = {str(index): f"{queued} {in_flight}" for index, (queued, in_flight) in work.items()}
        now = time.monotonic()
        if said and (said != self._said or now - self._said_at >= REPUBLISH):
            self.client.hset(self.crawl_keys.partitions, mapping=said)
            self._said, self._said_at = said, now

    def busy(self, owned: Collection[int]) -> bool:
        """Whether a partition not in ``owned`` holds work in Redis, or its owner last said
        so; or letters wait in an owned one's inbox."""
        asked, busy = self._busy
        if time.monotonic() - asked < self.every:
            return busy
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.crawl_keys.partitions)
        for index in range(self.count):
            keys = self.keys(index)
            pipe.xlen(keys.inbox)
            if index not in owned:
                pipe.hlen(keys.out)
                for q in range(self.front_queues):
                    pipe.llen(keys.front(q))
        said, *sizes = pipe.execute()
        busy = any(sizes) or any(
            int(index) not in owned and value.split() != [b"0", b"0"]
            for index, value in said.items()
        )
        self._busy = (time.monotonic(), busy)
        return busy

    def ping(self) -> None:
        """Ask every server the crawl's frontier uses: those of every partition and of the
        crawl's own keys ("back" means all of them answer)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.crawl_keys.partitions)
        for index in range(self.count):
            pipe.exists(self.keys(index).lease)
        pipe.execute()
