"""429 Too Many Requests and 503 Service Unavailable: wait as long as the server asks, then retry.

Stock ``RetryMiddleware`` retries these at once and drops the page after ``RETRY_TIMES``: a host
that says "slow down" gets hit again within milliseconds. Here a 429/503 holds the whole host in
the frontier (the ``host_hold`` signal) for its ``Retry-After`` (seconds or an HTTP date;
:data:`DEFAULT_WAIT` when absent or unreadable) and re-queues the request, at most
``RETRY_TIMES`` times (Scrapy's setting: one count for every answer that says "try again"). A
host asking for more than :data:`MAX_WAIT` is skipped: its requests are refused without touching
the network, rather than the crawl waiting for hours. ``RETRY_HTTP_CODES`` (settings.py) leaves
429 and 503 out, so the two never compete.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from crawler import signals as crawler_signals
from crawler.download.robots_request import is_robots_request

logger = logging.getLogger(__name__)

ATTEMPTS_META = "retry_after_times"
CODES = frozenset({429, 503})
#: Seconds a host is held when its 429/503 has no (readable) Retry-After.
DEFAULT_WAIT = 60.0
#: Seconds past which a Retry-After skips its host instead: a host that asks for more than an
#: hour is down for this crawl (and the robots.txt retries stop at an hour too).
MAX_WAIT = 3600.0


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP date, RFC 9110
    10.2.3); ``None`` when it is missing or unreadable. A date in the past means 0."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # not Latin-1's "²", which float refuses
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class RetryAfterMiddleware:
    """See the module docstring. Its priority must be above ``RetryMiddleware``'s (550), so it
    sees a 429/503 first."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.default = DEFAULT_WAIT
        self.max = MAX_WAIT
        self.times = settings.getint("RETRY_TIMES")
        self.skipped: set[str] = set()
        self._logged: set[tuple[str, str]] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryAfterMiddleware:
        return cls(crawler)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        host = urlparse_cached(request).hostname or ""
        if host in self.skipped:
            self._inc("retry_after/refused")
            raise IgnoreRequest(f"{host} asked to wait longer than {MAX_WAIT:.0f}s")
        return None

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if response.status not in CODES or request.meta.get("dont_retry"):
            return response
        if is_robots_request(request):  # (a redirect hop's path too, not a page's robots.txt)
            return response  # the robots.txt middleware has its own rules for these
        host = urlparse_cached(request).hostname or ""
        raw = response.headers.get(b"Retry-After")
        text = raw.decode("latin-1") if raw else None
        delay = parse_retry_after(text)
        if delay is None:
            if text is not None:
                self._once(
                    host,
                    "unreadable",
                    "Unreadable Retry-After %r from %s: waiting %.0fs",
                    text[:100],
                    request.url,
                    self.default,
                )
            delay = self.default
        self._inc(f"retry_after/{response.status}")
        if delay > self.max:
            self.skipped.add(host)
            self._inc("retry_after/host_skipped")
            self._once(
                host,
                "too_long",
                "Skipping host %s: %s answered %d with Retry-After %.0fs, more than "
                "the most a host may ask for (%.0fs)",
                host,
                request.url,
                response.status,
                delay,
                self.max,
            )
            raise IgnoreRequest(f"Retry-After {delay:.0f}s is more than {self.max:.0f}s")
        attempts = request.meta.get(ATTEMPTS_META, 0) + 1
        if attempts > self.times:
            self._inc("retry_after/gave_up")
            logger.info(
                "Gave up %s after %d answers %d (RETRY_TIMES is %d)",
                request.url,
                attempts,
                response.status,
                self.times,
            )
            request.meta["dont_retry"] = True  # nor may RetryMiddleware hammer it
            return response
        self.crawler.signals.send_catch_log(crawler_signals.host_hold, host=host, seconds=delay)
        self._inc("retry_after/requeued")
        logger.debug(
            "%s answered %d: holding %s for %.1fs", request.url, response.status, host, delay
        )
        retry = request.replace(dont_filter=True)
        retry.meta[ATTEMPTS_META] = attempts
        return retry

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)

    def _once(self, host: str, why: str, msg: str, *args: object) -> None:
        """One INFO line per host and reason: a hostile host must not flood the log."""
        if (host, why) in self._logged:
            return
        self._logged.add((host, why))
        logger.info(msg, *args)
