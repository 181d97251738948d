"""The meta-refresh middleware decodes only a page's start (crawler/middlewares/redirect.py) and
finds exactly the refresh it finds in the whole page decoded as every reader of a page decodes
it (:func:`crawler.content.document.decode_html`): same interval, same URL (base href included),
for every way a page declares its encoding, multi-byte characters cut at the prefix's end, and
pages that declare none. A crawl then follows a refresh of a big page. How the refresh is read
is tests/test_vectors_metarefresh.py's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse

from crawler.content.document import decode_html
from crawler.content.encoding import transport_encoding
from crawler.content.refresh import page_refresh
from crawler.middlewares.redirect import meta_refresh
from crawler.net.weburl import request_url
from tests.crawling import PROJECT, crawl_command, loopback_settings, run_crawl, serve_pages

REFRESH = '<meta http-equiv="refresh" content="3; url=next/page.html">'


def _page(head: str, filler: str, size: int, refresh_at: int = 0) -> str:
    body = (filler * (size // len(filler) + 1))[:size]
    if refresh_at:
        body = body[:refresh_at] + REFRESH + body[refresh_at:]
        return f"<html><head>{head}</head><body><p>{body}</p></body></html>"
    return f"<html><head>{head}{REFRESH}</head><body><p>{body}</p></body></html>"


CASES = [
    # (Content-Type header, head, filler, encoding of the bytes, BOM)
    ("text/html; charset=utf-8", "", "Grüße aus Köln, 東京 and € ", "utf-8", b""),
    ("text/html", '<meta charset="utf-8">', "ø東€𝄞 ", "utf-8", b""),
    ("text/html", '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">',
     "caf\u00e9 cr\u00e8me ", "latin-1", b""),
    ("text/html", "", "ascii only text ", "utf-8", b""),  # nothing declared: the stock path
    ("text/html", "", "plain ", "utf-8", b"\xef\xbb\xbf"),  # a BOM
    ("text/html", "", "wide ", "utf-16-le", b"\xff\xfe"),
    ("text/html; charset=utf-16be", "", "wide, no BOM ", "utf-16-be", b""),  # no ASCII bytes
    ("text/html; charset=utf-8", '<base href="http://example.com/docs/">', "ü ", "utf-8", b""),
    ("text/html; charset=shift_jis", "", "日本語のテキスト ", "shift_jis", b""),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("size", [100, 4000, 16_000, 16_430, 200_000])
@pytest.mark.parametrize("refresh_at", [0, 3500, 4090, 5000])
def test_the_refresh_of_the_whole_page(case: tuple[str, str, str, str, bytes], size: int,
                                    refresh_at: int) -> None:
    content_type, head, filler, encoding, bom = case
    page = _page(head, filler, size, refresh_at if refresh_at < size else 0)
    body = bom + page.encode(encoding)
    for cut in (0, 1, 2, 3):  # the prefix ends inside a multi-byte character
        data = body[: len(body) - cut] if cut else body
        response = HtmlResponse("http://example.com/a/b.html", body=data,
                                headers={"Content-Type": content_type})
        text = decode_html(data, transport_encoding(content_type))
        whole = page_refresh(text, "http://example.com/a/b.html", ("noscript",))
        expected = whole and (whole[0], request_url(whole[1])[0])
        assert meta_refresh(response, ("noscript",)) == expected
        assert (whole is None) == (text.find(REFRESH) >= 4096)  # looked for in 4,096 characters


HOST = "127.0.0.43"


@pytest.fixture(scope="module")
def site() -> Iterator[int]:
    big = _page('<meta charset="utf-8">', "Ein großes Handbuch ", 3_000_000)
    big = big.replace("next/page.html", "/target.html")
    pages = {"/": big, "/target.html": "<html><body><p>The target page.</p></body></html>"}

    with serve_pages(HOST, pages, "text/html") as port:
        yield port


@pytest.mark.integration
def test_a_crawl_follows_the_refresh_of_a_big_page(site: int, tmp_path: Path) -> None:
    settings = {
        "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
        "TUNING": {"idle_horizon": 2}, "CLOSESPIDER_TIMEOUT": 120, "LOG_LEVEL": "INFO",
    }
    cmd = crawl_command(tmp_path, seeds=[f"http://{HOST}:{site}/"], settings=settings)
    proc = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert [(r["url"], r["final_url"]) for r in rows] == [
        (f"http://{HOST}:{site}/", f"http://{HOST}:{site}/target.html")
    ]


@pytest.mark.integration
def test_a_crawl_follows_a_refresh_header(tmp_path: Path) -> None:
    pages = {
        "/": "<html><body><p>Moved: no link, no meta refresh.</p></body></html>",
        "/next": "<html><body><p>The next page.</p></body></html>",
    }
    refresh = {"/": {"Refresh": "0; url=/next"}}
    with serve_pages(HOST, pages, "text/html", headers=refresh) as port:
        result = run_crawl(tmp_path, seeds=[f"http://{HOST}:{port}/"], settings=loopback_settings(
            FRONTIER_MIN_DELAY=0, TUNING={"idle_horizon": 2}, CLOSESPIDER_TIMEOUT=120))
    assert result.returncode == 0, result.log[-3000:]
    assert [(r["url"], r["final_url"]) for r in result.items] == [
        (f"http://{HOST}:{port}/", f"http://{HOST}:{port}/next")
    ]


def test_a_charset_on_an_earlier_content_type_line_decodes_the_refresh() -> None:
    """Two ``Content-Type`` lines, the charset on the first, the same type on the second: Fetch
    reads one MIME type with that charset, as the spider's readers do (``getlist``). The
    middleware read the last line only, decoded this UTF-16LE page as UTF-8 (its NULs are
    valid UTF-8) and missed its refresh."""
    page = '<html><head><meta http-equiv="refresh" content="0; url=/next"></head></html>'
    headers = {"Content-Type": [b"text/html; charset=utf-16le", b"text/html"]}
    response = HtmlResponse("http://example.com/a", body=page.encode("utf-16-le"),
                            headers=headers)
    assert transport_encoding(response.headers.getlist(b"Content-Type")) == "utf-16-le"
    assert meta_refresh(response, ["noscript"]) == (0, "http://example.com/next")


@pytest.mark.parametrize("how", ["header", "meta"])
def test_a_refresh_back_to_its_chain_is_a_loop_cut_at_once(how: str) -> None:
    """A refreshes to B, B back to A: cut when it comes round, counted as a redirect loop, as a
    ``Location`` loop is (CountingRedirectMiddleware), not followed round for
    ``REDIRECT_MAX_TIMES`` hops (a request that skips the seen-test, a sitemap's, would be)."""
    from scrapy import Request, Spider
    from scrapy.exceptions import IgnoreRequest
    from scrapy.utils.test import get_crawler

    from crawler.middlewares.redirect import PrefixMetaRefreshMiddleware

    crawler = get_crawler(Spider)
    crawler.stats.open_spider(None)
    middleware = PrefixMetaRefreshMiddleware.from_crawler(crawler)
    a, b = "http://example.com/a", "http://example.com/b"
    request = Request(b, dont_filter=True, meta={"redirect_urls": [a], "redirect_times": 1})
    headers = {"Content-Type": "text/html"}
    body = b"<html></html>"
    if how == "header":
        headers["Refresh"] = f"0; url={a}"
    else:
        body = f'<meta http-equiv="refresh" content="0; url={a}">'.encode()
    response = HtmlResponse(b, body=body, headers=headers, request=request)
    with pytest.raises(IgnoreRequest, match="loop"):
        middleware.process_response(request, response)
    assert crawler.stats.get_value("limits/redirect_loop") == 1
    # a refresh onwards is followed as before
    onwards = response.replace(headers={"Content-Type": "text/html", "Refresh": "0; url=/c"},
                               body=b"<html></html>")
    redirected = middleware.process_response(request, onwards)
    assert isinstance(redirected, Request) and redirected.url == "http://example.com/c"
