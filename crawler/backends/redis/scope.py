"""The crawl's scope in Redis: the hosts seeds brought in, shared by every worker."""

from __future__ import annotations

import threading

import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.outage import ActsAlone, RedisOutage
from crawler.frontier.scope import ScopeRegistry


class RedisScopeRegistry(ActsAlone, ScopeRegistry):
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
        self.outage = RedisOutage(
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
        if hosts and self._safe(lambda: self.client.sadd(self.set, *hosts), None) is None:
            with self._lock:
                self._unsent |= hosts

    def _send_unsent(self) -> None:
        with self._lock:
            hosts = set(self._unsent)
        if hosts:
            self.client.sadd(self.set, *hosts)
            with self._lock:
                self._unsent -= hosts
