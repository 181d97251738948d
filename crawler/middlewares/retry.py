"""Scrapy's ``RetryMiddleware``, with a URL that fails for good counted, not logged at ERROR.

The stock middleware logs "Gave up retrying ..." at ERROR for every URL whose retries ran out:
a broad crawl meets hanging and failing hosts by the thousand, and an issue 36 soak's two
workers wrote 87 and 105 such lines in 20 minutes (a real one would write them by the million).
A URL given up is the crawl's normal business, so the line goes to DEBUG
(``RETRY_GIVE_UP_LOG_LEVEL``, settings.py) and the URL is counted with its reason in
``retry/gave_up/<reason>`` (``TimeoutError``, ``500``...), which the end summary and the report
show beside the hosts given up.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.utils.python import global_object_name

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
