"""The WARC payload-digest index of a fleet: one Redis HASH under the crawl's hash tag
(``{crawl}:warc_digests``, digest -> first capture), so a payload archived by any worker, in
this crawl or an earlier one of the same crawl name, becomes a revisit record everywhere.

While Redis is away, or refuses the claim (out of memory under ``noeviction``), a claim answers
"not known": the worker writes the payload in full, which costs space and never a revisit that
points at nothing, nor a record lost."""

from __future__ import annotations

import logging
from typing import Any

import redis

from crawler.archive.digests import DigestIndex, decode_capture, encode_capture
from crawler.archive.records import Capture
from crawler.backends.redis.connection import RedisClient, redis_client
from crawler.backends.redis.keys import CrawlKeys, crawler_key
from crawler.backends.redis.outage import ActsAlone

logger = logging.getLogger(__name__)


class RedisDigestIndex(DigestIndex):
    def __init__(self, client: RedisClient, key: str) -> None:
        self.client = client
        self.key = key
        self.refused = 0  # claims Redis refused (an error reply), payloads written in full
        self.alone = ActsAlone(
            "WARC digest index",
            lambda: client.exists(key),
            meanwhile="payloads are written in full until it is back",
            back_note=lambda n: f"{n} payloads written in full without it",
            log=logger,
        )

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> RedisDigestIndex:
        return cls(redis_client(crawler.settings), CrawlKeys(crawler_key(crawler)).warc_digests)

    def claim(self, digest: str, capture: Capture) -> Capture | None:
        def claim() -> list[Any]:
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(self.key, digest, encode_capture(capture))
            pipe.hget(self.key, digest)
            return pipe.execute()

        try:
            claimed, known = self.alone.call(claim, (True, None))
        except redis.ResponseError as exc:
            if not self.refused:
                logger.error(
                    "WARC digest index: Redis refused a claim (%s); payloads are "
                    "written in full while it does",
                    exc,
                )
            self.refused += 1
            return None
        return None if claimed else decode_capture(known.decode())

    def close(self) -> None:
        self.alone.close()
        self.client.close()
