"""A robots.txt's bytes made text (RFC 9309 2.2.2: bytes that are not UTF-8 percent-encoded),
exact on every input and cheap on junk; and a compressed robots.txt or page inflated without
its compressed bytes' encoding being guessed."""

from __future__ import annotations

import codecs
import gzip
import random
import sys
from types import FrameType
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.responsetypes import responsetypes
from scrapy.utils.test import get_crawler

from crawler.middlewares.compression import CountingHttpCompressionMiddleware
from crawler.middlewares.robots_requests import robots_request
from crawler.robots import decode_body


def _percent_each_byte(error: UnicodeError) -> tuple[str, int]:
    """The oracle: RFC 9309 2.2.2 read literally, each byte the UTF-8 decoder refuses as %XX."""
    assert isinstance(error, UnicodeDecodeError)
    return "".join(f"%{byte:02X}" for byte in error.object[error.start : error.end]), error.end


codecs.register_error("test-robots-percent", _percent_each_byte)


def expected(body: bytes) -> str:
    return body.decode("utf-8", "test-robots-percent")


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"Disallow: /caf\xe9/\n", "Disallow: /caf%E9/\n"),  # Latin-1
        ("Disallow: /café/特別\n".encode(), "Disallow: /café/特別\n"),  # UTF-8 as it is
        (b"/caf\xc3\xa9/\xe9\xff/\xe2\x82\xac", "/café/%E9%FF/€"),  # mixed
        (b"/x\xe2\x82", "/x%E2%82"),  # a sequence cut by the end
        (b"/x\xe2\x82/y", "/x%E2%82/y"),  # and by an ASCII byte
        (b"/\xf0\x9f\x90", "/%F0%9F%90"),
        (b"/\xed\xa0\x80/", "/%ED%A0%80/"),  # a surrogate encoded: not UTF-8
        (b"/\xc0\x80/\xe0\x80\x80", "/%C0%80/%E0%80%80"),  # overlongs
        (b"/\xf4\x90\x80\x80", "/%F4%90%80%80"),  # past U+10FFFF
        (b"\x80\xbf", "%80%BF"),  # continuation bytes alone
        (b"\\udce9 \\UDCE9 \\-\\\xe9\\", "\\udce9 \\UDCE9 \\-\\%E9\\"),  # the text's backslashes
        (b"%e9 %E9 \xe9 abcXYZ", "%e9 %E9 %E9 abcXYZ"),  # its escapes and letters kept
        (b"", ""),
    ],
)
def test_bytes_that_are_not_utf8_are_percent_encoded(body: bytes, text: str) -> None:
    assert decode_body(body) == (text, False)
    assert expected(body) == text


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"\xef\xbb\xbf/a\xe9", "/a%E9"),
        (b"\xef\xbb/a\xe9", "/a%E9"),  # a mark cut short is skipped too
        (b"\xef/a", "/a"),
        (b"\xef\xbb\xbf\xef\xbb\xbf/a", "\ufeff/a"),  # a second mark is text
        (b"\xef\xbc/a", "%BC/a"),  # the mark's first byte, then another
        (b"\xff\xfe/a", "%FF%FE/a"),  # no NUL byte: not UTF-16
    ],
)
def test_a_byte_order_mark_before_bytes_that_are_not_utf8(body: bytes, text: str) -> None:
    assert decode_body(body) == (text, False)


def test_any_bytes_decode_as_the_rfc_has_them() -> None:
    """Random bytes, and random strings of pieces that are easy to get wrong (the marks, the
    backslashes and letters the decoding works with, sequences whole, cut and invalid)."""
    rng = random.Random(9309)
    pieces = [b"\\", b"\\-", b"\\udc", b"\\UDC", b"-", b"%", b"e9", b"aZ", b"\n", b"\xc3\xa9",
              b"\xe2\x82\xac", b"\xf0\x9f\x90\x8d", b"\xed\xa0\x80", b"\xc0\x80", b"\xe2\x82",
              b"\xf0\x9f", b"\xef\xbb\xbf", b"\x80", b"\xff", b"\x00"]
    for n in range(20_000):
        if n % 2:
            body = rng.randbytes(rng.randrange(64))
        else:
            body = b"".join(rng.choices(pieces, k=rng.randrange(16)))
        assert decode_body(b"/" + body)[0] == expected(b"/" + body), body
    junk = rng.randbytes(300_000)
    assert decode_body(junk, max_size=len(junk))[0] == expected(junk)


def test_junk_costs_no_python_call_per_bad_byte() -> None:
    """A binary file served as robots.txt is about half bytes that are not UTF-8: the decoding
    stays in the codecs' C loops (a Python call per bad run cost ~190 ms of reactor time per
    500 KiB). Counted, not timed."""
    junk = random.Random(1).randbytes(100_000)
    calls = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        decode_body(junk, max_size=len(junk))
    finally:
        sys.setprofile(None)
    assert calls < 10


# --- compressed responses --------------------------------------------------------------------

ROBOTS = "User-agent: *\nDisallow: /privé/\n".encode() * 100
PAGE = '<html><head><meta charset="windows-1251"></head><body>\xe0\xe1</body></html>'.encode(
    "latin-1"
)


def _compressed_response(url: str, body: bytes, request: Request, **headers: str) -> Response:
    """A gzipped response as Scrapy's download handler makes it: its class told by the headers
    (Content-Encoding gives a plain Response) and, failing them, by the URL."""
    headers = {"Content-Encoding": "gzip", **headers}
    gzipped = gzip.compress(body)
    respcls = responsetypes.from_args(headers=headers, url=url, body=gzipped)
    return respcls(url, body=gzipped, headers=headers, request=request)


@pytest.mark.parametrize(
    ("url", "body", "headers", "cls", "encoding"),
    [
        ("http://a.example/robots.txt", ROBOTS, {}, TextResponse, "utf-8"),
        ("http://a.example/robots.txt", ROBOTS, {"Content-Type": "text/plain"}, TextResponse,
         "utf-8"),
        ("http://a.example/robots.txt", ROBOTS, {"Content-Type": "text/plain; charset=latin-1"},
         TextResponse, "cp1252"),
        ("http://a.example/p.html", PAGE, {}, HtmlResponse, "cp1251"),
        ("http://a.example/p.html", PAGE, {"Content-Type": "text/html"}, HtmlResponse, "cp1251"),
        ("http://a.example/page", PAGE, {"Content-Type": "text/html"}, HtmlResponse, "cp1251"),
    ],
)
def test_a_compressed_response_is_inflated_without_guessing_its_encoding(
    url: str, body: bytes, headers: dict[str, str], cls: type[Response], encoding: str
) -> None:
    """The encoding is the inflated body's, as Scrapy tells it; the compressed bytes' (that
    a TextResponse of a robots.txt or .html URL would guess when asked) is never asked for."""
    crawler = get_crawler()
    middleware = CountingHttpCompressionMiddleware.from_crawler(crawler)
    for request in (robots_request("http://a.example", url), Request(url)):
        response = _compressed_response(url, body, request, **headers)
        out = middleware.process_response(request, response)
        assert type(out) is cls and isinstance(out, TextResponse)
        assert out.body == body and out.encoding == encoding
        assert out.text == body.decode(encoding)
        assert b"Content-Encoding" not in out.headers
        assert (out.url, out.status, out.request) == (url, 200, request)
        if isinstance(response, TextResponse):  # Scrapy's cache of a guessed encoding
            assert response._cached_benc is None
