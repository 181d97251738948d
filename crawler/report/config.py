"""The crawl record's settings (``RECORD_*``), typed, read once (crawler/config/typed.py).

A core: free of Scrapy; the recorder extension builds it from the crawl's settings, and
``scrapy report`` finds the record where :func:`crawler.extensions.recorder.record_path` says.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting


class RecordConfig(FeatureConfig):
    """What ``RECORD_*`` says: whether the crawl keeps a record for ``scrapy report``, where,
    how often it takes a snapshot, how many fetches it keeps one line each, and the worker's
    name in it. The reasons are in ``crawler/config/defaults.py``."""

    enabled: bool = setting("RECORD_ENABLED")
    path: str = setting("RECORD_PATH")  # empty: JOBDIR, beside STATS_FILE, or here
    interval: float = knob("record_interval")
    max_fetches: int = knob("record_max_fetches")
    worker_id: str = setting("RECORD_WORKER_ID")  # empty: host:pid
