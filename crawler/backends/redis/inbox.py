"""What other workers and operators put in Redis for every worker of a crawl: seeds pushed to a
running crawl, and hosts other workers brought into scope."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from crawler.backends.redis import wire
from crawler.backends.redis.fence import AGAIN, raise_reply_error, watched
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
    ``<site>:start_urls`` (scrapy-redis's key; taken off, so each goes to one worker) and hosts
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

    def poll(self) -> bool:
        """Hand over news; True while seeds are still waiting in the list (work to come).

        The scope is read first: on a cluster the seeds' list may sit on another node, and
        one failing between the two never takes seeds that then go nowhere. Seeds are taken
        off the list's head in a transaction (:func:`_take_seeds`) whose reply, if lost,
        still hands them over: at least once (the frontier's seen-test drops the copies of a
        batch the trim had not taken after all), never lost with the connection."""
        size = self.client.scard(self.scope.set)
        if self.on_scope is not None and size != self._scope_size:
            self._scope_size = size
            self.on_scope(self.scope.load())
        if self.on_seeds is None:
            return False
        taken: list[bytes] = []
        try:
            raw, left = watched(self.client, self.seeds_key, _take_seeds,
                                args=(self.client, self.seeds_key, taken))  # fmt: skip
        except (redis.ConnectionError, redis.TimeoutError):
            self._hand_over(taken)  # (read, and their trim's outcome unknown)
            raise
        except redis.WatchError:  # every try aborted: pushed to, or taken from, meanwhile
            return True  # (seeds wait: the next poll comes soon; nothing was taken)
        self._hand_over(raw)
        return bool(left)

    def _hand_over(self, raw: list[bytes]) -> None:
        if raw and self.on_seeds is not None:
            urls = [u.decode("utf-8", "replace").strip() for u in raw]
            self.on_seeds([u for u in urls if u])


def _take_seeds(
    conn: wire.one_connection, node: Any, client: Any, key: str, taken: list[bytes]
) -> Any:
    """One attempt of :meth:`SharedInbox.poll`'s take (see :func:`~.fence.watched`): the
    first ``SEED_BATCH`` seeds of the list ``key`` read under ``WATCH``, then trimmed off in
    a ``MULTI``/``EXEC`` that another worker's take in between aborts (the attempt goes
    again). Not a ``LPOP``: a pop whose reply is lost has taken its seeds from the list for
    nobody, and redis-py sends it again after a lost connection, taking the next batch.
    ``taken`` holds the seeds read while the trim's outcome is unknown. Returns the seeds
    and how many are left."""
    replies = conn.run([("WATCH", key), ("LRANGE", key, 0, SEED_BATCH - 1), ("LLEN", key)])
    raise_reply_error(client, replies)
    got, size = replies[1], int(replies[2])
    if not got:
        conn.run([("UNWATCH",)])
        return [], 0
    taken[:] = got
    replies = conn.run([("MULTI",), ("LTRIM", key, len(got), -1), ("EXEC",)])
    taken.clear()  # (the trim's outcome known)
    if replies[-1] is None:  # another worker took seeds meanwhile
        return AGAIN
    raise_reply_error(client, replies)  # (nothing trimmed)
    return got, size - len(got)
