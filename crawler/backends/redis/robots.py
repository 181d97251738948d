"""robots.txt shared by every worker of a crawl (``robots_cache`` of the ``redis`` backend)."""

from __future__ import annotations

import logging
import threading
from contextlib import suppress
from dataclasses import astuple
from typing import Any

import msgpack
from redis.exceptions import WatchError

from crawler.backends.redis.connection import RedisClient, redis_client
from crawler.backends.redis.keys import CrawlKeys, crawler_key
from crawler.backends.redis.outage import ActsAlone
from crawler.robots.cache import RobotsCache, SharedOrigin
from crawler.robots.rules import DISALLOW_ALL, RobotsRecord

logger = logging.getLogger(__name__)

# An origin's hold (docs/reference/redis-keys.md), timed by Redis's clock (PX): a worker's claim,
# a failed fetch waiting out its retry delay, the crawl's retries used up (no expiry). A claim is
# one ``SET NX PX GET``: granted to one worker only, or answered with the hold in its way.
FETCHING, UNREACHABLE, GAVE_UP = b"fetching", b"unreachable", b"gave_up"


def _shared_origin(hold: bytes | None, pttl: int, failures: bytes | None) -> SharedOrigin:
    """The shared state of an origin that has a hold or a failure, from the hold, its time
    left (ms) and the failures so far."""
    seconds, count = max(int(pttl), 1) / 1000.0, int(failures or 0)
    if hold == GAVE_UP:
        return SharedOrigin(False, failures=count, gave_up=True)
    if hold == FETCHING:
        return SharedOrigin(False, fetching_for=seconds, failures=count)
    if hold == UNREACHABLE:
        return SharedOrigin(False, retry_in=seconds, failures=count)
    return SharedOrigin(False, retry_in=0.0, failures=count)  # failed; its retry is due


class RedisRobotsCache(RobotsCache):
    """One HASH of records for the crawl, so robots.txt is fetched once per host whichever
    worker gets there first, and each origin's fetch state, so a failing robots.txt is fetched
    once per retry period for the whole crawl and every worker holds the host meanwhile.

    Each call is one round trip on the reactor thread (~0.1 ms), rare enough (once per origin
    and worker, a claim per fetch, a look per retry) not to matter next to the fetch it saves.
    While Redis is away each worker acts alone rather than failing the page that asked: no copy
    is found, a claim is granted, a fetched copy is kept and sent once Redis is back."""

    def __init__(self, client: RedisClient, key: str) -> None:
        keys = CrawlKeys(key)
        self.client = client
        self.hash = keys.robots
        self.failures = keys.robots_failures
        self.holds = keys.robots_hold  # + an origin
        self._unsent: dict[str, bytes] = {}  # origin -> record fetched while Redis was away
        self._unsent_lock = threading.Lock()
        self.alone = ActsAlone(
            "robots.txt cache",
            lambda: client.exists(self.failures),
            meanwhile="each worker fetches robots.txt on its own until it is back",
            back_note=lambda n: f"{n} robots.txt look-ups answered alone so far",
            on_back=self._send_unsent,
            log=logger,
        )

    def _read(self, origin: str, claim_ms: int | None = None) -> list[Any] | None:
        """The origin's hold, its time left (ms) and its failures, read at once; with
        ``claim_ms``, the hold is a claim first unless another is in the way (the hold read is
        then that one: None, the claim was granted). None: Redis is away."""
        hold = self.holds + origin

        def read() -> Any:
            pipe = self.client.pipeline(transaction=True)
            if claim_ms is None:
                pipe.get(hold)
            else:
                pipe.set(hold, FETCHING, nx=True, px=claim_ms, get=True)
            pipe.pttl(hold)
            pipe.hget(self.failures, origin)
            return pipe.execute()

        return self.alone.call(read, None)

    def claim(self, origin: str, seconds: float) -> SharedOrigin:
        reply = self._read(origin, max(1, int(seconds * 1000)))
        if reply is None:  # acting alone
            return SharedOrigin(True)
        if reply[0] is None:
            return SharedOrigin(True, failures=int(reply[2] or 0))
        return _shared_origin(*reply)

    def peek(self, origin: str) -> SharedOrigin | None:
        reply = self._read(origin)
        if reply is None or (reply[0] is None and not reply[2]):
            return None
        return _shared_origin(*reply)

    def failed(self, origin: str, retry_in: float | None, failures: int) -> None:
        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            if retry_in is None:
                pipe.set(self.holds + origin, GAVE_UP)
            else:
                pipe.set(self.holds + origin, UNREACHABLE, px=max(1, int(retry_in * 1000)))
            pipe.hset(self.failures, origin, failures)
            pipe.execute()

        self.alone.call(write, None)

    def unclaim(self, origin: str) -> None:
        """The claim goes, and only a claim: a failure another worker recorded after this
        worker's claim lapsed stays (``WATCH``: the hold is deleted only as read)."""
        hold = self.holds + origin

        def drop() -> None:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.watch(hold)
                if pipe.get(hold) != FETCHING:
                    return
                pipe.multi()
                pipe.delete(hold)
                with suppress(WatchError):  # another worker's hold now: not ours to drop
                    pipe.execute()

        self.alone.call(drop, None)

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> RedisRobotsCache:
        return cls(redis_client(crawler.settings, fail_fast=True), crawler_key(crawler))

    def get(self, origin: str) -> RobotsRecord | None:
        return self._record(
            origin, self.alone.call(lambda: self.client.hget(self.hash, origin), None)
        )

    def get_many(self, origins: list[str]) -> dict[str, RobotsRecord | None]:
        raws = origins and self.alone.call(lambda: self.client.hmget(self.hash, origins), None)
        raws = raws or [None] * len(origins)  # none asked, or Redis away
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
        packed = msgpack.packb(astuple(record))  # its fields in order, as _record reads them
        if self.alone.call(lambda: self._store({record.origin: packed}), False) is False:
            with self._unsent_lock:  # sent when Redis is back (RedisOutage.on_back)
                self._unsent[record.origin] = packed

    def _store(self, records: dict[str, bytes]) -> bool:
        """Records in, their fetch states cleared, at once (one slot: a transaction on a
        cluster too)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.hash, mapping=records)
        pipe.hdel(self.failures, *records)
        pipe.delete(*(self.holds + origin for origin in records))
        pipe.execute()
        return True

    def _send_unsent(self) -> None:
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
        self.alone.close()
        self.client.close()
