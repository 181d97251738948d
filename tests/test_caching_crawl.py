"""Caching directives in real recrawls over a crawl database: a 304 that brings new
validators has them used by the next conditional GET, ``no-store`` pages are refetched
without validators, and ``max-age`` holds the next fetch back.

Time between runs is simulated in the database (``next_fetch`` moved), as in test_recrawl."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from devsite import HostSpec, build_site
from devsite.routed import Answer, Ask, RoutedSiteServer
from tests.crawling import loopback_settings, run_crawl
from tests.test_recrawl import db_exec, db_rows

pytestmark = pytest.mark.integration

HOST = "127.0.0.2"


def test_validators_no_store_and_max_age_in_recrawls(tmp_path: Path) -> None:
    server = RoutedSiteServer(build_site([HostSpec(HOST, pages=4)], links_per_page=2))
    tags: dict[str, int] = {}  # by path and query: the page is linked with a query too

    def page(path: str, *extra: tuple[str, str]) -> tuple[list[tuple[str, str]], bytes]:
        doc = server.graph.resolve(HOST, path)
        assert doc is not None
        return [("Content-Type", doc.content_type), *extra], doc.body

    def rotating(ask: Ask) -> Answer:
        """Answers a conditional GET for any tag it ever gave with 304 and the *next* tag (a
        server that re-labels unchanged content), so the 304's ETag is the one to keep."""
        tags.setdefault(ask.path, 1)
        asked = ask.headers.get("If-None-Match")
        if asked is not None and asked.startswith('"t'):
            tags[ask.path] += 1
            tag = f'"t{tags[ask.path]}"'
            return 304, [("ETag", tag), ("Last-Modified", "Mon, 02 Nov 2026 10:00:00 GMT")], b""
        headers, body = page("/p/1.html", ("ETag", f'"t{tags[ask.path]}"'))
        return 200, headers, body

    def private(ask: Ask) -> Answer:
        headers, body = page("/p/2.html", ("ETag", '"private"'), ("Cache-Control", "no-store"))
        return 200, headers, body

    def long_lived(ask: Ask) -> Answer:
        headers, body = page("/p/3.html", ("ETag", '"long"'), ("Cache-Control", "max-age=86400"))
        return 200, headers, body

    server.route(HOST, "/p/1.html", rotating)
    server.route(HOST, "/p/2.html", private)
    server.route(HOST, "/p/3.html", long_lived)
    db = tmp_path / "crawldb.sqlite"
    settings = loopback_settings(
        CRAWLDB_PATH=db, RECRAWL_INTERVAL=3600, TUNING={"recrawl_sync_delta": False},
        FRONTIER_MIN_DELAY=0.02
    )

    def crawl(run: str) -> dict[str, Any]:
        server.reset()
        (tmp_path / run).mkdir()
        result = run_crawl(tmp_path / run, seeds=[server.url(HOST)], settings=settings)
        assert result.returncode == 0, result.log[-3000:]
        return {r.path: r for r in server.records}

    with server:
        crawl("1")
        rows = db_rows(db)
        url = {p: server.url(HOST, p) for p in ("/p/1.html", "/p/2.html", "/p/3.html")}
        assert rows[url["/p/1.html"]]["etag"] == '"t1"'
        assert rows[url["/p/2.html"]]["etag"] is None  # no-store: not kept
        long = rows[url["/p/3.html"]]
        assert long["next_fetch"] - long["fetched_at"] == pytest.approx(86400, abs=1)
        plain = rows[server.url(HOST, "/p/0.html")]
        assert plain["next_fetch"] - plain["fetched_at"] == pytest.approx(3600, abs=1)

        db_exec(db, "UPDATE pages SET next_fetch = 0")
        second = crawl("2")
        assert second["/p/1.html"].headers.get("If-None-Match") == '"t1"'
        assert second["/p/1.html"].status == 304
        assert "If-None-Match" not in second["/p/2.html"].headers  # a full GET
        assert db_rows(db)[url["/p/1.html"]]["etag"] == '"t2"'  # the 304's own ETag

        db_exec(db, "UPDATE pages SET next_fetch = 0")
        third = crawl("3")
        assert third["/p/1.html"].headers.get("If-None-Match") == '"t2"'
        assert third["/p/1.html"].status == 304
        assert db_rows(db)[url["/p/1.html"]]["etag"] == '"t3"'


def test_robots_txt_lifetime_from_a_real_server(tmp_path: Path) -> None:
    """The headers of a real answer reach the stored record: max-age=3600 is kept an hour,
    a year's max-age 24 hours, no header the configured expiry (RFC 9309 2.4)."""
    hosts = {"127.0.0.2": "max-age=3600", "127.0.0.3": "max-age=31536000", "127.0.0.4": None}
    server = RoutedSiteServer(build_site([HostSpec(h, pages=2) for h in hosts]))

    def robots(cache_control: str | None):
        def route(ask: Ask) -> Answer:
            headers = [("Content-Type", "text/plain")]
            if cache_control:
                headers.append(("Cache-Control", cache_control))
            return 200, headers, b"User-agent: *\nDisallow: /nothing\n"

        return route

    for host, cache_control in hosts.items():
        server.route(host, "/robots.txt", robots(cache_control))
    cache = tmp_path / "robots.sqlite"
    settings = loopback_settings(ROBOTSTXT_CACHE_PATH=cache, ROBOTSTXT_CACHE_EXPIRY=7200)
    with server:
        result = run_crawl(tmp_path, seeds=[server.url(h) for h in hosts], settings=settings)
    assert result.returncode == 0, result.log[-3000:]
    conn = sqlite3.connect(cache)
    kept = dict(conn.execute("SELECT origin, expires_at - fetched_at FROM robots"))
    conn.close()
    assert kept == {
        server.url("127.0.0.2").rstrip("/"): 3600,
        server.url("127.0.0.3").rstrip("/"): 86400,
        server.url("127.0.0.4").rstrip("/"): 7200,
    }
