"""The robots.txt feature's settings (``ROBOTSTXT_*``), typed, read once
(crawler/config/typed.py).

A core: free of Scrapy; the robots.txt fetcher builds it from the crawl's settings and hands its
values to the book of parsed copies.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting


class RobotsConfig(FeatureConfig):
    """What ``ROBOTSTXT_*`` says: whether robots.txt is obeyed, under which name, how long a
    copy is used, how a failing one is retried, how many parsed copies a worker keeps. The
    settings' reasons are in ``crawler/config/defaults.py``."""

    enabled: bool = setting("ROBOTSTXT_ENABLED")
    user_agent: str | None = setting("ROBOTSTXT_USER_AGENT")  # None: USER_AGENT's token
    cache_expiry: float = setting("ROBOTSTXT_CACHE_EXPIRY")
    retry_delay: float = knob("robots_retry_delay")
    retry_times: int = knob("robots_retry_times")
    cache_path: str = setting("ROBOTSTXT_CACHE_PATH")  # empty: JOBDIR or the crawl database's
    book_size: int = knob("robots_book_size")
