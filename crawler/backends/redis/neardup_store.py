"""``NEARDUP_STORE_CLASS`` of the ``redis`` backend: the crawl's shared near-duplicate
detector, built from the crawl's settings."""

from __future__ import annotations

from typing import Any

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.keys import crawl_key
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.config import defaults
from crawler.content.config import NeardupConfig


class RedisNearDuplicateStore:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend: builds the shared near-duplicate
    detector (:class:`crawler.backends.redis.neardup.RedisNearDuplicateDetector`) of the crawl,
    under the crawl's hash tag, from the crawl's ``REDIS_URL`` and ``NEARDUP_*`` settings; a
    check waits ``REDIS_OUTAGE_WAIT`` for Redis gone away, unless ``CONTENT_THREAD`` is off
    (then the checks run on the reactor, and a page is judged alone at once)."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisNearDuplicateDetector:
        s = crawler.settings
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        return RedisNearDuplicateDetector(
            redis_client(s),
            crawl_key(s, site),
            threshold=NeardupConfig.from_settings(s).threshold,
            # the anchor postings spread over as many hash tags as the frontier's shards
            groups=max(1, s.getint("FRONTIER_SHARDS", defaults.FRONTIER_SHARDS)),
            # the checks wait on the content thread; without one they run on the reactor,
            # which must never wait on Redis
            outage_wait=s.getfloat("REDIS_OUTAGE_WAIT", defaults.REDIS_OUTAGE_WAIT)
            if s.getbool("CONTENT_THREAD", defaults.CONTENT_THREAD) else 0.0,
        )
