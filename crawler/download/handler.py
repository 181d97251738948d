"""The HTTP(S) download handler: Scrapy's Twisted one, with limits a hostile server cannot outrun.

Stock limits and where they fall short:

- Twisted's client limits one header line (16 KiB) but not how many lines: an endless header
  stream is read until ``DOWNLOAD_TIMEOUT``, gigabytes in memory. Here a response's header
  section is capped at 256 lines and 256 KiB (:class:`Limits`).
- A body trickled a byte a second holds a host slot until ``DOWNLOAD_TIMEOUT``. Here a response
  (headers and body) must arrive at ``DOWNLOAD_MIN_RATE`` bytes/s on average, counted from its
  first byte, once ``min_rate_grace`` seconds (a ``TUNING`` knob) have passed. Waiting for the
  first byte is left to ``DOWNLOAD_TIMEOUT``: a page that is slow to generate is not a slow
  transfer.
- ``DOWNLOAD_MAXSIZE`` and ``DOWNLOAD_TIMEOUT`` (total time) are Scrapy's; here they are also
  counted in ``limits/download_size`` and ``limits/download_time``.
- Scrapy drops a body over ``DOWNLOAD_MAXSIZE`` whole. A request whose reader needs only the
  beginning of it (:func:`~crawler.download.robots_request.read_up_to`: robots.txt, parsed up to
  500 KiB) is stopped once that much came instead, and its response goes on with it (flag
  ``download_stopped``), however long the body (the compression middleware inflates it no
  further either).

It also keeps each response's header section as the server sent it (``RAW_HEAD_META``), which
Scrapy's ``Headers`` cannot give back (they lose the reason phrase, the names' case, folded
lines and the connection headers), for the WARC capture.

Why this handler and not Scrapy 2.19's aiohttp one, which limits headers: the address-safety
middleware checks the address Scrapy's caching resolver gives, which is the address the Twisted
handler connects to; aiohttp resolves names itself, so a name could be checked as public and
then connect somewhere private (DNS rebinding).

A limit that fires ends the download with :class:`~crawler.download.limits.DownloadLimitExceeded`
(an
``IgnoreRequest``: not retried, not logged as an error) after counting it (``limits/<name>``,
one INFO line per host and limit).

A stop (Ctrl-C, scrapyd's cancel: the ``crawl_stopping`` signal) cuts every download in flight
at once, and refuses the ones that arrive after it: Scrapy's own stop waits for them, up to
``DOWNLOAD_TIMEOUT`` with a silent server. They fail with
:class:`~crawler.download.limits.StoppedAtShutdown` (an ``IgnoreRequest``: not retried, not a
failure of
the host) and carry ``meta[STOPPED_META]``, so the scheduler hands their leases back.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from time import monotonic
from typing import Any

from scrapy import Request, signals
from scrapy.core.downloader.handlers.http11 import (
    HTTP11DownloadHandler,
    _LenientHTTP11ClientFactory,
    _LenientHTTP11ClientProtocol,
    _LenientHTTPClientParser,
)
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadFailedError,
    DownloadTimeoutError,
    StopDownload,
)
from scrapy.http import Response
from scrapy.utils.asyncio import is_asyncio_available
from twisted.web._newclient import HEADER, STATUS

from crawler import signals as crawler_signals
from crawler.config import defaults
from crawler.config.tuning import knob_default
from crawler.config.typed import FeatureConfig, knob, setting
from crawler.download.limits import DownloadLimitExceeded, StoppedAtShutdown, limit_log
from crawler.download.robots_request import read_up_to
from crawler.meta import RAW_HEAD_META, STOPPED_META
from crawler.net.addresses import AddressPolicy, policy_from_settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What one response may cost: header lines (Twisted counts none) and bytes of its header
    section (constants: no real server comes near them), and the minimum transfer rate after a
    grace period (settings)."""

    max_headers: int = 256
    max_header_bytes: int = 256 * 1024
    min_rate: float = defaults.DOWNLOAD_MIN_RATE
    grace: float = knob_default("min_rate_grace")

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        config = RateConfig.from_settings(settings)
        return cls(min_rate=config.min_rate, grace=config.grace)


