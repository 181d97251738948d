"""What every worker of one shared crawl must agree on (a mixin of ``RedisFrontier``): its
politeness and queue shape, stored by the crawl's first worker and compared by each next one."""

from __future__ import annotations

from typing import Any


class CrawlFingerprint:
    """``settings_fingerprint`` and ``check_compatible`` (the frontier gives ``policy``,
    ``front_queue_count``, ``back_queue_count``, ``max_pages_per_host``, ``shard_count``,
    ``client`` and ``keys``)."""

    policy: Any
    front_queue_count: int
    back_queue_count: int
    max_pages_per_host: int | None
    shard_count: int
    client: Any
    keys: Any

    def settings_fingerprint(self) -> dict[str, str]:
        """The settings every worker of one crawl must share (politeness and queue shape)."""
        p = self.policy
        return {
            "min_delay": repr(float(p.min_delay)),
            "delay_factor": repr(float(p.delay_factor)),
            "max_delay": repr(float(p.max_delay)),
            "host_concurrency": str(p.host_concurrency),
            "max_crawl_delay": repr(float(p.max_crawl_delay)),
            "max_failures": str(p.max_failures),
            "failure_window": f"{p.failure_window}:{p.window_failures}",
            "front_queues": str(self.front_queue_count),
            "back_queues": str(self.back_queue_count),
            "max_pages_per_host": str(self.max_pages_per_host),
            "shards": str(self.shard_count),
        }

    def check_compatible(self, settings_fingerprint: dict[str, Any]) -> list[str]:
        """Compare this worker's settings (politeness, queue shape, plus the caller's scope
        fingerprint) with those the crawl's first worker stored; store the ones not yet there.
        Returns one message per mismatch: workers of one crawl must obey one policy."""
        meta = self.keys.meta
        wanted = {
            **self.settings_fingerprint(),
            **{k: str(v) for k, v in settings_fingerprint.items()},
        }
        if self.client.hexists(meta, "fp:front_queues") and not self.client.hexists(
            meta, "fp:shards"
        ):  # a crawl stored before shards existed has the one shard it was made with
            self.client.hsetnx(meta, "fp:shards", "1")
        pipe = self.client.pipeline()
        for name, value in wanted.items():
            pipe.hsetnx(meta, "fp:" + name, value)
        pipe.hgetall(meta)
        stored = {k.decode(): v.decode() for k, v in pipe.execute()[-1].items()}
        problems = []
        if stored.get("layout") != _layout():
            problems.append(f"layout: stored {stored.get('layout')}, expected {_layout()}")
        for name, value in wanted.items():
            have = stored.get("fp:" + name)
            if have != value:
                problems.append(f"{name}: crawl has {have}, this worker has {value}")
        return problems


def _layout() -> str:
    from crawler.backends.redis.frontier import LAYOUT  # the frontier's module defines it

    return LAYOUT
