"""The full-text index's settings (``INDEX_ENABLED``, ``INDEX_PATH``), typed, read once
(crawler/config/typed.py).

A core: free of Scrapy; the index pipeline, the SQLite index's path and the end-of-crawl summary
read it instead of each repeating the settings' names and defaults.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, setting


class IndexConfig(FeatureConfig):
    """What ``INDEX_*`` says: whether pages are indexed, and where the embedded index is. The
    reasons are in ``crawler/config/defaults.py``."""

    enabled: bool = setting("INDEX_ENABLED")
    path: str | None = setting("INDEX_PATH")  # None or empty: JOBDIR's, else the current folder
