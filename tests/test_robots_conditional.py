"""A robots.txt refreshed during a crawl is asked for conditionally (RFC 9309 2.4 lets a crawler
use HTTP caching; RFC 9110 13.1): the refresh carries the copy's ``ETag`` and
``Last-Modified``, and the server's 304 keeps that copy in force, fresh again, with no body sent.
A 304 whose validators name another file than the copy (RFC 9111 4.3.4) renews nothing: the
file is fetched again, once, without validators.

One real crawl of several hosts whose copies expire after a second (``ROBOTSTXT_CACHE_EXPIRY``)
while their ``Crawl-delay`` spreads their pages over several seconds, so robots.txt is
refreshed mid-crawl.
"""

from __future__ import annotations

import pytest

from tests import hostile as h
from tests.crawling import loopback_settings, run_crawl

pytestmark = pytest.mark.integration

HOST = "127.0.0.160"  # a 304 that names the copy
BIG = "127.0.0.161"  # the same, of a copy cut at 500 KiB
NGINX = "127.0.0.165"  # a 304 with the strong form of the copy's weak ETag, as nginx's gzip
PAGES = 12
ETAG = '"robots-v1"'
LAST_MODIFIED = "Sat, 05 Dec 2026 10:00:00 GMT"
ROBOTS = b"User-agent: *\nDisallow: /p/1.html\nCrawl-delay: 0.5\n"
BIG_ROBOTS = ROBOTS + (b"# " + b"x" * 97 + b"\n") * 6000  # 600 KB: over RFC 9309's 500 KiB
# host -> (the validators of the first file, those of the file after it) as (ETag,
# Last-Modified), "" when not sent
CHANGING = {
    "127.0.0.162": (('"v1"', LAST_MODIFIED), ('"v2"', LAST_MODIFIED)),  # a strong ETag
    "127.0.0.163": (("W/\"v1\"", ""), ("W/\"v2\"", "")),  # a weak one
    "127.0.0.164": (("", LAST_MODIFIED), ("", "Sun, 06 Dec 2026 10:00:00 GMT")),  # a date alone
}


def robots(req: h.Req, conn: h.Conn) -> None:
    if req.headers.get("if-none-match") == ETAG:
        conn.head(304, [("ETag", ETAG)])
        return
    headers = [("Content-Type", "text/plain"), ("ETag", ETAG), ("Last-Modified", LAST_MODIFIED)]
    conn.answer(200, headers, BIG_ROBOTS if req.host == BIG else ROBOTS)


def nginx(req: h.Req, conn: h.Conn) -> None:
    """nginx with ``gzip`` on for text/plain: the gzipped 200 has the file's ETag made weak,
    the 304 to it (which its gzip filter does not touch) the strong one, of the same file."""
    if "if-none-match" in req.headers:
        conn.head(304, [("ETag", ETAG), ("Last-Modified", LAST_MODIFIED)])
        return
    headers = [("ETag", "W/" + ETAG), ("Last-Modified", LAST_MODIFIED)]
    conn.answer(200, [("Content-Type", "text/plain"), *headers], ROBOTS)


def changing(first: tuple[str, str], then: tuple[str, str]) -> h.Route:
    """A robots.txt that changes after its first download, behind a server that answers every
    conditional request with a 304 carrying the current file's validators (as a cache in front
    of the site that checks only that validators were sent)."""
    served: list[str] = []

    def route(req: h.Req, conn: h.Conn) -> None:
        validators = zip(("ETag", "Last-Modified"), then if served else first, strict=True)
        headers = [(name, value) for name, value in validators if value]
        if "if-none-match" in req.headers or "if-modified-since" in req.headers:
            conn.head(304, headers)
            return
        served.append(req.path)
        conn.answer(200, [("Content-Type", "text/plain"), *headers], ROBOTS)

    return route


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("robots-conditional")
    server = h.HostileServer()
    hosts = [HOST, BIG, NGINX, *CHANGING]
    sites = {host: h.normal_site(server, host, pages=PAGES) for host in hosts}
    for host in (HOST, BIG):
        server.route(host, "/robots.txt", robots)
    server.route(NGINX, "/robots.txt", nginx)
    for host, (first, then) in CHANGING.items():
        server.route(host, "/robots.txt", changing(first, then))
    with server:
        result = run_crawl(
            tmp,
            seeds=[server.url(host) for host in hosts],
            settings=loopback_settings(ROBOTSTXT_CACHE_EXPIRY=1),
            timeout=120,  # a hang guard, not a speed requirement
        )
        server.wait_idle()
        yield result, server, sites


