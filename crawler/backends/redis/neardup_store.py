"""``NEARDUP_STORE_CLASS`` of the ``redis`` backend: the crawl's shared near-duplicate
detector (:class:`crawler.backends.redis.neardup.RedisNearDuplicateDetector`), under the crawl's
hash tag, from the crawl's ``REDIS_URL`` and ``NEARDUP_*`` settings."""

from __future__ import annotations

from typing import Any

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.keys import crawl_key
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.config import defaults
from crawler.config.typed import FeatureConfig, knob
from crawler.content.config import NeardupConfig


class _ContentThread(FeatureConfig):
    """Whether the checks run on the content thread (the offload's knob, read here too: the
    storage layer cannot ask the offload layer)."""

    on: bool = knob("content_thread")


class RedisNearDuplicateStore:
    """Builds the crawl's detector (see the module)."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisNearDuplicateDetector:
        s = crawler.settings
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        return RedisNearDuplicateDetector(
            redis_client(s),
            crawl_key(s, site),
            threshold=NeardupConfig.from_settings(s).threshold,
            # without the content thread the checks run on the reactor, which must never wait
            # on Redis: a page is judged alone at once
            outage_wait=s.getfloat("REDIS_OUTAGE_WAIT", defaults.REDIS_OUTAGE_WAIT)
            if _ContentThread.from_settings(s).on
            else 0.0,
        )