class RateConfig(FeatureConfig):
    """The slowest a response may arrive, once its grace (a ``TUNING`` knob) is over."""

    min_rate: float = setting("DOWNLOAD_MIN_RATE")
    grace: float = knob("min_rate_grace")


class _Exceeded(Exception):
    """Raised inside the response parser; Twisted fails the request with it (ResponseFailed)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.detail = detail


class _LimitedParser(_LenientHTTPClientParser):
    """Counts the header section's lines, bytes and arrival rate, and keeps its lines as they
    came (``current_head``, below). Set up by :class:`_LimitedProtocol` (it replaces the class
    of the parser Twisted creates)."""

    _limits: Limits
    _first: float | None
    _received: int
    _lines: int
    _header_bytes: int
    _raw: list[bytes]
    # The header section of the response whose headers are being announced, byte for byte:
    # status line with the server's reason phrase, header names in the server's case, in its
    # order, folded lines and connection headers included. Set only while Twisted hands the
    # response over (allHeadersReceived), during which Scrapy sends ``headers_received`` with
    # the Scrapy request, synchronously, on the reactor thread: :class:`_BodyWatch` moves it
    # into the request's meta (``RAW_HEAD_META``) for the WARC capture.
    current_head: bytes | None = None

    def dataReceived(self, data: bytes) -> None:
        if self.state in (STATUS, HEADER):
            now = monotonic()
            if self._first is None:
                self._first = now
            self._received += len(data)
            self._check_rate(now)
        super().dataReceived(data)  # type: ignore[no-untyped-call]

    def _check_rate(self, now: float) -> None:
        limits = self._limits
        assert self._first is not None
        elapsed = now - self._first
        if (
            limits.min_rate
            and elapsed > limits.grace
            and self._received / elapsed < limits.min_rate
        ):
            raise _Exceeded(
                "min_rate",
                f"headers at {self._received / elapsed:.0f} B/s after {elapsed:.1f}s "
                f"(DOWNLOAD_MIN_RATE is {limits.min_rate:.0f})",
            )

    def lineReceived(self, line: bytes) -> None:
        self._lines += 1
        self._header_bytes += len(line) + 2
        limits = self._limits
        if limits.max_headers and self._lines > limits.max_headers + 1:  # + the status line
            raise _Exceeded(
                "header_count",
                f"more than {limits.max_headers} header lines",
            )
        if limits.max_header_bytes and self._header_bytes > limits.max_header_bytes:
            raise _Exceeded(
                "header_bytes",
                f"more than {limits.max_header_bytes} bytes of headers",
            )
        self._raw.append(line)  # as received: the delimiter is LF, a CR before it is kept
        super().lineReceived(line)

    def allHeadersReceived(self) -> None:
        _LimitedParser.current_head = b"\n".join(self._raw) + b"\n"
        try:
            super().allHeadersReceived()  # type: ignore[no-untyped-call]
        finally:
            _LimitedParser.current_head = None
            self._raw = []  # a 1xx answer is skipped: the next status line starts afresh


class _LimitedProtocol(_LenientHTTP11ClientProtocol):
    limits: Limits = Limits()

    def request(self, request: Any) -> Any:
        d = super().request(request)
        parser = self._parser
        if parser is not None:
            # Same trick as Scrapy's lenient parser: _LimitedParser only adds counters.
            parser.__class__ = _LimitedParser
            parser._limits = self.limits
            parser._first = None
            parser._received = parser._lines = parser._header_bytes = 0
            parser._raw = []
        return d


class _LimitedFactory(_LenientHTTP11ClientFactory):
    limits: Limits = Limits()
    policy: AddressPolicy = AddressPolicy()
    on_refused: Any = None

    def buildProtocol(self, addr: Any) -> _LimitedProtocol | None:
        # The address the connection was really made to: a name that resolved to a public
        # address when the middleware checked it may resolve elsewhere now (DNS rebinding).
        host, port = getattr(addr, "host", None), getattr(addr, "port", None)
        reason = self.policy.refusal(host, port) if isinstance(host, str) else ""
        if reason:
            if self.on_refused is not None:
                self.on_refused(host, port, reason)
            return None  # Twisted closes the connection: nothing is sent
        protocol = _LimitedProtocol(self._quiescentCallback)  # type: ignore[no-untyped-call]
        protocol.limits = self.limits
        return protocol


@dataclass
class _Body:
    first: float
    received: int = 0
    size_counted: bool = False
    stopped: str = ""


class _BodyWatch:
    """One per crawl (http and https get a handler each, the signals are the crawl's): watches
    body bytes through Scrapy's ``bytes_received`` signal, the public way to stop a download."""

    def __init__(self, crawler: Crawler, limits: Limits) -> None:
        self.limits = limits
        self.maxsize = crawler.settings.getint("DOWNLOAD_MAXSIZE")
        self.log = limit_log(crawler)
        self.bodies: weakref.WeakKeyDictionary[Request, _Body] = weakref.WeakKeyDictionary()
        crawler.signals.connect(self._headers_received, signals.headers_received)
        crawler.signals.connect(self._bytes_received, signals.bytes_received)

    @classmethod
    def of(cls, crawler: Crawler, limits: Limits) -> _BodyWatch:
        watch = getattr(crawler, "_crawler_body_watch", None)
        if watch is None:
            watch = cls(crawler, limits)
            crawler._crawler_body_watch = watch  # type: ignore[attr-defined]
        return watch

    def _maxsize(self, request: Request) -> int:
        return int(request.meta.get("download_maxsize", self.maxsize) or 0)

    def _headers_received(
        self, headers: Any, body_length: Any, request: Request, spider: Any = None
    ) -> None:
        raw = _LimitedParser.current_head
        if raw is not None:
            request.meta[RAW_HEAD_META] = raw  # popped by the WARC capture, if any
        maxsize = self._maxsize(request)
        # body_length is Twisted's UNKNOWN_LENGTH (a str) without a Content-Length
        if maxsize and isinstance(body_length, int) and body_length > maxsize:
            # Scrapy cancels it right after this signal; this counts it and marks it as ours.
            self._body(request).size_counted = True
            self.log.fire(
                "download_size",
                request.url,
                f"Content-Length {body_length} > DOWNLOAD_MAXSIZE ({maxsize})",
            )

    def _body(self, request: Request) -> _Body:
        body = self.bodies.get(request)
        if body is None:
            body = self.bodies[request] = _Body(monotonic())
        return body

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        now = monotonic()
        body = self._body(request)
        body.received += len(data)
        enough = read_up_to(request)
        if enough is not None and body.received >= enough:
            raise StopDownload(fail=False)  # the response goes on with the bytes that came
        maxsize = self._maxsize(request)
        if maxsize and body.received > maxsize and not body.size_counted:
            body.size_counted = True  # Scrapy cancels it right after this signal
            self.log.fire(
                "download_size", request.url, f"body over DOWNLOAD_MAXSIZE ({maxsize} bytes)"
            )
        elapsed = now - body.first
        rate = self.limits.min_rate
        if rate and elapsed > self.limits.grace and body.received / elapsed < rate:
            body.stopped = (
                f"body at {body.received / elapsed:.0f} B/s after {elapsed:.1f}s "
                f"(DOWNLOAD_MIN_RATE is {rate:.0f})"
            )
            raise StopDownload(fail=True)


# The request's meta keys by which Scrapy sizes a download (and its decompression).
_SIZE_KEYS = ("download_maxsize", "download_warnsize")


def _limit_cause(exc: BaseException) -> _Exceeded | None:
    """The parser's ``_Exceeded`` inside Scrapy's and Twisted's wrappers, if it is one."""
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop()
        if isinstance(current, _Exceeded):
            return current
        for reason in getattr(current, "reasons", None) or ():
            value = getattr(reason, "value", None)
            if isinstance(value, BaseException):
                seen.append(value)
        if current.__cause__ is not None:
            seen.append(current.__cause__)
    return None


class LimitedHTTPDownloadHandler(HTTP11DownloadHandler):
    """See the module docstring. Enabled for http and https in ``DOWNLOAD_HANDLERS``."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        limits = Limits.from_settings(crawler.settings)
        stats = crawler.stats

        def refused(host: str, port: int | None, reason: str) -> None:
            if stats is not None:
                stats.inc_value("address_safety/refused/at_connect")
            logger.warning("Refused a connection to %s:%s: a %s address", host, port, reason)

        self._pool._factory = type(
            "Factory",
            (_LimitedFactory,),
            {
                "limits": limits,
                "policy": policy_from_settings(crawler.settings),
                "on_refused": staticmethod(refused),
            },
        )
        self._watch = _BodyWatch.of(crawler, limits)
        self._log = limit_log(crawler)
        self._timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
        self._stopping = False
        self._in_flight: set[asyncio.Future[Response]] = set()
        crawler.signals.connect(self._stop, crawler_signals.crawl_stopping)

    def _stop(self) -> None:
        """The crawl is stopping: cut the downloads in flight (their connections are closed);
        any that arrives from now on is refused before it connects."""
        self._stopping = True
        for download in list(self._in_flight):
            download.cancel()

    def _stopped(self, request: Request) -> StoppedAtShutdown:
        request.meta[STOPPED_META] = True
        return StoppedAtShutdown(f"download cut short: the crawl is stopping ({request.url})")

    async def download_request(self, request: Request) -> Response:
        if self._stopping:
            raise self._stopped(request)
        if not is_asyncio_available():  # another reactor: a stop waits for the download
            return await self._download(request)
        # its own task, so that a stop cancels this download alone: the cancel reaches the
        # Twisted request through Deferred.asFuture, which closes the connection
        download = asyncio.ensure_future(self._download(request))
        self._in_flight.add(download)
        try:
            return await download
        except asyncio.CancelledError:
            if not (self._stopping and download.cancelled()):
                raise  # the caller itself was cancelled
            raise self._stopped(request) from None
        finally:
            self._in_flight.discard(download)

    async def _download(self, request: Request) -> Response:
        if read_up_to(request) is None:
            return await self._transfer(request)
        # Scrapy cancels a body over DOWNLOAD_MAXSIZE (at once when its Content-Length says
        # so), and warns over DOWNLOAD_WARNSIZE: neither may happen to a transfer that the
        # body watch stops at read_up_to. Middlewares after this handler may read the same
        # keys: they are put back for them.
        meta = request.meta
        saved = {key: meta[key] for key in _SIZE_KEYS if key in meta}
        meta.update(dict.fromkeys(_SIZE_KEYS, 0))
        try:
            return await self._transfer(request)
        finally:
            for key in _SIZE_KEYS:
                meta.pop(key, None)
            meta.update(saved)

    async def _transfer(self, request: Request) -> Response:
        try:
            return await super().download_request(request)
        except DownloadTimeoutError:
            timeout = request.meta.get("download_timeout") or self._timeout
            self._log.fire(
                "download_time", request.url, f"longer than {timeout}s (DOWNLOAD_TIMEOUT)"
            )
            raise
        except DownloadFailedError as exc:
            cause = _limit_cause(exc)
            if cause is None:
                raise
            self._log.fire(cause.name, request.url, cause.detail)
            raise DownloadLimitExceeded(cause.name, cause.detail) from exc
        except DownloadCancelledError:
            body = self._watch.bodies.get(request)
            if body is None or not body.size_counted:
                raise
            # Scrapy's own DOWNLOAD_MAXSIZE cancel: a limit, not an error to retry or report.
            raise DownloadLimitExceeded("download_size", "over DOWNLOAD_MAXSIZE") from None
        except StopDownload:
            body = self._watch.bodies.get(request)
            if body is None or not body.stopped:
                raise
            self._log.fire("min_rate", request.url, body.stopped)
            raise DownloadLimitExceeded("min_rate", body.stopped) from None
