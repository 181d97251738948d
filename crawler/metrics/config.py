"""The live metrics' settings (``METRICS_*``), typed, read once (crawler/config/typed.py).

A core: free of Scrapy and of prometheus_client (a crawl without ``METRICS_PORT`` reads this and
loads nothing more).
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting

#: The shortest snapshot interval: a snapshot costs the reactor a few hundred microseconds.
MIN_INTERVAL = 0.1


class MetricsConfig(FeatureConfig):
    """What ``METRICS_*`` says: where this worker serves /metrics (port 0: it does not), how
    often the reactor publishes a snapshot for the scrapes, how long a finished crawl keeps
    serving. The reasons are in ``crawler/config/defaults.py``."""

    port: int = setting("METRICS_PORT")
    host: str = setting("METRICS_HOST")
    interval: float = knob("metrics_interval")
    linger: float = knob("metrics_linger")

    @property
    def enabled(self) -> bool:
        return self.port > 0

    @property
    def bind_host(self) -> str:
        """The address to serve on: loopback unless set otherwise (empty: loopback)."""
        return self.host or "127.0.0.1"

    @property
    def snapshot_interval(self) -> float:
        return max(MIN_INTERVAL, self.interval)
