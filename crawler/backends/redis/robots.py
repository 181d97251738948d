"""robots.txt shared by every worker of a crawl (``ROBOTS_CACHE_CLASS`` of the ``redis``
backend): the fetched files, and each origin's fetch state (claimed, unreachable, given up), so
robots.txt is fetched once per host, and once per retry period when it fails, for the whole
crawl."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import msgpack

from crawler.backends.redis.connection import RedisClient, fail_fast_params, redis_client
from crawler.backends.redis.keys import CrawlKeys, crawl_key
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.robots.cache import RobotsCache, SharedOrigin
from crawler.robots.rules import DISALLOW_ALL, RobotsRecord

logger = logging.getLogger(__name__)

# An origin's shared fetch state, ``{key}:robots_state`` field origin -> msgpack
# [claim_until, retry_at, failures, gave_up], in Redis's own time (the workers' clocks never
# meet). Each script returns [state, seconds, failures]: state "claimed", "fetching" (seconds
# until that claim lapses), "unreachable" (seconds until the retry is due), "gave_up", "none".
_ROBOTS_PRELUDE = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local st = {0, 0, 0, 0}
if raw then st = cmsgpack.unpack(raw) end
local function fmt(x) return string.format('%.17g', x) end
local function verdict()
  if st[4] == 1 then return {'gave_up', '0', st[3]} end
  if st[1] > now then return {'fetching', fmt(st[1] - now), st[3]} end
  if raw and st[2] > 0 then return {'unreachable', fmt(math.max(0, st[2] - now)), st[3]} end
  return nil
end
"""
_ROBOTS_SCRIPTS = {
    "claim": _ROBOTS_PRELUDE + r"""
local v = verdict()
if v and (v[1] ~= 'unreachable' or st[2] > now) then return v end
st[1] = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(st))
return {'claimed', '0', st[3]}
""",
    "peek": _ROBOTS_PRELUDE + r"""
return verdict() or {'none', '0', st[3]}
""",
    "failed": _ROBOTS_PRELUDE + r"""
if ARGV[2] == '' then st = {0, 0, tonumber(ARGV[3]), 1}
else st = {0, now + tonumber(ARGV[2]), tonumber(ARGV[3]), 0} end
redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(st))
return {'unreachable', ARGV[2], st[3]}
""",
    "unclaim": _ROBOTS_PRELUDE + r"""
if raw and st[1] > 0 then
  st[1] = 0
  if st[2] == 0 and st[3] == 0 and st[4] == 0 then redis.call('HDEL', KEYS[1], ARGV[1])
  else redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(st)) end
end
return {'none', '0', st[3]}
""",
}


def _shared_origin(reply: list[Any]) -> SharedOrigin:
    state, seconds, failures = reply[0].decode(), float(reply[1] or 0), int(reply[2])
    if state == "claimed":
        return SharedOrigin(True, failures=failures)
    if state == "fetching":
        return SharedOrigin(False, fetching_for=max(seconds, 1e-3), failures=failures)
    if state == "unreachable":
        return SharedOrigin(False, retry_in=seconds, failures=failures)
    if state == "gave_up":
        return SharedOrigin(False, failures=failures, gave_up=True)
    return SharedOrigin(False, failures=failures)


