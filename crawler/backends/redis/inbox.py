"""What other workers and operators put in Redis for every worker of a crawl: seeds pushed to a
running crawl, and hosts other workers brought into scope."""

from __future__ import annotations

from collections.abc import Callable

import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.scope import RedisScopeRegistry

SEED_BATCH = 2000  # seeds one worker takes from the list at a time (queued in bulk)


class SharedInbox:
    """Read on the frontier's worker thread at each housekeeping: seeds pushed to
    ``<site>:start_urls`` (scrapy-redis's key; popped, so each goes to one worker) and hosts
    other workers brought into scope."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        seeds_key: str,
        scope: RedisScopeRegistry,
        *,
        on_seeds: Callable[[list[str]], None] | None,
        on_scope: Callable[[set[str]], None] | None,
    ) -> None:
        self.client = client
        self.seeds_key = seeds_key
        self.scope = scope
        self.on_seeds = on_seeds
        self.on_scope = on_scope
        self._scope_size = -1
        self._cluster = isinstance(client, RedisCluster)

    def poll(self) -> bool:
        """Hand over news; True while seeds are still waiting in the list (work to come).

        One round trip on one Redis. On a cluster the seeds' list may sit on another node:
        the scope is read first, so a node failing between the two never pops seeds that
        then go nowhere."""
        replies = [self.client.scard(self.scope.set)] if self._cluster else []
        pipe = self.client.pipeline(transaction=False)
        if not self._cluster:
            pipe.scard(self.scope.set)
        if self.on_seeds is not None:
            pipe.lpop(self.seeds_key, SEED_BATCH)
            pipe.llen(self.seeds_key)
        replies += pipe.execute()
        if self.on_scope is not None and replies[0] != self._scope_size:
            self._scope_size = replies[0]
            self.on_scope(self.scope.load())
        if self.on_seeds is None:
            return False
        raw, left = replies[1], replies[2]
        if raw:
            urls = [u.decode("utf-8", "replace").strip() for u in raw]
            self.on_seeds([u for u in urls if u])
        return bool(left)
