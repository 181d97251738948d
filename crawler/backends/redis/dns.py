"""DNS answers shared by every worker of a crawl (``dns_shared`` of the ``redis`` backend),
so a fleet looks each name up once per TTL, not once per worker.

One STRING per name, expiring with the answer (``PX``): Redis forgets a stale answer by itself.
A worker about to ask the DNS server first claims the name (``SET NX PX`` for ``DNS_TIMEOUT``);
another that finds the claim waits for the answer rather than asking too. While Redis is away
the resolver acts alone and never waits: DNS must not stop because the shared cache did.
"""

from __future__ import annotations

import logging
from typing import Any

import msgpack

from crawler.backends.redis.connection import RedisClient, redis_client, worker_name
from crawler.backends.redis.keys import CrawlKeys, crawler_key
from crawler.backends.redis.outage import ActsAlone
from crawler.net.dns import DnsAnswer

logger = logging.getLogger(__name__)


class RedisDnsCache:
    """See the module docstring; implements :class:`crawler.net.dns.SharedDns`."""

    def __init__(self, client: RedisClient, key: str) -> None:
        self.client = client
        self.prefix = CrawlKeys(key).dns
        self.me = worker_name().encode()
        self.alone = ActsAlone(
            "DNS cache",
            lambda: client.exists(self.prefix + "probe"),
            meanwhile="each worker resolves host names on its own until it is back",
            back_note=lambda n: f"{n} DNS cache calls answered alone so far",
            log=logger,
        )

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisDnsCache:
        return cls(redis_client(crawler.settings, fail_fast=True), crawler_key(crawler))

    def get(self, name: str) -> tuple[DnsAnswer, float] | None:
        key = self.prefix + name

        def read() -> Any:
            pipe = self.client.pipeline(transaction=False)
            pipe.get(key)
            pipe.pttl(key)
            return pipe.execute()

        raw, pttl = self.alone.call(read, (None, -2))
        if raw is None or pttl is None or int(pttl) <= 0:
            return None
        try:
            address, ttl, error = msgpack.unpackb(raw, raw=False)
            return DnsAnswer(str(address), float(ttl), str(error)), int(pttl) / 1000.0
        except (ValueError, TypeError):
            return None

    def claim(self, name: str, seconds: float) -> bool:
        key, ms = self.prefix + name + ":claim", max(1, int(seconds * 1000))
        return bool(self.alone.call(lambda: self.client.set(key, self.me, nx=True, px=ms), True))

    def put(self, name: str, answer: DnsAnswer, seconds: float) -> None:
        ms = int(seconds * 1000)
        packed = msgpack.packb([answer.address, answer.ttl, answer.error])

        def write() -> None:
            pipe = self.client.pipeline(transaction=False)
            if ms > 0:
                pipe.set(self.prefix + name, packed, px=ms)
            pipe.delete(self.prefix + name + ":claim")
            pipe.execute()

        self.alone.call(write, None)

    def close(self) -> None:
        self.alone.close()
        self.client.close()
