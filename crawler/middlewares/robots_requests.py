"""What a robots.txt request is, and what the fetcher is built from: the request's meta keys
and shape, the cache's place (``robots_cache``, ``ROBOTSTXT_CACHE_PATH``), the longest
wait for a fetch, and a ``Retry-After`` header read as seconds."""

from __future__ import annotations

import os
import time
from email.utils import parsedate_to_datetime

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.settings import BaseSettings

from crawler.backends.registry import build_backend
from crawler.crawldb import crawldb_path
from crawler.download.robots_request import (  # noqa: F401 (the fetcher's names)
    AGAIN_META,
    DIRECT_META,
    HOPS_META,
    RETRY_META,
    is_robots_request,
    robots_request,
)
from crawler.robots.cache import RobotsCache

MAX_REDIRECTS = 5


class RobotsTxtHandled(IgnoreRequest):
    """A robots.txt response or failure was consumed here; it must not reach the spider."""


def robots_cache_path(crawler: Crawler) -> str | None:
    """``ROBOTSTXT_CACHE_PATH``; else in JOBDIR, or beside the crawl database, so a resumed crawl
    or a recrawl reuses fresh copies; None: nowhere on disk."""
    settings = crawler.settings
    path = settings.get("ROBOTSTXT_CACHE_PATH")
    if path:
        return str(path)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return os.path.join(jobdir, "robots.sqlite")
    db_path = crawldb_path(settings, getattr(crawler.spidercls, "name", None) or "crawl")
    if not db_path:
        return None
    stem = db_path[: -len(".sqlite")] if db_path.endswith(".sqlite") else db_path
    return f"{stem}-robots.sqlite"


def build_cache(crawler: Crawler) -> RobotsCache:
    """The cache ``robots_cache`` names (``crawler.backends.registry``), at the crawl's
    path."""
    return build_backend(crawler, "robots_cache", path=robots_cache_path(crawler))


def wait_timeout(settings: BaseSettings) -> float:
    """Longest a request waits for its origin's robots.txt fetch before it is refused as
    unresolved: the longest that fetch can take, every redirect hop (RFC 9309: up to 5) timing
    out on every attempt, plus a margin."""
    attempts = settings.getint("RETRY_TIMES", 2) + 1
    return settings.getfloat("DOWNLOAD_TIMEOUT", 180.0) * attempts * (1 + MAX_REDIRECTS) + 60.0


def retry_after(response: Response) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date), if any."""
    value = response.headers.get(b"Retry-After")
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isascii() and text.isdigit():  # not Latin-1's "²", which float refuses
        return float(text)
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
