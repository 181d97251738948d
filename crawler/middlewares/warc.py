"""WARC capture: every response as the server sent it, written to WARC files off the reactor.

Downloader middleware at priority 950: the closest to the download handler of all the crawl's
middlewares (HttpCompressionMiddleware is at 590, DownloaderStats at 850, HttpCache at 900), so
``process_response`` sees each response first, before anything decompresses, redirects, retries
or drops it: redirects, error pages and robots.txt fetches (which the robots gate at 100 takes
out of the chain further up) are all recorded. Off unless ``WARC_ENABLED``
(``crawler.config.defaults`` says why).

What "as the server sent it" means here:

- the body is exactly what came off the wire, Content-Encoding kept (gzip stays gzip), and the
  chunked transfer coding removed, as WARC 1.1 asks;
- the status line and header section are the bytes the server sent, kept by the project's
  download handler (``crawler.download.handler``, ``RAW_HEAD_META``): the server's reason
  phrase, header names in its case and order, folded lines, the connection headers; only a
  chunked (or cut) body changes them: its ``Transfer-Encoding``/``Content-Length`` lines give
  way to a ``Content-Length`` of the body as stored (``crawler.archive.records.head_as_stored``);
- a response from another handler (no raw bytes) gets its head rebuilt from Scrapy's
  ``Headers``: the standard reason phrase, Twisted's canonical name case, no connection
  headers but a ``Content-Length`` of the body as stored;
- ``WARC-IP-Address`` is ``response.ip_address``, the peer the handler connected to.

The request record is rebuilt: the request as this middleware sees it last (every header the
middlewares above added), with the ``Host`` header Twisted adds (Twisted writes the request
itself; its bytes are not kept). Cached responses (``HttpCacheMiddleware``)
are not recorded again.

When a page's item has been through the pipelines (``item_scraped``), a ``metadata`` record
tells its outlinks, its requisites (``embed``, with a site's ``[requisites]``), fetch time,
the politeness delay the frontier applied after it, and the
near-duplicate verdict, and the page's usage preferences (``usage``: each signal as read,
``usage-denied``: the uses they refuse). A page whose preferences refuse archiving
(``noarchive``), or every purpose of the crawl, is not recorded at all (stat
``warc/usage_skipped``; ``crawler.robots.usage``). Everything is written by
:class:`~crawler.archive.thread.ArchiveThread`;
at the end of the crawl its files are closed (renamed from ``.open``) and indexed (CDXJ), and
packaged as a WACZ with ``WARC_WACZ``.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime
from functools import partial
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from crawler import signals as crawler_signals
from crawler.archive.archiver import Archiver
from crawler.archive.cdxj import write_cdxj
from crawler.archive.config import WarcConfig
from crawler.archive.files import RotatingWarcFiles
from crawler.archive.naming import WarcNamer, safe_part
from crawler.archive.records import (
    MARKDOWN_TYPE,
    TEXT_TYPE,
    Exchange,
    head_as_stored,
    warcinfo,
)
from crawler.archive.recovery import recover_open_files
from crawler.archive.thread import ArchiveThread
from crawler.archive.wacz import package_wacz
from crawler.backends.registry import build_backend
from crawler.crawldb.api import crawldb_path
from crawler.meta import EMBEDS_META, RAW_HEAD_META, READ_UP_TO_FLAG, ROBOTS_META
from crawler.robots import robots_token
from crawler.robots.usage import page_decision, purposes_of

logger = logging.getLogger(__name__)

RECORD_META = "warc_response_id"  # the WARC-Record-ID of the last response of a request
_DATE_META = "warc_response_date"  # and its WARC-Date (the page's conversion record's too)
_FETCH_META = "warc_fetch"  # what the fetch's signals said (duration, delay), for metadata
_DROPPED_HEADERS = {b"content-length", b"transfer-encoding", b"connection", b"keep-alive"}


def request_head(request: Request) -> bytes:
    """The request line and header section, as Twisted's client sends them."""
    parts = urlsplit(request.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{request.method} {target} HTTP/1.1".encode("latin-1")]
    if b"Host" not in request.headers:
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        lines.append(b"Host: " + (f"{host}:{parts.port}" if parts.port else host).encode("idna"))
    for name, values in request.headers.items():
        lines.extend(name + b": " + value for value in values)
    if request.body:
        lines.append(b"Content-Length: %d" % len(request.body))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def truncation(response: Response) -> str:
    """Why the body of ``response`` is cut short, as ``WARC-Truncated`` says it (WARC 1.1
    section 5.13), or "" when it came whole: ``length``, the download was stopped once its
    reader had enough (a robots.txt past 500 KiB: flag ``download_stopped``); ``disconnect``,
    the connection dropped before the Content-Length came (flag ``dataloss``, kept with
    ``DOWNLOAD_FAIL_ON_DATALOSS`` off). A body the server ended by closing the connection (flag
    ``partial``: no Content-Length, not chunked) ended the way such a body ends: whole."""
    flags = response.flags
    if READ_UP_TO_FLAG in flags:
        return "length"
    return "disconnect" if "dataloss" in flags else ""


def response_head(response: Response, raw: bytes | None = None) -> bytes:
    """Status line and header section of ``response``: ``raw``, the bytes the server sent
    (the download handler's ``RAW_HEAD_META``), when there are some; else rebuilt from
    Scrapy's ``Headers`` (see the module docstring)."""
    if raw:
        # the length as stored: a body cut short (:func:`truncation`), or one the server
        # ended by closing the connection ("partial": its head gave no length)
        cut = "partial" in response.flags or bool(truncation(response))
        return head_as_stored(raw, len(response.body), rewrite_length=cut)
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    protocol = response.protocol or "HTTP/1.1"
    lines = [f"{protocol} {response.status} {phrase}".rstrip().encode("latin-1")]
    for name, values in response.headers.items():
        if name.lower() in _DROPPED_HEADERS:
            continue
        lines.extend(name + b": " + value for value in values)
    lines.append(b"Content-Length: %d" % len(response.body))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def capture(request: Request, response: Response) -> Exchange:
    ip = getattr(response, "ip_address", None)
    return Exchange(
        url=response.url,
        request_head=request_head(request),
        request_body=request.body or b"",
        response_head=response_head(response, request.meta.pop(RAW_HEAD_META, None)),
        body=response.body,
        status=response.status,
        date=datetime.now(UTC),
        ip=str(ip) if ip is not None else None,
        truncated=truncation(response),
    )


def digest_index_path(crawler: Crawler, config: WarcConfig, directory: Path) -> str:
    """``WARC_DIGEST_PATH``; else in JOBDIR, beside the crawl database, or in the WARC
    directory: where the next crawl of the site looks."""
    settings = crawler.settings
    if config.digest_path:
        return config.digest_path
    if settings.get("JOBDIR"):
        return os.path.join(settings["JOBDIR"], "warc-digests.sqlite")
    db_path = crawldb_path(settings, getattr(crawler.spidercls, "name", None) or "crawl")
    if db_path:
        stem = db_path[: -len(".sqlite")] if db_path.endswith(".sqlite") else db_path
        return f"{stem}-warc-digests.sqlite"
    return str(directory / "digests.sqlite")


def _warcinfo_fields(crawler: Crawler) -> list[tuple[str, str]]:
    settings = crawler.settings
    return [
        ("software", "crawler (Scrapy project; FastWARC)"),
        ("format", "WARC File Format 1.1"),
        (
            "conformsTo",
            "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        ),
        ("isPartOf", getattr(crawler.spidercls, "name", None) or "crawl"),
        ("hostname", socket.gethostname()),
        ("http-header-user-agent", str(settings.get("USER_AGENT") or "")),
        ("robots", "obey"),
    ]


class WarcCaptureMiddleware:
    """See the module docstring. Enabled by ``WARC_ENABLED``; priority 950."""

    def __init__(self, crawler: Crawler, config: WarcConfig) -> None:
        self.crawler = crawler
        settings = crawler.settings
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        self.directory = Path(config.directory_of(site))
        self.prefix = config.prefix or site
        self.metadata = config.metadata
        self.token = robots_token(settings)
        self.purposes = purposes_of(settings)
        self.cdxj = config.cdxj
        self.wacz = config.wacz
        fields = _warcinfo_fields(crawler)
        self.namer = WarcNamer(self.prefix)
        # a killed worker's open files on this host: cut after their last whole record, renamed
        self.recovered = (
            recover_open_files(self.directory, self.namer.host) if self.directory.is_dir() else []
        )
        if self.recovered:
            logger.info(
                "WARC: finished %d open files of stopped crawls: %s",
                len(self.recovered),
                ", ".join(p.name for p in self.recovered),
            )
        files = RotatingWarcFiles(
            self.directory,
            self.namer,
            lambda name, date: warcinfo(name, fields, date),
            max_size=config.max_size,
            fsync=True,  # once per closed file: a power cut must not leave a renamed, empty one
        )
        digests = build_backend(
            crawler,
            "warc_digest_index",
            path=digest_index_path(crawler, config, self.directory),
        )
        self.archiver = Archiver(
            files,
            digests,
            min_revisit_size=config.revisit_min_size,
        )
        self.thread = ArchiveThread(self.archiver)
        self.closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcCaptureMiddleware:
        config = WarcConfig.from_settings(crawler.settings)  # built once, read nowhere else
        if not config.enabled:
            raise NotConfigured  # off by default, without a warning on every crawl
        middleware = cls(crawler, config)
        connect = crawler.signals.connect
        connect(middleware.spider_closed, signals.spider_closed)
        connect(middleware.fetch_finished, crawler_signals.fetch_finished)
        connect(middleware.fetch_completed, crawler_signals.fetch_completed)
        connect(middleware.item_converted, signals.item_scraped)
        if middleware.metadata:
            connect(middleware.item_scraped, signals.item_scraped)
        return middleware

    # -- capture ---------------------------------------------------------------------------

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        if self.closed or "cached" in response.flags or request.meta.get("dont_archive"):
            return response
        if not request.meta.get(ROBOTS_META) and not self._usage_archives(request, response):
            return response
        exchange = capture(request, response)
        request.meta[RECORD_META] = exchange.response_id
        request.meta[_DATE_META] = exchange.date
        self.thread.submit(partial(self.archiver.archive, exchange))
        return response

    def _usage_archives(self, request: Request, response: Response) -> bool:
        """Whether the page's usage preferences let it be archived (README "Usage
        preferences"): not when they refuse archiving (``noarchive``) or every purpose of the
        crawl. The decision is the page's one, made here first, before anything parses it."""
        decision = page_decision(response, request.meta, self.token, self.purposes)
        if decision.archive:
            return True
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value("warc/usage_skipped")
        return False

    # -- metadata --------------------------------------------------------------------------

    def fetch_finished(
        self, request: Request, outcome: Any, duration: float | None, *args: Any, **kwargs: Any
    ) -> None:
        if duration is not None:
            request.meta.setdefault(_FETCH_META, {})["fetch-time"] = f"{duration:.3f}"

    def fetch_completed(
        self, request: Request, host: str, delay: float | None, outcome: Any
    ) -> None:
        if delay is not None:
            request.meta.setdefault(_FETCH_META, {})["politeness-delay"] = f"{delay:.3f}"

    def item_scraped(self, item: Any, response: Response, spider: Spider | None = None) -> None:
        record_id = response.meta.get(RECORD_META) if response is not None else None
        if record_id is None or self.closed:
            return
        fields: list[tuple[str, str]] = []
        for name, value in (response.meta.get(_FETCH_META) or {}).items():
            fields.append((name, value))
        duplicate_of = _field(item, "duplicate_of")
        if duplicate_of:
            fields.append(("near-duplicate-of", str(duplicate_of)))
            similarity = _field(item, "similarity")
            if similarity is not None:
                fields.append(("similarity", str(similarity)))
        for link in _field(item, "outlinks") or ():
            url = link.get("url") if isinstance(link, dict) else link
            if url:
                fields.append(("outlink", str(url)))
        for url in response.meta.get(EMBEDS_META) or ():  # its requisites ([requisites])
            fields.append(("embed", str(url)))
        for signal in _field(item, "usage") or ():  # its usage preferences, as read
            fields.append(("usage", str(signal)))
        for use in _field(item, "usage_denied") or ():
            fields.append(("usage-denied", str(use)))
        if fields:
            self.thread.submit(
                partial(self.archiver.metadata, response.url, record_id, datetime.now(UTC), fields)
            )

    def item_converted(self, item: Any, response: Response, spider: Spider | None = None) -> None:
        """The page's Markdown (else its main text, else its text) as a conversion record
        referring to its response record: Common Crawl's WET, in the same files.

        Dated as its response record (as Common Crawl dates a WET record): a replay tool that
        indexes every record (pywb) then finds the page's HTML first at its own time and
        never a text that is newer than it, which it would serve as the latest capture."""
        record_id = response.meta.get(RECORD_META) if response is not None else None
        if record_id is None or self.closed:
            return
        date = response.meta.get(_DATE_META) or datetime.now(UTC)
        markdown = _field(item, "markdown")
        if markdown:
            text, content_type = str(markdown), MARKDOWN_TYPE
        else:
            text = str(_field(item, "main_text") or _field(item, "text") or "")
            content_type = TEXT_TYPE
        if text:
            self.thread.submit(partial(
                self.archiver.conversion, response.url, record_id, date, text, content_type,
            ))

    # -- the end ---------------------------------------------------------------------------

    def spider_closed(self, spider: Spider, reason: str) -> None:
        """Write what is queued, close the files (renamed), index them, count them."""
        self.closed = True
        self.thread.close()
        files = self.archiver.files.finished
        stats = self.crawler.stats
        if stats is not None:
            for kind, count in self.archiver.counts.items():
                stats.set_value(f"warc/records/{kind}", count)
            stats.set_value("warc/files", len(files))
            stats.set_value("warc/files_recovered", len(self.recovered))
            stats.set_value("warc/bytes_written", self.archiver.files.bytes_written)
            stats.set_value("warc/payload_bytes", self.archiver.payload_bytes)
            stats.set_value("warc/revisit_payload_bytes", self.archiver.revisit_payload_bytes)
        index: Path | None = None
        if files and self.cdxj:
            first = files[0].name[: -len(".warc.gz")]
            target = self.directory / f"{first}-{safe_part(reason)}.cdxj"
            try:
                index = write_cdxj(files, target)
            except Exception:  # an index can be made later (cdxj-indexer); the files are whole
                logger.exception("WARC: could not index %s", self.directory)
        if files and self.wacz:
            self._package(files, reason, index)
        logger.info(
            "WARC: %d files in %s (%d bytes, records: %s)",
            len(files),
            self.directory,
            self.archiver.files.bytes_written,
            dict(self.archiver.counts),
        )

    def _package(self, files: list[Path], reason: str, index: Path | None) -> None:
        """``WARC_WACZ``: this crawl's files as one WACZ beside them, with the index just
        written (``index``) when there is one."""
        first = files[0].name[: -len(".warc.gz")]
        target = self.directory / f"{first}-{safe_part(reason)}.wacz"
        site = getattr(self.crawler.spidercls, "name", None) or "crawl"
        try:
            summary = package_wacz(
                files, target, title=f"{site} crawl ({reason})",
                indexes=[index] if index is not None else (),
            )
        except Exception:  # `scrapy wacz DIR` packages them later; the files are whole
            logger.exception("WARC: could not package %s as WACZ", self.directory)
            return
        if self.crawler.stats is not None:
            self.crawler.stats.set_value("warc/wacz_bytes", summary.bytes)
        logger.info(
            "WACZ: %s (%d WARC files, %d pages, %d bytes)",
            summary.path, summary.warcs, summary.pages, summary.bytes,
        )


def _field(item: Any, name: str) -> Any:
    try:
        return item[name]
    except (KeyError, TypeError):
        return getattr(item, name, None)