class RedisRobotsCache(RobotsCache):
    """``ROBOTS_CACHE_CLASS`` of the ``redis`` backend: one HASH of records for the crawl, so
    robots.txt is fetched once per host whichever worker gets there first, and one HASH of
    each origin's fetch state (claimed by a worker, unreachable until a retry, failures, given
    up), so a failing robots.txt is fetched once per retry period for the whole crawl and
    every worker holds the host meanwhile.

    Read once per origin and worker (the robots book keeps what it read), plus a claim per
    fetch and a look per retry; each is one round trip on the reactor thread (~0.1 ms), rare
    enough not to matter next to the fetch it saves. On a Redis Cluster every key is under the
    crawl's hash tag: each call goes to the one node that serves it.

    While Redis is away (a restart, a cluster failover), each worker acts alone rather than
    failing the page that asked, and never waits (the reactor must not): no copy is found, a
    claim is granted, a fetched copy is kept locally and sent once Redis is back. The client
    fails fast (:func:`~crawler.backends.redis.connection.fail_fast_params`: one attempt per
    call, two on a cluster, short socket timeouts), and once a call has failed none is made
    until the outage's
    probe, on its own thread, finds Redis back (:class:`~crawler.backends.redis.outage.
    RedisOutage`): one line when Redis goes away, one when it is back."""

    def __init__(self, client: RedisClient, key: str) -> None:
        """``key``: the crawl's name in Redis (:func:`~crawler.backends.redis.keys.crawl_key`)."""
        keys = CrawlKeys(key)
        self.client = client
        self.hash = keys.robots
        self.state_hash = keys.robots_state
        self._scripts = {n: client.register_script(src) for n, src in _ROBOTS_SCRIPTS.items()}
        self.alone = 0  # calls answered without Redis (it was away)
        self._unsent: dict[str, bytes] = {}  # origin -> record fetched while Redis was away
        self._unsent_lock = threading.Lock()
        self.outage = RedisOutage(
            "robots.txt cache",
            lambda: client.exists(self.state_hash),
            meanwhile="each worker fetches robots.txt on its own until it is back",
            back_note=lambda: f"{self.alone} robots.txt look-ups answered alone so far",
            on_back=self._send_unsent,
            log=logger,
        )

    def _safe(self, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return self.outage.call(fn, wait=0)  # on the reactor: never wait
        except RedisUnavailable:
            self.alone += 1
            return default

    def _run(self, name: str, *args: Any) -> SharedOrigin | None:
        script = self._scripts[name]
        reply = self._safe(lambda: script(keys=[self.state_hash], args=list(args)), None)
        return None if reply is None else _shared_origin(reply)

    def claim(self, origin: str, seconds: float) -> SharedOrigin:
        return self._run("claim", origin, repr(float(seconds))) or SharedOrigin(True)

    def peek(self, origin: str) -> SharedOrigin | None:
        shared = self._run("peek", origin)
        if shared is None or not (
            shared.fetching_for or shared.gave_up or shared.retry_in is not None
        ):
            return None
        return shared

    def failed(self, origin: str, retry_in: float | None, failures: int) -> None:
        self._run("failed", origin, "" if retry_in is None else repr(float(retry_in)), failures)

    def unclaim(self, origin: str) -> None:
        self._run("unclaim", origin)

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> RedisRobotsCache:
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        s = crawler.settings
        client = redis_client(s, **fail_fast_params(s))
        return cls(client, crawl_key(s, site))

    def get(self, origin: str) -> RobotsRecord | None:
        return self._record(origin, self._safe(lambda: self.client.hget(self.hash, origin), None))

    def get_many(self, origins: list[str]) -> dict[str, RobotsRecord | None]:
        """One ``HMGET`` for a batch of origins (a seeds file's new hosts)."""
        if not origins:
            return {}
        raws = self._safe(lambda: self.client.hmget(self.hash, origins), None)
        if raws is None:
            raws = [None] * len(origins)
        return {o: self._record(o, raw) for o, raw in zip(origins, raws, strict=True)}

    def _record(self, origin: str, raw: bytes | None) -> RobotsRecord | None:
        if raw is None:
            with self._unsent_lock:
                raw = self._unsent.get(origin)
        if raw is None:
            return None
        try:
            return RobotsRecord(*msgpack.unpackb(raw, raw=False))
        except (ValueError, TypeError):
            return None

    def put(self, record: RobotsRecord) -> None:
        if record.kind == DISALLOW_ALL:
            return
        packed = msgpack.packb(
            [
                record.origin,
                record.kind,
                record.status,
                record.fetched_at,
                record.expires_at,
                record.body,
            ]
        )
        if self._safe(lambda: self._store({record.origin: packed}), False) is False:
            with self._unsent_lock:  # sent when Redis is back (RedisOutage.on_back)
                self._unsent[record.origin] = packed

    def _store(self, records: dict[str, bytes]) -> bool:
        """Records in, their fetch states cleared (read: no claim, no failure left), at once:
        one slot (the crawl's tag), so a transaction on a cluster too."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.hash, mapping=records)
        pipe.hdel(self.state_hash, *records)
        pipe.execute()
        return True

    def _send_unsent(self) -> None:
        """On the outage's probe thread, once Redis is back: the records fetched meanwhile."""
        with self._unsent_lock:
            unsent = dict(self._unsent)
        if unsent:
            self._store(unsent)
            with self._unsent_lock:
                for origin, packed in unsent.items():
                    if self._unsent.get(origin) == packed:
                        del self._unsent[origin]

    def __len__(self) -> int:
        return int(self.client.hlen(self.hash))

    def close(self) -> None:
        self.outage.close()
        self.client.close()
