"""Scrapy's ``RetryMiddleware``, with a URL that fails for good counted, not logged at ERROR.

The stock middleware logs "Gave up retrying ..." at ERROR for every URL whose retries ran out,
and the scraper then logs "Error downloading ..." at ERROR, with a traceback: a broad crawl
meets hanging and failing hosts by the thousand, and an issue 36 soak's two workers wrote 87
and 105 such lines in 20 minutes (a real one would write them by the million). A URL given up
for a network failure is the crawl's normal business: both lines go to DEBUG
(``RETRY_GIVE_UP_LOG_LEVEL``; :class:`QuietDownloadErrors`, the ``LOG_FORMATTER``), and the URL
is counted with its reason in ``retry/gave_up/<reason>`` (``DownloadTimeoutError``, ``500``...),
which the end summary and the report show beside the URLs dropped with their host. A download
error that is no network failure (a bug in a middleware) stays an ERROR.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.logformatter import LogFormatter, LogFormatterResult
from scrapy.utils.misc import _load_objects
from scrapy.utils.python import global_object_name
from twisted.python.failure import Failure

GAVE_UP = "retry/gave_up"


def reason_name(reason: str | Exception | type[Exception]) -> str:
    """A reason as a stat key part: an exception's class name without its module, or the
    text (``500 Internal Server Error`` -> ``500``)."""
    if isinstance(reason, Exception):
        reason = type(reason)
    if isinstance(reason, type):
        return global_object_name(reason).rsplit(".", 1)[-1]
    return reason.split(" ", 1)[0] or "unspecified"


class CountingRetryMiddleware(RetryMiddleware):
    """See the module docstring."""

    def _retry(
        self, request: Request, reason: str | Exception | type[Exception]
    ) -> Request | None:
        retry = super()._retry(request, reason)
        if retry is None and self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"{GAVE_UP}/{reason_name(reason)}")
        return retry


class QuietDownloadErrors(LogFormatter):
    """"Error downloading" at DEBUG for the network failures ``RETRY_EXCEPTIONS`` lists (the
    URL is counted in ``retry/gave_up/``), at ERROR for anything else."""

    def __init__(self, network: tuple[type[BaseException], ...] = ()) -> None:
        self.network = network

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> QuietDownloadErrors:
        return cls(tuple(_load_objects(crawler.settings.getlist("RETRY_EXCEPTIONS"))))

    def download_error(
        self, failure: Failure, request: Request, spider: Spider, errmsg: str | None = None
    ) -> LogFormatterResult:
        result: dict[str, Any] = dict(super().download_error(failure, request, spider, errmsg))
        if self.network and failure.check(*self.network):
            result["level"] = logging.DEBUG
        return result  # type: ignore[return-value]
