"""Which optional parts of a crawl are on, read from its settings alone.

A predicate here, not in the part itself, when other components decide by it without using
the part: the site spider's content analysis extracts main text when a crawl database will
compare it (and must not import the crawl database to know).
"""

from __future__ import annotations

from typing import Any

from crawler.config import defaults


def crawldb_enabled(settings: Any) -> bool:
    """A crawl keeps a crawl database when given a path or asked to recrawl."""
    return bool(settings.get("CRAWLDB_PATH")) or (
        settings.getfloat("RECRAWL_INTERVAL", defaults.RECRAWL_INTERVAL) > 0
        or settings.getbool("RECRAWL_CONTINUOUS", defaults.RECRAWL_CONTINUOUS)
    )
