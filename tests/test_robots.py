"""robots.txt of many shapes and page robots directives, in one real crawl of many hosts.

Every host of the site serves a different robots.txt (or a different failure); the verdicts
are judged from the server's own record of requests: what was fetched, how often robots.txt
was asked for, and the gaps between requests.
"""

from __future__ import annotations

import signal
import threading
import time
import zlib
from collections import Counter
from functools import cache
from itertools import pairwise
from typing import Any

import pytest

from devsite import HostSpec, build_site
from devsite.routed import Answer, Ask, RoutedSiteServer
from tests.crawling import (
    CrawlResult,
    finish_crawl,
    loopback_settings,
    per_host,
    run_crawl,
    start_crawl,
)

pytestmark = pytest.mark.integration


def text(body: str, status: int = 200, **headers: str) -> Answer:
    return status, [("Content-Type", "text/plain"), *headers.items()], body.encode()


def html(body: str, **headers: str) -> Answer:
    hs = [("Content-Type", "text/html; charset=utf-8"), *headers.items()]
    return 200, hs, f"<html><head>{body}</body></html>".encode()


PAGES = 4
ALL = {"/", *(f"/p/{i}.html" for i in range(PAGES))}

# host -> (robots.txt route, paths expected to be fetched besides robots.txt)
SHAPES: dict[str, tuple[Any, set[str]]] = {}


def shape(address: str, expected: set[str]):
    def register(route):
        SHAPES[address] = (route, expected)
        return route

    return register


@shape("127.0.0.2", ALL - {"/p/1.html"})
def _ua_groups(ask: Ask) -> Answer:
    # Our group wins over "*"; another bot's "Disallow: /" is not ours.
    return text(
        "User-agent: otherbot\nDisallow: /\n\n"
        "User-agent: Crawler-Bot\nDisallow: /p/1.html\n\n"
        "User-agent: *\nDisallow: /p/\n"
    )


@shape("127.0.0.3", {"/", "/p/0.html?x=1", "/p/1.html", "/p/3.html"})
def _wildcards(ask: Ask) -> Answer:
    return text("User-agent: *\nDisallow: /*/2.html$\nDisallow: /p/0.html$\n")


@shape("127.0.0.4", {"/", "/p/2.html"})
def _allow_beats_shorter_disallow(ask: Ask) -> Answer:
    return text("User-agent: *\nDisallow: /p/\nAllow: /p/2.html\n")


@shape("127.0.0.5", ALL)
def _not_found(ask: Ask) -> Answer:
    return text("nope", 404)


@shape("127.0.0.6", set())
def _server_error(ask: Ask) -> Answer:
    return text("boom", 500)


@shape("127.0.0.7", set())
def _timeout(ask: Ask) -> Answer:
    ask.wait(3)  # DOWNLOAD_TIMEOUT is 1
    return text("User-agent: *\nAllow: /\n")


@shape("127.0.0.8", ALL - {"/p/0.html"})
def _redirect(ask: Ask) -> Answer:
    return text("", 301, Location="/elsewhere/robots.txt")


@shape("127.0.0.9", ALL)
def _redirect_loop(ask: Ask) -> Answer:
    return text("", 302, Location="/loop/robots.txt")  # more than 5 hops: no restrictions


@shape("127.0.0.10", ALL)
def _binary(ask: Ask) -> Answer:
    return 200, [("Content-Type", "application/octet-stream")], bytes(range(256)) * 40


@shape("127.0.0.11", ALL - {"/p/0.html"})
def _too_big(ask: Ask) -> Answer:
    padding = "# " + "x" * 98 + "\n"
    body = "User-agent: *\nDisallow: /p/0.html\n" + padding * 5200  # 520 KB
    return text(body + "Disallow: /p/1.html\n")  # past 500 KiB: ignored


@shape("127.0.0.12", ALL - {"/p/1.html"})
def _too_many_requests_then_ok(ask: Ask) -> Answer:
    hits = ask.server.robots_hits["127.0.0.12"] = ask.server.robots_hits.get("127.0.0.12", 0) + 1
    if hits == 1:
        return text("slow down", 429, **{"Retry-After": "0"})
    return text("User-agent: *\nDisallow: /p/1.html\n")


@shape("127.0.0.13", ALL)
def _crawl_delay(ask: Ask) -> Answer:
    return text("User-agent: *\nCrawl-delay: 0.4\n")


