"""The frontier's settings (``FRONTIER_*`` beyond politeness, and its ``TUNING`` knobs), typed and
read once (crawler/config/typed.py), for the scheduler and the frontier stores.

Politeness has its own object (:func:`crawler.frontier.politeness.politeness_from_settings`):
a site config's ``[politeness]`` sets it too, and the frontier core takes it whole.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting


class FrontierConfig(FeatureConfig):
    """What the frontier's settings say; the reasons are in ``crawler/config/defaults.py`` and
    ``crawler/config/tuning.py``."""

    priority_policy: str = setting("FRONTIER_PRIORITY_POLICY")
    lease_ttl: float = setting("FRONTIER_LEASE_TTL")
    max_backlog: int = setting("FRONTIER_MAX_BACKLOG")
    max_backlog_bytes: int = knob("max_backlog_bytes")
    idle_horizon: float = knob("idle_horizon")
    join_wait: float = knob("join_wait")
    link_slice: int = knob("link_slice")


class SharedFrontierConfig(FrontierConfig):
    """A frontier shared in Redis: the crawl's key, whether it starts afresh, how its state is
    spread and sized, how far a worker reads ahead."""

    redis_key: str = setting("FRONTIER_REDIS_KEY")
    reset: bool = setting("FRONTIER_RESET")
    shards: int = setting("FRONTIER_SHARDS")
    seen_exact_limit: int = setting("FRONTIER_SEEN_EXACT_LIMIT")
    replica_wait: int = setting("FRONTIER_REPLICA_WAIT")
    # the URL filters every worker must share (a crawl's fingerprint)
    max_url_length: int = setting("URL_MAX_LENGTH")
    max_repeated_segments: int = setting("URL_MAX_REPEATED_SEGMENTS")
    read_ahead: int = knob("read_ahead")
