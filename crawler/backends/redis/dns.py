"""DNS answers shared by every worker of a crawl (``dns_shared`` of the ``redis`` backend),
so a fleet looks each name up once per TTL, not once per worker.

One STRING per name, expiring with the answer (``PX``): Redis forgets a stale answer by itself.
A worker about to ask the DNS server first claims the name: one call of ``lua/dns_claim.lua``
gives the answer if there is one, else the claim (``SET NX PX``) unless another worker holds
it, so no answer put between a look and a claim is missed. A claim lasts ``DNS_TIMEOUT`` unless
renewed; its worker renews it while its lookup waits for a slot and runs, so it lapses only
when that worker is gone, and another that finds it waits for the answer rather than asking
too. While Redis is away the resolver acts alone and never waits: DNS must not stop because
the shared cache did.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from importlib import resources
from typing import Any

import msgpack

from crawler.backends.redis.connection import RedisClient, redis_client, worker_name
from crawler.backends.redis.keys import CrawlKeys, crawler_key
from crawler.backends.redis.outage import ActsAlone
from crawler.net.dns import DnsAnswer

logger = logging.getLogger(__name__)

CLAIM = ":claim"  # + a name's key: the worker looking it up now
CLAIM_SOURCE = resources.files("crawler.backends.redis").joinpath("lua/dns_claim.lua").read_text()


class RedisDnsCache:
    """See the module docstring; implements :class:`crawler.net.dns.SharedDns`."""

    def __init__(self, client: RedisClient, key: str) -> None:
        self.client = client
        self.prefix = CrawlKeys(key).dns
        self.me = worker_name().encode()
        self._claim = client.register_script(CLAIM_SOURCE)
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

    def claim(self, name: str, seconds: float) -> tuple[DnsAnswer, float] | bool:
        key, ms = self.prefix + name, max(1, int(seconds * 1000))
        reply = self.alone.call(lambda: self._claim(keys=[key, key + CLAIM], args=[self.me, ms]), 1)
        if not isinstance(reply, list):
            return bool(reply)
        raw, pttl = reply
        try:
            address, ttl, error = msgpack.unpackb(raw, raw=False)
            return DnsAnswer(str(address), float(ttl), str(error)), max(int(pttl), 1) / 1000.0
        except (ValueError, TypeError):
            return True  # unreadable: looked up again, and replaced by this worker's answer

    def renew(self, names: Collection[str], seconds: float) -> None:
        ms = max(1, int(seconds * 1000))

        def renew() -> None:
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.pexpire(self.prefix + name + CLAIM, ms)
            pipe.execute()

        self.alone.call(renew, None)

    def put(self, name: str, answer: DnsAnswer, seconds: float) -> None:
        ms = int(seconds * 1000)
        packed = msgpack.packb([answer.address, answer.ttl, answer.error])

        def write() -> None:
            pipe = self.client.pipeline(transaction=False)
            if ms > 0:
                pipe.set(self.prefix + name, packed, px=ms)
            pipe.delete(self.prefix + name + CLAIM)
            pipe.execute()

        self.alone.call(write, None)

    def close(self) -> None:
        self.alone.close()
        self.client.close()
