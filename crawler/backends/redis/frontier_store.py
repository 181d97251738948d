"""``FRONTIER_STORE_CLASS`` of the ``redis`` backend: several ``scrapy crawl`` workers, one
polite crawl.

``FRONTIER_BACKEND=redis`` with ``REDIS_URL`` (and ``REDIS_PARAMS``, as in scrapy-redis) makes
every process a worker of one crawl. This module wires what they share (every key named by
:class:`crawler.backends.redis.keys.CrawlKeys`, under one hash tag ``{<site>}``;
``FRONTIER_REDIS_KEY`` overrides the site name): the frontier
(:class:`crawler.backends.redis.frontier.RedisFrontier`), served to the reactor by a
:class:`crawler.frontier.buffered.BufferedFrontier` so no Redis round trip ever runs on the
reactor thread while the crawl runs; the scope (:mod:`crawler.backends.redis.scope`); and the
seeds pushed while the crawl runs (:mod:`crawler.backends.redis.inbox`). It also refuses, before
a crawl starts, a Redis or settings that cannot work.

State stays after the crawl, like scrapy-redis's ``SCHEDULER_PERSIST``: running a finished
crawl again fetches only what is queued or due; ``FRONTIER_RESET=True`` starts it afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from scrapy.settings import BaseSettings

from crawler.backends.memory import MemoryFrontierStore
from crawler.backends.redis.calls import script_runner
from crawler.backends.redis.connection import redis_client, safe_url
from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.inbox import SharedInbox
from crawler.backends.redis.keys import CrawlKeys, crawl_key
from crawler.backends.redis.outage import TRANSIENT
from crawler.backends.redis.scope import RedisScopeRegistry
from crawler.backends.redis.seen import SeenConfig
from crawler.backends.redis.sharded import ShardedFrontier
from crawler.config import defaults
from crawler.frontier import Frontier
from crawler.frontier.api import FrontierCallbacks
from crawler.frontier.buffered import BufferedFrontier
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.scope import ScopeRegistry
from crawler.report.worker import worker_id

logger = logging.getLogger(__name__)

# B for a shared crawl when FRONTIER_BACK_QUEUES is 0: Mercator's 3 x fetches in flight, for up
# to about 20 workers of 16 concurrent requests. Every worker must use the same B.
SHARED_BACK_QUEUES = 1024


def _from_thread(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """A callback the frontier's worker thread may call: it runs on the reactor thread."""
    if fn is None:
        return None
    from twisted.internet import reactor  # the one Scrapy installed, imported once it runs

    return lambda *args: reactor.callFromThread(fn, *args)  # type: ignore[attr-defined]


