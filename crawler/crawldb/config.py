"""The crawl database's and recrawl's settings (``CRAWLDB_PATH``, ``RECRAWL_*``), typed, read
once (crawler/config/typed.py).

A core: free of Scrapy; the adaptive schedule and the recrawl extension are built from it.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting


class RecrawlConfig(FeatureConfig):
    """What ``CRAWLDB_PATH`` and ``RECRAWL_*`` say: where the crawl database is, the first
    interval of the adaptive schedule, whether the crawl keeps running to refetch pages as they
    come due, and (a ``TUNING`` knob) Nutch's sync delta. The reasons are in
    ``crawler/config/defaults.py``;
    whether a crawl keeps a crawl database at all is :func:`crawler.config.features.crawldb_enabled`
    (other parts decide by it without the crawl database)."""

    path: str = setting("CRAWLDB_PATH")  # "%(name)s": the site; empty: JOBDIR's or here
    interval: float = setting("RECRAWL_INTERVAL")  # 0: a day
    continuous: bool = setting("RECRAWL_CONTINUOUS")
    sync_delta: bool = knob("recrawl_sync_delta")
