"""The crawl's scope in Redis: the hosts seeds brought in, shared by every worker."""

from __future__ import annotations

import redis

from crawler.frontier.scope import ScopeRegistry


class RedisScopeRegistry(ScopeRegistry):
    """The crawl's scope hosts in ``{key}:scope``: a seed given to any worker, and the host it
    redirects to, are in scope for all of them."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        """``key``: the scope's SET (``CrawlKeys.scope``)."""
        self.client = client
        self.set = key

    def load(self) -> set[str]:
        return {h.decode() for h in self.client.smembers(self.set)}

    def add(self, host: str) -> None:
        self.client.sadd(self.set, host)  # rare (seeds): one round trip is fine

    def size(self) -> int:
        return int(self.client.scard(self.set))
