"""Bookkeeping shared by the crawler's limits on what a hostile server can make it do.

Every limit that fires is counted in the stat ``limits/<name>`` and logged at INFO once per host
and limit, with the URL that made it fire: a server that trips a limit on every page must not
flood the log, and the first URL is enough to see what happened.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest

logger = logging.getLogger("crawler.download.limits")


class DownloadLimitExceeded(IgnoreRequest):
    """A download stopped by one of the crawler's limits. An ``IgnoreRequest``: retrying the
    same URL would only meet the same limit again."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.detail = detail


class StoppedAtShutdown(IgnoreRequest):
    """A download cut short because the crawl is stopping (Ctrl-C, scrapyd's cancel): not a
    failure of the host, not to be retried; its lease goes back to the frontier."""


class LimitLog:
    """Counts and logs limits that fire (see the module docstring)."""

    def __init__(self, stats: Any | None) -> None:
        self.stats = stats
        self._logged: set[tuple[str, str]] = set()

    def fire(self, name: str, url: str, detail: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"limits/{name}", count)
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            host = ""
        if (host, name) in self._logged:
            return
        self._logged.add((host, name))
        logger.info(
            "Limit %s reached on %s: %s (counted in limits/%s; logged once per host)",
            name,
            url[:300],
            detail,
            name,
        )


def limit_log(crawler: Any) -> LimitLog:
    """The crawl's one LimitLog, so "once per host" holds across components."""
    log = getattr(crawler, "_crawler_limit_log", None)
    if log is None:
        log = LimitLog(crawler.stats)
        crawler._crawler_limit_log = log
    return log
