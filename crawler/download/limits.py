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
    """Counts and logs limits that fire (see the module docstring). The crawl's one is an
    extension (in the project's ``EXTENSIONS``), so "once per host" holds across the
    components that fire limits; they reach it with :func:`limit_log`."""

    def __init__(self, stats: Any | None) -> None:
        self.stats = stats
        self._logged: set[tuple[str, str]] = set()

    @classmethod
    def from_crawler(cls, crawler: Any) -> LimitLog:
        return cls(crawler.stats)

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
    """The crawl's one LimitLog. A crawler without it (a project whose ``EXTENSIONS`` lacks it,
    a test's bare crawler) gets one of the caller's own: limits are still counted, and logged
    once per host for that caller."""
    try:
        log = crawler.get_extension(LimitLog)
    except RuntimeError:  # the extensions are not built yet
        log = None
    return log if log is not None else LimitLog(crawler.stats)
