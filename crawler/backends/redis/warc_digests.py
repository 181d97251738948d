"""The WARC payload-digest index of a fleet: one Redis HASH under the crawl's hash tag
(``{crawl}:warc_digests``, digest -> first capture), so a payload archived by any worker, in
this crawl or an earlier one of the same crawl name, becomes a revisit record everywhere.

While Redis is away a claim answers "not known": the worker writes the payload in full, which
costs space and never a revisit that points at nothing."""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError

from crawler.archive.digests import DigestIndex, decode_capture, encode_capture
from crawler.archive.records import Capture
from crawler.backends.redis.connection import RedisClient, redis_client
from crawler.backends.redis.keys import CrawlKeys, crawler_key

logger = logging.getLogger(__name__)


class RedisDigestIndex(DigestIndex):
    def __init__(self, client: RedisClient, key: str) -> None:
        self.client = client
        self.key = key
        self.unanswered = 0  # claims Redis did not answer (the payload was written in full)

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> RedisDigestIndex:
        return cls(redis_client(crawler.settings), CrawlKeys(crawler_key(crawler)).warc_digests)

    def claim(self, digest: str, capture: Capture) -> Capture | None:
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(self.key, digest, encode_capture(capture))
            pipe.hget(self.key, digest)
            claimed, known = pipe.execute()
        except RedisError as exc:
            self.unanswered += 1
            if self.unanswered == 1:
                logger.warning(
                    "WARC digest index: Redis did not answer (%s); payloads are"
                    " written in full until it does",
                    exc,
                )
            return None
        if claimed:
            return None
        return decode_capture(known.decode() if isinstance(known, bytes) else known)