def _sent(hit: h.Hit) -> tuple[str, str]:
    """The validators a robots.txt request carried ("" when absent)."""
    return hit.headers.get("if-none-match", ""), hit.headers.get("if-modified-since", "")


def test_the_crawl_obeys_every_copy(crawl) -> None:
    result, server, sites = crawl
    assert result.returncode == 0, result.log[-3000:]
    assert "robotstxt/unreachable" not in result.stats
    # the renewed copies still decide: /p/1.html never fetched, every other page once
    for host, site in sites.items():
        pages = [x.path for x in server.hits_of(host) if x.path != "/robots.txt"]
        assert sorted(pages) == sorted(site - {"/robots.txt", "/p/1.html"}), host


@pytest.mark.parametrize("host", [HOST, BIG])
def test_a_refresh_is_conditional_and_its_304_keeps_the_copy(crawl, host: str) -> None:
    _, server, _ = crawl
    first, *refreshes = server.hits_of(host, "/robots.txt")
    assert first.status == 200 and _sent(first) == ("", "")
    assert refreshes, "the crawl outlasted the copy: it must have been refreshed"
    for hit in refreshes:
        assert _sent(hit) == (ETAG, LAST_MODIFIED)
        assert hit.status == 304


def test_stats_count_renewals(crawl) -> None:
    result, server, _ = crawl
    renewals = [
        hit
        for host in [HOST, BIG, NGINX, *CHANGING]
        for hit in server.hits_of(host, "/robots.txt")[1:]
        if hit.status == 304
    ]
    others = len(CHANGING)  # each changing host's first 304 names another file
    assert result.stats["robotstxt/not_modified"] == len(renewals) - others
    assert result.stats["robotstxt/not_modified_other"] == others


def test_only_a_download_that_was_cut_counts_as_truncated(crawl) -> None:
    """BIG's file was cut once, at its one download; its renewals download nothing."""
    result, server, _ = crawl
    assert len(server.hits_of(BIG, "/robots.txt")) > 1
    assert result.stats["robotstxt/truncated"] == 1


@pytest.mark.parametrize("host", list(CHANGING))
def test_a_304_naming_another_file_fetches_it_again_once(crawl, host: str) -> None:
    """RFC 9111 4.3.4: a 304 whose validator (a strong or weak ``ETag``, a ``Last-Modified``)
    is not the copy's renews nothing. The copy is not the server's file any more: robots.txt
    is fetched again at once without validators; the new copy's validators then get 304s
    that renew it."""
    _, server, _ = crawl
    first_validators, then_validators = CHANGING[host]
    hits = server.hits_of(host, "/robots.txt")
    assert len(hits) >= 4, "the crawl outlasted two copies: two refreshes at least"
    first, refresh, again, *later = hits
    assert (first.status, _sent(first)) == (200, ("", ""))
    assert (refresh.status, _sent(refresh)) == (304, first_validators)
    assert (again.status, _sent(again)) == (200, ("", ""))
    for hit in later:
        assert (hit.status, _sent(hit)) == (304, then_validators)


def test_a_304_with_the_strong_form_of_a_weak_etag_renews_the_copy(crawl) -> None:
    """nginx answers a refresh of its gzipped file (``W/"robots-v1"``) with a 304 naming
    ``"robots-v1"``: the same file (the tags compared weakly, as ``If-None-Match`` is), so the
    copy is renewed, not fetched again after every 304."""
    _, server, _ = crawl
    first, *refreshes = server.hits_of(NGINX, "/robots.txt")
    assert first.status == 200 and _sent(first) == ("", "")
    assert refreshes, "the crawl outlasted the copy: it must have been refreshed"
    assert _sent(refreshes[0]) == ("W/" + ETAG, LAST_MODIFIED)
    for hit in refreshes:  # (a renewal keeps the 304's validators: the strong tag after)
        assert hit.status == 304 and _sent(hit)[0] in (ETAG, "W/" + ETAG)
