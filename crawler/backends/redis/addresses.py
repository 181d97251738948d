"""Politeness per server address for a fleet (``ADDRESS_BUDGET_CLASS`` of the ``redis`` backend):
the budgets of :mod:`crawler.frontier.addresses`, kept in Redis so every worker counts the same
fetches in flight and the same next start at an address.

An address's state lives on the shard its address string hashes to (the frontier's
:class:`~crawler.backends.redis.shards.ShardMap`; one shard: the crawl's tag), so the names of
one server, which may live on different shards, meet at one key: a HASH ``{tag}:ip:<address>``
(``ready``, ``typical`` fetch time, ``fetches``, ``refusals``), a ZSET ``{tag}:ipf:<address>``
of the leases fetching there, scored by when they expire (a worker killed mid-fetch leaves its
token to expire with the lease TTL, as its lease does), and the address's line of hosts it
refused (``{tag}:ipw:<address>``, by rank; ``{tag}:ipb:<address>``, by when each was told to
come back), kept as :class:`~crawler.frontier.addresses.LocalAddressBudget` keeps it. One script
call per lease taken and one per fetch ended, timed by Redis's clock (the workers' clocks never
meet).

While Redis is away the budget lets fetches go (the frontier's per-host politeness still holds)
rather than stopping the crawl, and says so once. The end of a fetch that could not be told to
Redis is kept and told once it is back: a Redis that kept its state (AOF) would otherwise hold
that fetch's slot until its lease TTL, closing the address to the whole fleet for minutes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from crawler.backends.redis.connection import RedisClient, fail_fast_params, redis_client
from crawler.backends.redis.keys import CrawlKeys, crawl_key
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.backends.redis.shards import ShardMap
from crawler.frontier.addresses import LATE, SCAN, AddressLoad, AddressPolicy

logger = logging.getLogger(__name__)

MAX_UNTOLD = 10_000  # fetch ends kept for Redis while it is away
SEEN_KEPT = 1_000  # addresses busiest() looks at (the most recently used)
# a waiter's rank in the line as one sorted-set score: priority, then since when it waited
# (Redis's clock, ~1.8e9 s: below the scale until 2286; a priority step outweighs any wait)
RANK_SCALE = 1e10

_PRELUDE = r"""
local now
if ARGV[#ARGV] ~= '' then
  now = tonumber(ARGV[#ARGV])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function fmt(x) return string.format('%.17g', x) end
"""

# KEYS: state hash, in-flight zset, the line (zset: who -> priority * RANK_SCALE + waiting
# since), the line's return times (zset: who -> when told to come back).
# ARGV: token, concurrency, gap (for starts), ttl, who, priority, late, scan, now ('': Redis's).
# Returns '0' (taken) or the seconds until its turn (crawler.frontier.addresses: the same line).
_TAKE = (
    _PRELUDE
    + r"""
local conc, gap, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local who, prio, late, scan = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local scale = """
    + repr(RANK_SCALE)
    + r"""
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local ready = tonumber(redis.call('HGET', KEYS[1], 'ready') or '0')
local was = redis.call('ZSCORE', KEYS[3], who)
local since = was and (tonumber(was) % scale) or now
local rank = prio * scale + since
redis.call('ZADD', KEYS[3], fmt(rank), who)
local held, i = false, 0  -- held: a better waiter is due back about now
for _, other in ipairs(redis.call('ZRANGE', KEYS[3], 0, scan - 1)) do
  if other == who then break end
  local back = tonumber(redis.call('ZSCORE', KEYS[4], other) or '0')
  if back < now - late then  -- it missed its turn: out of line
    redis.call('ZREM', KEYS[3], other)
    redis.call('ZREM', KEYS[4], other)
  elseif back <= now + gap / 2 then
    held = true
  end
end
local flying = redis.call('ZCARD', KEYS[2])
redis.call('PEXPIRE', KEYS[1], math.floor(ttl * 4000))
if flying < conc and not held and now >= ready then
  redis.call('ZREM', KEYS[3], who)
  redis.call('ZREM', KEYS[4], who)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  if conc > 1 then redis.call('HSET', KEYS[1], 'ready', fmt(now + gap)) end
  redis.call('HINCRBY', KEYS[1], 'fetches', 1)
  redis.call('PEXPIRE', KEYS[2], math.floor(ttl * 1000))
  return '0'
end
redis.call('HINCRBY', KEYS[1], 'refusals', 1)
local typical = tonumber(redis.call('HGET', KEYS[1], 'typical') or '0')
local start = math.max(ready, now)
if flying >= conc then  -- the earliest fetch in flight ends after about the typical fetch time
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  start = math.max(start, tonumber(first[2]) - ttl + typical + gap)
end
local back = start + redis.call('ZRANK', KEYS[3], who) * (gap + typical / conc)
redis.call('ZADD', KEYS[4], fmt(back), who)
redis.call('PEXPIRE', KEYS[3], math.floor(ttl * 4000))
redis.call('PEXPIRE', KEYS[4], math.floor(ttl * 4000))
return fmt(math.max(back - now, 0.001))
"""
)

# KEYS: state hash, in-flight zset. ARGV: token, gap after this fetch ('' : never sent),
# the fetch's duration.
_DONE = (
    _PRELUDE
    + r"""
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 or ARGV[2] == '' then return 0 end
local ready = tonumber(redis.call('HGET', KEYS[1], 'ready') or '0')
local after = now + tonumber(ARGV[2])
if after > ready then redis.call('HSET', KEYS[1], 'ready', fmt(after)) end
local typical = tonumber(redis.call('HGET', KEYS[1], 'typical') or '0')
local took = tonumber(ARGV[3])
if typical > 0 then took = 0.8 * typical + 0.2 * took end
redis.call('HSET', KEYS[1], 'typical', fmt(took))
return 1
"""
)


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
        self._take = client.register_script(_TAKE)
        self._done = client.register_script(_DONE)
        # the last SEEN_KEPT addresses this worker used, least recently first, for busiest()
        self._seen: dict[str, None] = {}
        self._untold: list[tuple[str, list[Any]]] = []  # fetch ends Redis has not heard of
        self.alone = 0
        self.outage = RedisOutage(
            "address politeness",
            lambda: client.exists(self.tags[0] + ":ip:probe"),
            meanwhile="fetches go on with politeness per host name only until it is back",
            back_note=lambda: f"{self.alone} fetches let through without it",
            log=logger,
        )

    @classmethod
    def from_crawler(cls, crawler: Any, ttl: float = 300.0) -> RedisAddressBudget:
        s = crawler.settings
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        shards = int(s.get("FRONTIER_SHARDS") or 1)
        keys = CrawlKeys(crawl_key(s, site), site, shards)
        policy = AddressPolicy.from_settings(s, ttl)
        return cls(redis_client(s, **fail_fast_params(s)), keys, policy)

    def _keys(self, address: str) -> list[str]:
        tag = self.tags[self.shards(address)]
        return [f"{tag}:ip:{address}", f"{tag}:ipf:{address}", f"{tag}:ipw:{address}",
                f"{tag}:ipb:{address}"]

    def _now(self) -> str:
        return "" if self.clock is None else repr(self.clock())

    def _safe(self, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return self.outage.call(fn, wait=0)  # on the reactor: never wait
        except RedisUnavailable:
            self.alone += 1
            return default

    def take(
        self, address: str, token: str, now: float, host: str = "", priority: int = 0
    ) -> float:
        policy = self.policy
        if policy.concurrency <= 0:
            return 0.0
        if self._untold:
            self._tell_untold()
        seen = self._seen  # bounded in a broad crawl, O(1) per fetch
        if address in seen:
            del seen[address]  # to the end: the most recently used
        elif len(seen) >= SEEN_KEPT:
            del seen[next(iter(seen))]  # the least recently used goes
        seen[address] = None
        args = [
            token, policy.concurrency, repr(policy.gap(None)), repr(policy.ttl),
            host or token, priority, repr(LATE), SCAN, self._now(),
        ]
        reply = self._safe(lambda: self._take(keys=self._keys(address), args=args), b"0")
        return float(reply)

    def done(self, address: str, token: str, now: float, duration: float | None) -> None:
        gap = "" if duration is None else repr(self.policy.gap(duration))
        args = [token, gap, repr(duration or 0.0), self._now()]
        if self._untold:
            self._tell_untold()
        if self._safe(lambda: self._done(keys=self._keys(address), args=args), None) is None:
            self._keep_untold(address, args)

    def _keep_untold(self, address: str, args: list[Any]) -> None:
        if len(self._untold) >= MAX_UNTOLD:  # the oldest expire with their lease TTL instead
            del self._untold[: MAX_UNTOLD // 10]
        self._untold.append((address, args))

    def _tell_untold(self) -> None:
        """Tell Redis, in one pipeline, the fetch ends it missed while away (never waits: only
        once the outage's probe found it back)."""
        if self.outage.away:
            return
        untold, self._untold = self._untold, []
        pipe = self.client.pipeline(transaction=False)
        for address, args in untold:
            self._done(keys=self._keys(address), args=args, client=pipe)
        if self._safe(pipe.execute, None) is None:
            self._untold = untold + self._untold

    def busiest(self, n: int) -> list[AddressLoad]:
        """For the end summary; nothing while Redis is away (the crawl still closes)."""
        loads = []
        for address in list(self._seen):
            state, flight, *_ = self._keys(address)
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(state, "fetches", "refusals")
            pipe.zcard(flight)
            replies = self._safe(pipe.execute, None)
            if replies is None:
                return []
            (fetches, refusals), in_flight = replies
            load = AddressLoad(address, int(in_flight), int(fetches or 0), int(refusals or 0))
            loads.append(load)
        loads.sort(key=lambda a: (-a.in_flight, -a.fetches, a.address))
        return loads[:n]

    def close(self) -> None:
        self.outage.close()
        self.client.close()
