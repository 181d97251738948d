"""Limits against hostile servers, in one real crawl of many hostile hosts and a normal site.

Each hostile host serves one case at ``/``; the verdicts come from the crawl's stats
(``limits/<name>``), its log (one INFO line per host and limit) and the server's record.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from tests import hostile as h
from tests.crawling import loopback_settings, run_crawl

MB = 1 << 20
NORMAL = "127.0.0.100"
ELSEWHERE = "127.0.0.99"  # not crawled: the many-links page points there
MAX_LINKS, MAX_TEXT = 1000, 20_000


def header_bytes(req: h.Req, conn: h.Conn) -> None:
    """Few but huge header lines: 40 x 15 KiB."""
    conn.head(200, [*h.HTML, *((f"X-Big-{i}", "b" * 15_000) for i in range(40))])
    conn.send(b"<html>never read</html>")


def long_text(req: h.Req, conn: h.Conn) -> None:
    words = " ".join(f"word{i}" for i in range(10_000))
    conn.answer(200, h.HTML, f"<html><body><p>{words}</p></body></html>".encode())


CASES: dict[str, tuple[str, h.Route]] = {
    "127.0.0.101": ("trickled_body", h.trickled_body(size=10_000, interval=0.1)),
    "127.0.0.102": ("trickled_headers", h.trickled_headers(interval=0.1)),
    "127.0.0.103": ("endless_headers", h.endless_headers()),
    "127.0.0.104": ("header_bytes", header_bytes),
    "127.0.0.105": ("endless_body", h.endless_body()),
    "127.0.0.106": ("big_body", h.big_body(50 * MB)),
    "127.0.0.107": ("big_body_no_length", h.big_body(50 * MB, declare_length=False)),
    "127.0.0.108": ("gzip_bomb", h.bomb("gzip", 64 * MB)),
    "127.0.0.109": ("deflate_bomb", h.bomb("deflate", 64 * MB)),
    "127.0.0.110": ("br_bomb", h.bomb("br", 64 * MB)),
    "127.0.0.111": ("silent", h.silent()),
    "127.0.0.112": ("reset", h.reset_mid_body()),
    "127.0.0.113": ("many_links", h.many_links(200_000, f"http://{ELSEWHERE}/x/")),
    "127.0.0.114": ("long_text", long_text),
    "127.0.0.115": ("junk", h.binary_junk()),
    "127.0.0.116": ("invalid_utf8", h.invalid_utf8()),
    "127.0.0.117": ("lying_charset", h.lying_charset()),
    "127.0.0.118": ("deep_nesting", h.deep_nesting(5000)),
    "127.0.0.119": ("redirect_loop", h.redirect_loop("/loop/")),
    "127.0.0.120": ("redirect_chain", h.redirect_chain("/chain/", length=100)),
}
# the redirect cases answer "/" and every path under their prefix (robots.txt stays a 404)
PREFIXES = {"127.0.0.119": "/loop/", "127.0.0.120": "/chain/"}
BY_NAME = {name: address for address, (name, _) in CASES.items()}


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("limits")
    server = h.HostileServer()
    for address, (_, route) in CASES.items():
        server.route(address, "/", route)
        if address in PREFIXES:
            server.route(address, PREFIXES[address], route, prefix=True)
    normal = h.normal_site(server, NORMAL, pages=5)
    with server:
        result = run_crawl(
            tmp,
            seeds=[server.url(a) for a in [*CASES, NORMAL]],
            settings=loopback_settings(
                DOWNLOAD_TIMEOUT=4,
                TUNING={"min_rate_grace": 1},
                PAGE_MAX_LINKS=MAX_LINKS,
                CONTENT_MAX_TEXT=MAX_TEXT,
            ),
            timeout=120,
        )
        server.wait_idle()
        yield result, server, normal


def sent(server: h.HostileServer, name: str) -> list[h.Hit]:
    return [x for x in server.hits_of(BY_NAME[name]) if x.path == "/"]


@pytest.mark.parametrize(
    ("case", "limit"),
    [
        ("trickled_body", "min_rate"),
        ("trickled_headers", "min_rate"),
        ("endless_headers", "header_count"),
        ("header_bytes", "header_bytes"),
        ("endless_body", "download_size"),
        ("big_body", "download_size"),
        ("big_body_no_length", "download_size"),
        ("gzip_bomb", "decompressed_size"),
        ("deflate_bomb", "decompressed_size"),
        ("br_bomb", "decompressed_size"),
        ("silent", "download_time"),
        ("many_links", "page_links"),
        ("many_links", "page_html"),
        ("long_text", "content_text"),
        ("deep_nesting", "page_depth"),
        ("redirect_loop", "redirect_loop"),
        ("redirect_chain", "redirects"),
    ],
)
def test_limit_fires_is_counted_and_logged_once(crawl, case: str, limit: str) -> None:
    result, server, _ = crawl
    assert result.returncode == 0, result.log[-3000:]
    url = server.url(BY_NAME[case], "/")
    assert result.stats.get(f"limits/{limit}", 0) >= 1
    assert result.log.count(f"Limit {limit} reached on {url}:") == 1


def test_limits_stop_the_transfer(crawl) -> None:
    _, server, _ = crawl
    # The server did not get to send what it wanted to: the crawler hung up.
    assert all(x.sent < 10_000 for x in sent(server, "trickled_body"))
    for case in ("endless_headers", "endless_body", "big_body_no_length"):
        assert all(x.sent < 40 * MB for x in sent(server, case)), case
    # A Content-Length over DOWNLOAD_MAXSIZE is refused before the body is read.
    assert all(x.sent < 50 * MB for x in sent(server, "big_body"))


def test_limits_are_not_retried(crawl) -> None:
    _, server, _ = crawl
    once = ("trickled_body", "trickled_headers", "endless_headers", "header_bytes", "endless_body")
    for case in once:
        assert len(sent(server, case)) == 1, case


def test_page_links_and_text_are_cut(crawl) -> None:
    result, server, _ = crawl
    assert result.stats["frontier/rejected/out_of_scope"] == MAX_LINKS
    [item] = [i for i in result.items if i["url"] == server.url(BY_NAME["long_text"], "/")]
    assert len(item["text"]) == MAX_TEXT


def test_broken_pages_do_not_break_the_crawl(crawl) -> None:
    result, server, normal = crawl
    crawled = {i["url"] for i in result.items}
    for case in ("junk", "invalid_utf8", "lying_charset", "deep_nesting"):
        assert server.url(BY_NAME[case], "/") in crawled, case
    assert {x.path for x in server.hits_of(NORMAL)} == normal
    assert result.stats["finish_reason"] == "finished"
    # Download errors (a timeout, a reset) are logged with a traceback; crashes are not allowed.
    assert "Error caught on signal handler" not in result.log
    assert "Spider error processing" not in result.log
    assert "Error while handling downloader output" not in result.log


def test_a_silent_connection_is_closed_when_its_download_times_out(crawl) -> None:
    _, server, _ = crawl
    attempts = sent(server, "silent")
    assert len(attempts) == 3  # RETRY_TIMES 2: each attempt ended, then was retried
    # The server saw the crawler hang up each attempt before the next began: a connection left
    # open would end only when the server stops, after the whole crawl.
    for before, after in pairwise(attempts):
        assert before.end <= after.start
    assert all(x.status == 0 for x in attempts)
