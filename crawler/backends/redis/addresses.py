"""Politeness per server address for a fleet (``address_budget`` of the ``redis`` backend): the
budgets of :mod:`crawler.frontier.addresses` in Redis, on the shard the address hashes to, so
every worker counts the same fetches (docs/topics/politeness.md). One call of
``lua/address.lua`` per lease taken and per fetch ended, on Redis's clock: check and count are
one step for the fleet.

While Redis is away fetches go (per-host politeness still holds); the end of a fetch Redis
missed is told once it is back, else its slot would close the address to the fleet until its
lease TTL.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources
from typing import Any

from crawler.backends.redis.connection import RedisClient, redis_client
from crawler.backends.redis.keys import CrawlKeys, address_keys, crawler_key
from crawler.backends.redis.outage import ActsAlone
from crawler.backends.redis.shards import ShardMap
from crawler.backends.redis.status import address_loads
from crawler.frontier.addresses import (
    LATE,
    MISSED_KEPT,
    POLL,
    RISE,
    SCAN,
    SEED,
    AddressLoad,
    AddressPolicy,
)

logger = logging.getLogger(__name__)

MAX_UNTOLD = 10_000  # fetch ends kept for Redis while it is away
SEEN_KEPT = 1_000  # addresses busiest() looks at (the most recently used)
ADDRESS_SOURCE = resources.files("crawler.backends.redis").joinpath("lua/address.lua").read_text()


class RedisAddressBudget:
    """See the module docstring; implements :class:`crawler.frontier.addresses.AddressBudget`."""

    def __init__(
        self,
        client: RedisClient,
        keys: CrawlKeys,
        policy: AddressPolicy,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.policy = policy
        self.clock = clock  # tests only: the workers' clocks never meet, Redis's is the one
        self.shards = ShardMap(keys.shard_count)
        self.tags = keys.shard_prefixes()
        self._script = client.register_script(ADDRESS_SOURCE)
        # the last SEEN_KEPT addresses this worker used, least recently first, for busiest()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._untold: list[tuple[str, list[Any]]] = []  # fetch ends Redis has not heard of
        self.alone = ActsAlone(
            "address politeness",
            lambda: client.exists(self.tags[0] + ":ip:probe"),
            meanwhile="fetches go on with politeness per host name only until it is back",
            back_note=lambda n: f"{n} fetches let through without it",
            log=logger,
        )

    @classmethod
    def from_crawler(cls, crawler: Any, ttl: float = 300.0) -> RedisAddressBudget:
        s = crawler.settings
        keys = CrawlKeys(crawler_key(crawler), shards=int(s.get("FRONTIER_SHARDS") or 1))
        policy = AddressPolicy.from_settings(s, ttl)
        return cls(redis_client(s, fail_fast=True), keys, policy)

    def _keys(self, address: str) -> list[str]:
        return address_keys(self.tags[self.shards(address)], address)

    def _now(self) -> str:
        return "" if self.clock is None else repr(self.clock())

    def take(
        self, address: str, token: str, now: float, host: str = "", priority: int = 0
    ) -> float:
        policy = self.policy
        if policy.concurrency <= 0:
            return 0.0
        self._tell_untold()
        self._seen[address] = None  # bounded in a broad crawl, O(1) per fetch
        self._seen.move_to_end(address)  # the most recently used
        if len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)  # the least recently used goes
        args = [
            "take", token, self._now(), SEED, policy.concurrency, repr(policy.gap(None)),
            repr(policy.ttl), host or token, priority, repr(LATE), SCAN, repr(POLL), MISSED_KEPT,
        ]  # fmt: skip
        return float(
            self.alone.call(lambda: self._script(keys=self._keys(address), args=args), b"0")
        )

    def done(self, address: str, token: str, now: float, duration: float | None) -> None:
        gap = "" if duration is None else repr(self.policy.gap(duration))
        args = ["done", token, self._now(), SEED, gap, repr(duration or 0.0), repr(RISE)]
        self._tell_untold()
        if self.alone.call(lambda: self._script(keys=self._keys(address), args=args), None) is None:
            if len(self._untold) >= MAX_UNTOLD:  # the oldest expire with their lease TTL instead
                del self._untold[: MAX_UNTOLD // 10]
            self._untold.append((address, args))

    def _tell_untold(self) -> None:
        """The fetch ends Redis missed while away, in one pipeline, once it is back."""
        if not self._untold or self.alone.outage.away:
            return
        untold, self._untold = self._untold, []
        pipe = self.client.pipeline(transaction=False)
        for address, args in untold:
            self._script(keys=self._keys(address), args=args, client=pipe)
        if self.alone.call(pipe.execute, None) is None:
            self._untold = untold + self._untold

    def busiest(self, n: int) -> list[AddressLoad]:
        """For the end summary; nothing while Redis is away (the crawl still closes)."""
        tagged = [(self.tags[self.shards(a)], a) for a in self._seen]
        return self.alone.call(lambda: address_loads(self.client, tagged, n), [])

    def close(self) -> None:
        self.alone.close()
        self.client.close()
