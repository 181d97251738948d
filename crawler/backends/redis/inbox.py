"""What other workers and operators put in Redis for every worker of a crawl: seeds pushed to a
running crawl, and hosts other workers brought into scope."""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.outage import ActsAlone
from crawler.frontier.scope import ScopeRegistry

SEED_BATCH = 2000  # seeds one worker takes from the list at a time (queued in bulk)


class RedisScopeRegistry(ScopeRegistry):
    """The crawl's scope hosts in ``{key}:scope``: a seed given to any worker, and the host it
    redirects to, are in scope for all of them.

    ``add`` runs on the reactor thread (a seed is admitted there), so it never waits: while
    Redis is away (a restart, a cluster failover) a new host is kept here, in this worker's
    scope at once, and sent once Redis is back (the outage's probe sends it); other workers
    learn of it then."""

    def __init__(self, client: redis.Redis | RedisCluster, key: str) -> None:
        self.client = client
        self.set = key
        self._unsent: set[str] = set()
        self._lock = threading.Lock()
        self.alone = ActsAlone(
            "crawl's scope",
            lambda: client.exists(key),
            meanwhile="new scope hosts are kept and sent when it is back",
            on_back=self._send_unsent,
        )

    def load(self) -> set[str]:
        hosts = {h.decode() for h in self.client.smembers(self.set)}
        with self._lock:
            return hosts | self._unsent

    def add(self, host: str) -> None:
        self.add_many({host})

    def add_many(self, hosts: set[str]) -> None:
        if hosts and self.alone.call(lambda: self.client.sadd(self.set, *hosts), None) is None:
            with self._lock:
                self._unsent |= hosts

    def _send_unsent(self) -> None:
        with self._lock:
            hosts = set(self._unsent)
        if hosts:
            self.client.sadd(self.set, *hosts)
            with self._lock:
                self._unsent -= hosts

    def close(self) -> None:
        self.alone.close()
        self.client.close()


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
