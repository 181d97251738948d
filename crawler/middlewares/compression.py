"""Scrapy's HttpCompressionMiddleware, with decompression bombs counted as a limit.

Scrapy already stops decompressing at ``DOWNLOAD_MAXSIZE`` and drops the response with a
warning; this adds the ``limits/decompressed_size`` stat and the limits' INFO line, so a
report of what hostile servers did to a crawl is complete.

A response whose reader needs only the beginning of the body
(:func:`~crawler.download.robots_request.read_up_to`: robots.txt, parsed up to 500 KiB) is
inflated up to there and goes on with it, however far the rest would inflate: a robots.txt
gzipped from 20 MB is read like one sent plain (RFC 9309 2.5), and a decompression bomb costs
500 KiB, not ``DOWNLOAD_MAXSIZE``, nor the host (it is read as the junk it is: no rules).
Stacked codings (``Content-Encoding: gzip, br``) are decoded layer by layer, each up to there:
what comes out is at most those 500 KiB however many layers there are, and a body an inner
layer stopped is flagged as the beginning of the file (``READ_UP_TO_FLAG``), as a download
stopped there is, so its reader drops the line the cut split.
"""

from __future__ import annotations

import zlib

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.httpcompression import (
    HttpCompressionMiddleware,
    _DecompressionMaxSizeExceeded,
)
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.responsetypes import responsetypes
from scrapy.statscollectors import StatsCollector
from scrapy.utils._compression import brotli, zstd

from crawler.download.limits import limit_log
from crawler.download.robots_request import read_up_to
from crawler.meta import READ_UP_TO_FLAG
from crawler.middlewares.sitemaps_reading import inflate


class CountingHttpCompressionMiddleware(HttpCompressionMiddleware):
    """See the module docstring; it takes the stock middleware's place (priority 590)."""

    def __init__(self, stats: StatsCollector | None = None, *, crawler: Crawler | None = None):
        super().__init__(stats, crawler=crawler)
        self.crawler = crawler

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        encoded = bool(response.headers.getlist("Content-Encoding"))
        if encoded and isinstance(response, TextResponse) and request.method != "HEAD":
            response = _still_encoded(response)
        enough = read_up_to(request)
        if enough is not None and encoded:
            return self._beginning(response, enough)
        try:
            return super().process_response(request, response)
        except IgnoreRequest as exc:
            if isinstance(exc.__cause__, _DecompressionMaxSizeExceeded) and self.crawler:
                limit_log(self.crawler).fire(
                    "decompressed_size",
                    request.url,
                    f"{len(response.body)} compressed bytes expand past DOWNLOAD_MAXSIZE",
                )
            raise

    def _beginning(self, response: Response, size: int) -> Response:
        """The response with its body's first ``size`` bytes decoded (all of it when shorter);
        an encoding it cannot decode stays, as Scrapy's own leaves it."""
        to_decode, to_keep = self._split_encodings(response.headers.getlist("Content-Encoding"))
        body = response.body
        flags = response.flags
        for n, encoding in enumerate(to_decode, 1):
            body = _first_bytes(body, encoding, size)
            if n < len(to_decode) and len(body) >= size and READ_UP_TO_FLAG not in flags:
                # the next layer decodes this one's beginning: what it gives may be shorter
                # than ``size`` and still end where the file does not
                flags = [*flags, READ_UP_TO_FLAG]
        if to_keep:
            self._warn_unknown_encoding(response, to_keep)
            response.headers["Content-Encoding"] = to_keep
        else:
            del response.headers["Content-Encoding"]
        respcls = responsetypes.from_args(headers=response.headers, url=response.url, body=body)
        kwargs: dict[str, object] = {"body": body, "flags": flags}
        if issubclass(respcls, TextResponse):
            kwargs["encoding"] = None
        return response.replace(cls=respcls, **kwargs)


def _still_encoded(response: TextResponse) -> Response:
    """``response`` as a plain Response, its body still compressed: the decoded one's class
    and encoding are told afresh either way (``encoding=None``), but ``replace`` asks the
    original for each attribute it has, and a TextResponse asked for its encoding guesses
    that of the compressed bytes: ~0.25 ms of CPU for a 2.5 KB robots.txt, which Scrapy's
    download handler makes a TextResponse (its URL says text), as it does an .html page
    (``bench/robots_parse.py``)."""
    return Response(**{name: getattr(response, name) for name in Response.attributes})


def _first_bytes(body: bytes, encoding: bytes, size: int) -> bytes:
    """The first ``size`` bytes (at most) ``body`` decodes to under ``encoding`` (one Scrapy
    decodes): decoding stops there. A stream cut short gives what it holds; one that decodes
    to nothing raises, as with Scrapy's decoders."""
    if encoding in (b"gzip", b"x-gzip"):
        return inflate(body, size)
    if encoding == b"deflate":
        try:
            return zlib.decompressobj().decompress(body, size)
        except zlib.error:  # raw deflate, as some servers send it (Scrapy reads it too)
            return zlib.decompressobj(-zlib.MAX_WBITS).decompress(body, size)
    if encoding == b"br":
        return bytes(brotli.Decompressor().process(body, output_buffer_limit=size)[:size])
    return _unzstd_first(body, size)


def _unzstd_first(body: bytes, size: int) -> bytes:
    """``_first_bytes`` of zstd: frame after frame (a file compressed in parallel, pzstd's, is
    several, which Scrapy's reader reads through too), until ``size`` bytes or the end."""
    out = bytearray()
    while body and len(out) < size:
        frame = zstd.ZstdDecompressor()
        out += frame.decompress(body, max_length=size - len(out))
        if not frame.eof:  # the limit reached, or the stream cut short
            break
        body = frame.unused_data
    return bytes(out)