class RedisFrontierStore(MemoryFrontierStore):
    """``FRONTIER_STORE_CLASS`` of the ``redis`` backend."""

    persistent = True  # queued requests travel as msgpack through Redis
    shared = True

    def __init__(self, settings: BaseSettings, site: str) -> None:
        super().__init__(settings)
        self.site = site
        self.key = crawl_key(settings, site)

    @property
    def keys(self) -> CrawlKeys:
        return CrawlKeys(self.key, self.site, self.shard_count)

    @property
    def shard_count(self) -> int:
        return self.settings.getint("FRONTIER_SHARDS", defaults.FRONTIER_SHARDS)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisFrontierStore:
        return cls(crawler.settings, getattr(crawler.spidercls, "name", None) or "crawl")

    @classmethod
    def preflight(cls, crawler: Any) -> list[str]:
        """Refuse a crawl that cannot work: Redis unreachable, a policy that may evict the
        frontier, another layout, or politeness settings that differ from the crawl's."""
        return cls.from_crawler(crawler).check()

    def scope(self) -> ScopeRegistry:
        return RedisScopeRegistry(redis_client(self.settings), self.keys.scope)

    def check(self) -> list[str]:
        problems = self.check_server()
        if problems and "not reachable" in problems[0]:
            return problems
        if self.settings.getbool("FRONTIER_RESET"):
            return problems  # the stored crawl goes: nothing to compare with
        client = redis_client(self.settings)
        try:
            frontier = self._redis_frontier(
                client, lease_ttl=defaults.FRONTIER_LEASE_TTL, max_pages_per_host=None
            )
        except RuntimeError as exc:  # another layout
            return [*problems, str(exc)]
        mismatches = frontier.check_compatible(self.scope_fingerprint())
        problems += [f"crawl {self.key!r} was started with other settings: {m}" for m in mismatches]
        return problems

    def check_server(self) -> list[str]:
        """Redis unreachable, or a policy that may evict the frontier."""
        where = safe_url(self.settings)
        try:
            client = redis_client(self.settings)
            client.ping()
        except (redis.RedisError, OSError, ValueError) as exc:
            return [f"Redis at {where} is not reachable: {exc}"]
        problems = []
        try:
            reply = client.config_get("maxmemory-policy")
            policy = next(iter(reply.values()), b"") if reply else b""
            policy = policy.decode() if isinstance(policy, bytes) else str(policy)
        except redis.ResponseError:
            policy = None  # CONFIG is disabled (a managed Redis): the operator's word counts
        if policy is not None and policy != "noeviction":
            problems.append(
                f"Redis at {where} has maxmemory-policy {policy or '?'}: eviction would "
                "silently drop queued URLs; set it to noeviction"
            )
        return problems

    def scope_fingerprint(self) -> dict[str, str]:
        """What every worker's URL scope must agree on besides politeness."""
        s = self.settings
        return {
            "max_url_length": str(s.getint("URL_MAX_LENGTH", defaults.URL_MAX_LENGTH)),
            "max_repeated_segments": str(s.getint(
                "URL_MAX_REPEATED_SEGMENTS", defaults.URL_MAX_REPEATED_SEGMENTS
            )),
            "priority_policy": str(s.get(
                "FRONTIER_PRIORITY_POLICY", defaults.FRONTIER_PRIORITY_POLICY
            )),
            "seen_bloom": str(self._seen().bloom),
            "seen": self._seen().fingerprint(),
        }

    def _seen(self) -> SeenConfig:
        """Each shard's seen-set (``FRONTIER_SEEN_*``): exact up to FRONTIER_SEEN_EXACT_LIMIT
        URLs, then a scalable Bloom filter; or the deprecated fixed filter
        (``FRONTIER_SEEN_BLOOM_CAPACITY``, shared out over the shards)."""
        return SeenConfig.from_settings(self.settings, self.shard_count)

    def _redis_frontier(
        self,
        client: redis.Redis,
        *,
        lease_ttl: float,
        max_pages_per_host: int | None,
        on_give_up: Callable[[str, str, int], None] | None = None,
    ) -> RedisFrontier | ShardedFrontier:
        """The crawl's frontier: one :class:`RedisFrontier` per shard (``FRONTIER_SHARDS``),
        several served as one by a :class:`ShardedFrontier`."""
        s = self.settings
        runner = script_runner(
            client,
            replica_wait=(
                s.getint("FRONTIER_REPLICA_WAIT", defaults.FRONTIER_REPLICA_WAIT),
                s.getfloat(
                    "FRONTIER_REPLICA_WAIT_TIMEOUT", defaults.FRONTIER_REPLICA_WAIT_TIMEOUT
                ),
            ),
            patience=s.getfloat("FRONTIER_SHARD_PATIENCE", defaults.FRONTIER_SHARD_PATIENCE),
        )
        count = self.shard_count
        order = s.get("FRONTIER_PRIORITY_POLICY", defaults.FRONTIER_PRIORITY_POLICY)
        # Mercator's B is the crawl's (3 x fetches in flight): each shard holds its share
        back_queues = -(
            -(s.getint("FRONTIER_BACK_QUEUES", defaults.FRONTIER_BACK_QUEUES) or SHARED_BACK_QUEUES)
            // count
        )
        shards = [
            RedisFrontier(
                client,
                self.key,
                politeness_from_settings(s),
                front_queues=s.getint("FRONTIER_FRONT_QUEUES", defaults.FRONTIER_FRONT_QUEUES),
                back_queues=back_queues,
                max_pages_per_host=max_pages_per_host,
                lease_ttl=lease_ttl,
                worker_id=worker_id(s.get("JOBDIR"), s.get("RECORD_WORKER_ID")),
                seen=self._seen(),
                on_give_up=on_give_up,
                shard=index,
                shards=count,
                runner=runner,
                opic=order == "opic",  # cash orders the front queues, as in memory
                back_run=s.getint("FRONTIER_BACK_RUN", defaults.FRONTIER_BACK_RUN),
            )
            for index in range(count)
        ]
        if count == 1:
            return shards[0]
        # a shard's picture is asked again after the refresh interval at the latest (its wake-ups
        # tell sooner of new work): per worker and shard, one status call per interval
        return ShardedFrontier(
            shards,
            max_age=s.getfloat("FRONTIER_REFRESH_INTERVAL", defaults.FRONTIER_REFRESH_INTERVAL),
        )

    def operator_frontier(self) -> RedisFrontier | ShardedFrontier:
        """The crawl's frontier for ``scrapy frontier`` (reports and controls): no worker
        thread, no read-ahead, nothing leased."""
        return self._redis_frontier(
            redis_client(self.settings),
            lease_ttl=defaults.FRONTIER_LEASE_TTL,
            max_pages_per_host=None,
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
        on_give_up = _from_thread(cb.on_give_up)  # the scripts run on the worker thread
        inner = self._redis_frontier(
            client,
            lease_ttl=lease_ttl,
            max_pages_per_host=max_pages_per_host,
            on_give_up=on_give_up,
        )
        if self.settings.getbool("FRONTIER_RESET"):
            removed = inner.reset()
            logger.warning(
                "FRONTIER_RESET: crawl %r starts afresh (%d keys removed)", self.key, removed
            )
            inner = self._redis_frontier(
                client,
                lease_ttl=lease_ttl,
                max_pages_per_host=max_pages_per_host,
                on_give_up=on_give_up,
            )
        inner.check_compatible(self.scope_fingerprint())  # the first worker stores them
        inbox = SharedInbox(
            client,
            self.keys.seeds,
            RedisScopeRegistry(client, self.keys.scope),
            on_seeds=_from_thread(cb.on_seeds),
            on_scope=_from_thread(cb.on_scope),
        )
        logger.info(
            "Frontier: Redis at %s, crawl %r in %d shard(s) (%d URLs queued, %d leases open)",
            safe_url(self.settings),
            self.key,
            self.shard_count,
            len(inner),
            inner.in_flight(),
        )
        return BufferedFrontier(
            inner,
            read_ahead=self.settings.getint("FRONTIER_READ_AHEAD", defaults.FRONTIER_READ_AHEAD),
            refresh=self.settings.getfloat(
                "FRONTIER_REFRESH_INTERVAL", defaults.FRONTIER_REFRESH_INTERVAL
            ),
            max_wait=self.settings.getfloat(
                "FRONTIER_LEASE_MAX_WAIT", defaults.FRONTIER_LEASE_MAX_WAIT
            ),
            notify=_from_thread(cb.notify),
            on_added=_from_thread(cb.on_added),
            on_completed=_from_thread(cb.on_completed),
            on_error=_from_thread(_log_redis_error),
            poll=inbox.poll,
            transient=TRANSIENT,
            linger=self.settings.getfloat(
                "FRONTIER_BATCH_LINGER", defaults.FRONTIER_BATCH_LINGER
            ),
        )


def _log_redis_error(exc: BaseException) -> None:
    logger.error("Redis frontier call failed: %s", exc)