@shape("127.0.0.14", ALL)
def _request_rate(ask: Ask) -> Answer:
    return text("User-agent: *\nRequest-rate: 5/2s\n")  # one request per 0.4 s


@shape("127.0.0.15", set())
def _crawl_delay_too_long(ask: Ask) -> Answer:
    return text("User-agent: *\nCrawl-delay: 10\n")  # FRONTIER_MAX_CRAWL_DELAY is 5


@shape("127.0.0.16", ALL)
def _forbidden(ask: Ask) -> Answer:
    return text("private", 403)


@shape("127.0.0.17", {"/"})
def _disallowed_queued_together(ask: Ask) -> Answer:
    return text("User-agent: *\nDisallow: /p/\n")


@shape("127.0.0.19", set())
def _plain_text_labelled_gzip(ask: Ask) -> Answer:
    # HttpCompressionMiddleware cannot decode it and raises on the way back up the middleware
    # chain, where the robots middleware never hears of it: robots.txt unreachable, not a hang.
    return text("User-agent: *\nAllow: /\n", **{"Content-Encoding": "gzip"})


@cache
def gzip_bomb(size: int = 64 * 1024 * 1024) -> bytes:
    """``size`` zero bytes gzipped (about 64 KB): over the default DOWNLOAD_MAXSIZE (16 MB)
    once decompressed."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1024 * 1024)
    return b"".join(packer.compress(chunk) for _ in range(size // len(chunk))) + packer.flush()


@shape("127.0.0.20", ALL)
def _gzip_bomb(ask: Ask) -> Answer:
    # inflated up to 500 KiB only (RFC 9309 2.5), and read as the junk it is: no rules
    headers = [("Content-Type", "text/plain"), ("Content-Encoding", "gzip")]
    return 200, headers, gzip_bomb()


@shape("127.0.0.21", set())
def _redirect_to_mislabelled_gzip(ask: Ask) -> Answer:
    # The hop fails on its way back up; its owner reads that: one failure per try, not two.
    return text("", 301, Location="/gz/robots.txt")


UNPROCESSABLE = {"127.0.0.19", "127.0.0.21"}
META_HOST = "127.0.0.22"
META_PAGES: dict[str, Answer] = {
    "/": html(
        "<title>home</title></head><body>"
        + "".join(f'<a href="/{n}">{n}</a>' for n in "abcdefg")
        + '<a href="/secret" rel="external nofollow">s</a>'
    ),
    "/a": html('<meta name="robots" content="NOFOLLOW"></head><body><a href="/a-child">x</a>'),
    "/b": html('<meta name="robots" content="noindex"></head><body><a href="/b-child">x</a>'),
    "/c": html('</head><body><a href="/c-child">x</a>', **{"X-Robots-Tag": "noindex, nofollow"}),
    "/d": html('<meta name="crawler-bot" content="none"></head><body><a href="/d-child">x</a>'),
    "/e": html('<meta name="otherbot" content="noindex,nofollow"></head><body>'),
    "/f": html("</head><body>", **{"X-Robots-Tag": "otherbot: noindex"}),
    "/g": html('<a href="/secret">followed here</a>', **{"X-Robots-Tag": "crawler-bot: noindex"}),
    "/b-child": html("</head><body>child"),
    "/secret": html("</head><body>secret"),
}
META_FETCHED = {"/", "/a", "/b", "/c", "/d", "/e", "/f", "/g", "/b-child", "/secret"}


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> tuple[CrawlResult, dict[str, list[Any]]]:
    tmp_path = tmp_path_factory.mktemp("robots")
    specs = [HostSpec(address, pages=PAGES) for address in SHAPES]
    specs.append(HostSpec(META_HOST, pages=0))
    graph = build_site(specs, links_per_page=PAGES + 1, cross_host_links=0, extras=False)
    server = RoutedSiteServer(graph)
    server.robots_hits = {}  # type: ignore[attr-defined]
    for address, (route, _) in SHAPES.items():
        server.route(address, "/robots.txt", route)
    server.route(
        "127.0.0.8",
        "/elsewhere/robots.txt",
        lambda ask: text("User-agent: *\nDisallow: /p/0.html\n"),
    )
    server.route("127.0.0.9", "/loop/robots.txt", _redirect_loop)
    server.route("127.0.0.21", "/gz/robots.txt", _plain_text_labelled_gzip)
    server.route(META_HOST, "/robots.txt", lambda ask: text("", 404))
    for path, answer in META_PAGES.items():
        server.route(META_HOST, path, lambda ask, answer=answer: answer)
    with server:
        seeds = [server.url(address) for address in [*SHAPES, META_HOST]]
        seeds.append(server.url("127.0.0.3", "/p/0.html?x=1"))
        # All queued before robots.txt is known, all disallowed: none may be fetched.
        seeds += [server.url("127.0.0.17", f"/p/{i}.html") for i in range(PAGES)]
        seeds += [server.url("127.0.0.17", f"/p/extra-{i}.html") for i in range(3)]
        result = run_crawl(
            tmp_path,
            seeds=seeds,
            settings=loopback_settings(
                DOWNLOAD_TIMEOUT=1,
                TUNING={"robots_retry_delay": 0.3, "robots_retry_times": 1},
                FRONTIER_MAX_CRAWL_DELAY=5,
                INDEX_PATH=tmp_path / "index.sqlite",
            ),
            timeout=60,
        )
    records = per_host(server.records)  # after stop: includes the answers that came too late
    assert result.returncode == 0, result.log[-3000:]
    return result, records


def paths(records: list[Any]) -> list[str]:
    return [r.path for r in records]


@pytest.mark.parametrize("address", list(SHAPES))
def test_each_robots_shape_is_obeyed(crawl, address: str) -> None:
    _, records = crawl
    _, expected = SHAPES[address]
    fetched = [p for p in paths(records[address]) if "robots.txt" not in p]
    assert set(fetched) == expected
    assert len(fetched) == len(set(fetched))


def test_robots_txt_is_fetched_once_per_host(crawl) -> None:
    _, records = crawl
    counts = {a: paths(records[a]).count("/robots.txt") for a in [*SHAPES, META_HOST]}
    # 500, timeout, 429, and responses the decoder rejects: tried again once
    retried = {"127.0.0.6", "127.0.0.7", "127.0.0.12", *UNPROCESSABLE}
    assert {a for a, n in counts.items() if n != 1} == retried
    assert all(counts[a] == 2 for a in retried)
    # and before anything else of its host
    for address in SHAPES:
        assert paths(records[address])[0] == "/robots.txt"


def test_redirects_are_followed_at_most_five_times(crawl) -> None:
    _, records = crawl
    assert paths(records["127.0.0.8"])[:2] == ["/robots.txt", "/elsewhere/robots.txt"]
    loop = paths(records["127.0.0.9"])
    assert loop.count("/loop/robots.txt") == 5


def test_crawl_delay_and_request_rate_space_the_requests(crawl) -> None:
    _, records = crawl
    for address in ("127.0.0.13", "127.0.0.14"):
        recs = records[address]
        assert len(recs) == 1 + len(ALL)
        gaps = [b.start - a.end for a, b in pairwise(recs)]
        assert min(gaps) >= 0.4 - 0.005, (address, gaps)


def test_too_long_crawl_delay_skips_the_host_and_says_so_once(crawl) -> None:
    result, records = crawl
    assert paths(records["127.0.0.15"]) == ["/robots.txt"]
    assert result.log.count("Skipping host 127.0.0.15") == 1
    assert result.stats["frontier/hosts_given_up/host_skipped"] == 1


def test_stats_count_denials_retries_and_drops(crawl) -> None:
    result, _ = crawl
    stats = result.stats
    # .2: 1, .3: 2, .4: 3, .8: 1, .11: 1, .12: 1, .17: 7
    assert stats["robotstxt/denied"] == 16
    assert stats["robotstxt/truncated"] == 2  # .11, and .20's bomb
    # 500, timeout and 429: the host is held in the frontier until the robots.txt retry, so
    # nothing is parked in memory; the 429 host's retry succeeds and its pages follow, the
    # 500 and timeout hosts run out of retries and their seeds are refused
    assert stats.get("robotstxt/deferred", 0) == 0
    assert stats.get("robotstxt/requeued", 0) == 0
    assert stats["robotstxt/denied_unreachable"] == 2 + len(UNPROCESSABLE)
    # one per failed try: .6 and .7 twice, .12 once, each UNPROCESSABLE host twice
    assert stats["robotstxt/unreachable"] == 5 + 2 * len(UNPROCESSABLE)
    # .19 twice (its mislabelled body always fails in the decompression middleware); .21's
    # hop is its own
    assert 2 <= stats["robotstxt/unprocessable"] <= 4
    assert "robots.txt of http://127.0.0.6" in result.log and "retrying in" in result.log


def test_robots_txt_the_decoder_rejects_is_unreachable(crawl) -> None:
    """Plain text labelled gzip: HttpCompressionMiddleware raises above the robots
    middleware. The host is held and retried like a 5xx, then given up; the crawl
    ends (it used to wait for ever for that robots.txt)."""
    result, records = crawl
    for address in UNPROCESSABLE:
        assert set(paths(records[address])) <= {"/robots.txt", "/gz/robots.txt"}
    assert paths(records["127.0.0.21"]).count("/gz/robots.txt") == 2
    assert result.stats["finish_reason"] == "finished"
    assert result.stats.get("robotstxt/wait_timeout", 0) == 0  # not rescued by the safety net


def test_page_directives(crawl) -> None:
    result, records = crawl
    assert set(paths(records[META_HOST])) - {"/robots.txt"} == META_FETCHED
    items = {
        i["url"].split(f"{META_HOST}:", 1)[1].split("/", 1)[1]: i
        for i in result.items
        if META_HOST in i["url"]
    }
    noindex = {path for path, item in items.items() if item.get("noindex")}
    assert noindex == {"b", "c", "d", "g"}
    assert items["a"]["outlinks"] == [] and items["d"]["outlinks"] == []
    assert all("secret" not in o["url"] for o in items[""]["outlinks"])
    assert result.stats["links/nofollow"] == 1
    assert Counter(r.path for r in records[META_HOST])["/secret"] == 1  # via /g only


def test_one_sigint_stops_a_crawl_waiting_for_robots_txt(tmp_path) -> None:
    """Ctrl-C while one host's robots.txt hangs and another's was unprocessable (held for a
    retry): the engine waits for the downloads in progress, so every one of them must end;
    one SIGINT is enough and the stats are written."""
    slow, broken = "127.0.0.2", "127.0.0.3"
    graph = build_site(
        [HostSpec(slow, pages=2), HostSpec(broken, pages=2)],
        links_per_page=3,
        cross_host_links=0,
        extras=False,
    )
    server = RoutedSiteServer(graph)
    asked = threading.Event()

    def hang(ask: Ask) -> Answer:
        asked.set()
        ask.wait(30)
        return text("User-agent: *\nAllow: /\n")

    server.route(slow, "/robots.txt", hang)
    server.route(broken, "/robots.txt", _plain_text_labelled_gzip)
    with server:
        proc = start_crawl(
            tmp_path,
            seeds=[server.url(slow), server.url(broken)],
            settings=loopback_settings(DOWNLOAD_TIMEOUT=4, TUNING={"robots_retry_delay": 60}),
        )
        try:
            assert asked.wait(60), "robots.txt of the slow host was never asked for"
            deadline = time.monotonic() + 30
            while not any(r.host == broken for r in server.records):
                assert time.monotonic() < deadline, "robots.txt of the broken host never asked"
                time.sleep(0.1)
            time.sleep(0.5)  # its failure read, the host held
            proc.send_signal(signal.SIGINT)
            result = finish_crawl(proc, tmp_path, timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert result.returncode == 0, result.log[-3000:]
    assert result.log.count("Received SIGINT") == 1
    assert result.stats["finish_reason"] == "shutdown"
    fetched = {(r.host, r.path) for r in server.records}
    assert fetched == {(slow, "/robots.txt"), (broken, "/robots.txt")}


def test_robots_cache_lives_beside_the_crawl_database(tmp_path) -> None:
    """The default cache path comes from the recrawl extension (found by class path, not
    imported): a second crawl within the expiry reads robots.txt from it, not the network."""
    host = "127.0.0.2"
    graph = build_site([HostSpec(host, pages=1)], links_per_page=1, cross_host_links=0)
    server = RoutedSiteServer(graph)
    server.route(host, "/robots.txt", lambda ask: text("User-agent: *\nAllow: /\n"))
    settings = loopback_settings(CRAWLDB_PATH=tmp_path / "crawldb.sqlite", RECRAWL_INTERVAL=1)
    with server:
        first = run_crawl(tmp_path, seeds=[server.url(host)], settings=settings, timeout=60)
        second = run_crawl(tmp_path, seeds=[server.url(host)], settings=settings, timeout=60)
    assert first.returncode == 0 and second.returncode == 0, second.log[-3000:]
    assert (tmp_path / "crawldb-robots.sqlite").exists()
    assert [r.path for r in server.records].count("/robots.txt") == 1
    assert second.stats["robotstxt/cache_hit"] == 1
