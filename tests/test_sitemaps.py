"""Sitemaps against a real server on loopback: robots.txt names a sitemap index with a gzip
sitemap and a text sitemap; hostile sitemaps stay bounded; ``<lastmod>`` spares a recrawl the
pages that did not change."""

from __future__ import annotations

import gzip
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from devsite import HostSpec, build_site
from devsite.routed import Answer, Ask, RoutedSiteServer
from tests.crawling import loopback_settings, run_crawl, write_site
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

HOST = "127.0.0.2"
HIDDEN = 30  # pages no page links to: only the sitemaps list them


def answer(body: bytes, ctype: str = "application/xml") -> Answer:
    return 200, [("Content-Type", ctype)], body


def urlset(entries: list[tuple[str, str | None]]) -> bytes:
    rows = "".join(
        f"<url><loc>{loc}</loc>{f'<lastmod>{mod}</lastmod>' if mod else ''}</url>"
        for loc, mod in entries
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>'
    ).encode()


def index(locs: list[str]) -> bytes:
    rows = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}'
        "</sitemapindex>"
    ).encode()


def hidden_page(i: int, words: str = "quiet") -> bytes:
    body = f"<p>{words} {i}</p>"
    return f"<html><head><title>Hidden {i}</title></head><body>{body}</body></html>".encode()


def robots_naming(*paths: str) -> Any:
    def route(ask: Ask) -> Answer:
        lines = "".join(f"Sitemap: {ask.server.url(ask.address, p)}\n" for p in paths)
        return answer(f"User-agent: *\nAllow: /\n{lines}".encode(), "text/plain")

    return route


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))


def page_paths(server: RoutedSiteServer) -> list[str]:
    return [r.path for r in server.records
            if r.path != "/robots.txt" and "sitemap" not in r.path and r.path != "/sm.txt"]


def discovery_site() -> RoutedSiteServer:
    """A host whose robots.txt names a sitemap index of a gzip sitemap and a text sitemap,
    which together list HIDDEN pages no page links to."""
    graph = build_site([HostSpec(HOST, pages=3)], links_per_page=1, extras=False)
    server = RoutedSiteServer(graph)
    for i in range(HIDDEN):
        server.set_body(HOST, f"/hidden/{i}.html", hidden_page(i))
    server.route(HOST, "/robots.txt", robots_naming("/sitemap_index.xml"))
    server.route(HOST, "/sitemap_index.xml", lambda ask: answer(index([
        ask.server.url(HOST, "/sitemap-a.xml.gz"), ask.server.url(HOST, "/sm.txt")])))
    half = HIDDEN // 2

    def gz(ask: Ask) -> Answer:
        body = urlset([(ask.server.url(HOST, f"/hidden/{i}.html"), "2024-01-02")
                       for i in range(half)])
        return answer(gzip.compress(body), "application/x-gzip")

    server.route(HOST, "/sitemap-a.xml.gz", gz)
    server.route(HOST, "/sm.txt", lambda ask: answer("".join(
        ask.server.url(HOST, f"/hidden/{i}.html") + "\n" for i in range(half, HIDDEN)
    ).encode(), "text/plain; charset=utf-8"))
    return server


def check_discovery(server: RoutedSiteServer, result: Any, paths: list[str]) -> None:
    assert result.returncode == 0, result.log[-3000:]
    found = {i["url"] for i in result.items if i["status"] == 200}
    hidden = {server.url(HOST, f"/hidden/{i}.html") for i in range(HIDDEN)}
    assert hidden <= found, sorted(hidden - found)
    # each sitemap asked once, after robots.txt
    for p in ("/sitemap_index.xml", "/sitemap-a.xml.gz", "/sm.txt"):
        assert paths.count(p) == 1
    assert paths[0] == "/robots.txt"
    assert result.stats["sitemaps/files_read"] == 2
    assert result.stats["sitemaps/entries"] == HIDDEN
    assert not any(i["url"].endswith((".xml", ".gz", ".txt")) for i in result.items)


def test_robots_sitemap_index_gzip_and_text_find_unlinked_pages(tmp_path: Path) -> None:
    server = discovery_site()
    with server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=loopback_settings(
            FRONTIER_MIN_DELAY=0.01))
        paths = [r.path for r in server.records]
    check_discovery(server, result, paths)


def test_sitemaps_through_the_redis_frontier(
    tmp_path: Path, redis_server: RedisServer  # noqa: F811
) -> None:
    server = discovery_site()
    with server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=loopback_settings(
            FRONTIER_MIN_DELAY=0.01, FRONTIER_BACKEND="redis", FRONTIER_REDIS_KEY=fresh_key(),
            REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/0"))
        paths = [r.path for r in server.records]
    check_discovery(server, result, paths)


def test_a_site_config_switch_probes_sitemap_xml(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOST, pages=2)], links_per_page=1, extras=False)
    server = RoutedSiteServer(graph)
    for i in range(5):
        server.set_body(HOST, f"/hidden/{i}.html", hidden_page(i))
    server.route(HOST, "/sitemap.xml", lambda ask: answer(urlset(
        [(ask.server.url(HOST, f"/hidden/{i}.html"), None) for i in range(5)])))
    sites = tmp_path / "sites"
    write_site(sites, "probing", "[settings]\nSITEMAPS_PROBE = true\n")
    with server:
        result = run_crawl(tmp_path, "probing", seeds=server.seeds(), sites_dir=sites,
                           settings=loopback_settings(FRONTIER_MIN_DELAY=0.01))
        paths = [r.path for r in server.records]
    assert result.returncode == 0, result.log[-3000:]
    assert paths.count("/sitemap.xml") == 1
    assert {f"/hidden/{i}.html" for i in range(5)} <= set(paths)


def test_hostile_sitemaps_are_bounded_with_one_log_line_each(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOST, pages=2)], links_per_page=1, extras=False)
    server = RoutedSiteServer(graph)
    many = 400
    for i in range(many):
        server.set_body(HOST, f"/many/{i}.html", hidden_page(i))
    server.route(HOST, "/robots.txt", robots_naming(
        "/bomb.xml.gz", "/self_index.xml", "/sitemap_html.xml", "/sitemap_image.xml"))
    # ~30 KB on the wire; an entry only past the limit: read if the bomb were inflated whole
    server.set_body(HOST, "/past.html", hidden_page(many))
    server.route(HOST, "/bomb.xml.gz", lambda ask: answer(gzip.compress(
        b"<urlset>" + b" " * 30_000_000
        + f"<url><loc>{ask.server.url(HOST, '/past.html')}</loc></url></urlset>".encode()),
        "application/gzip"))
    server.route(HOST, "/self_index.xml", lambda ask: answer(index([
        ask.server.url(HOST, "/self_index.xml"), ask.server.url(HOST, "/sitemap_many.xml")])))
    server.route(HOST, "/sitemap_many.xml", lambda ask: answer(urlset(
        [(ask.server.url(HOST, f"/many/{i}.html"), None) for i in range(many)])))
    server.route(HOST, "/sitemap_html.xml", lambda ask: answer(
        b"<!DOCTYPE html><html><body>Log in</body></html>", "text/html"))
    server.route(HOST, "/sitemap_image.xml", lambda ask: answer(b"\x89PNG\r\n\x1a\n" + b"\0" * 50,
                                                               "image/png"))
    with server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=loopback_settings(
            FRONTIER_MIN_DELAY=0.01,
            TUNING={"sitemap_max_bytes": 5_000_000, "sitemap_max_urls": 200},
            SITEMAPS_MAX_SITE_URLS=150))
        paths = [r.path for r in server.records]
    assert result.returncode == 0, result.log[-3000:]
    stats, log = result.stats, result.log

    def one_line(fragment: str) -> None:
        lines = [line for line in log.splitlines() if fragment in line and "WARNING" in line]
        assert len(lines) == 1, (fragment, lines)

    one_line("bomb.xml.gz inflates past 5000000 bytes (sitemap_max_bytes; a gzip bomb?): cut")
    one_line("self_index.xml (listed in")  # the index listing itself: not asked again
    one_line("sitemap_many.xml lists over 200 entries")
    one_line("over the crawl's 150 (SITEMAPS_MAX_SITE_URLS)")
    one_line("sitemap_html.xml is no sitemap (Content-Type text/html")
    one_line("sitemap_image.xml is no sitemap (Content-Type image/png")
    assert paths.count("/self_index.xml") == 1
    assert stats["sitemaps/refused/loop"] == 1
    assert stats["sitemaps/cut/size"] == 1  # inflated up to the limit, read there
    assert "/past.html" not in paths  # and no further
    assert stats["sitemaps/entries"] == 150
    fetched_many = [p for p in paths if p.startswith("/many/")]
    assert len(fetched_many) == 150


def test_lastmod_spares_a_recrawl_the_unchanged_pages(tmp_path: Path) -> None:
    pages = 60
    graph = build_site([HostSpec(HOST, pages=0)], links_per_page=1, extras=False)
    server = RoutedSiteServer(graph)
    for i in range(pages):
        server.set_body(HOST, f"/doc/{i}.html", hidden_page(i))
    lastmod = {i: iso(server.epoch) for i in range(pages)}
    server.route(HOST, "/robots.txt", robots_naming("/sitemap.xml"))
    server.route(HOST, "/sitemap.xml", lambda ask: answer(urlset(
        [(ask.server.url(HOST, f"/doc/{i}.html"), lastmod[i]) for i in range(pages)])))
    db = tmp_path / "crawldb.sqlite"
    settings = loopback_settings(FRONTIER_MIN_DELAY=0.01, CRAWLDB_PATH=db,
                                 RECRAWL_INTERVAL=3600,
                                 TUNING={"recrawl_sync_delta": False})
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    with server:
        first = run_crawl(tmp_path / "1", seeds=server.seeds(), settings=settings)
        assert first.returncode == 0, first.log[-3000:]
        asked1 = [p for p in page_paths(server) if p.startswith("/doc/")]
        assert len(set(asked1)) == pages
        # 5 % of the pages change, and the sitemap says so; everything is due again
        changed = [7, 21, 40]
        for i in changed:
            server.set_body(HOST, f"/doc/{i}.html", hidden_page(i, "changed"))
            lastmod[i] = iso(time.time() + 1)
        conn = sqlite3.connect(db)
        conn.execute("UPDATE pages SET next_fetch = 0")
        conn.commit()
        conn.close()
        server.reset()
        second = run_crawl(tmp_path / "2", seeds=server.seeds(), settings=settings)
        asked2 = [p for p in page_paths(server) if p.startswith("/doc/")]
    assert second.returncode == 0, second.log[-3000:]
    assert sorted(asked2) == sorted(f"/doc/{i}.html" for i in changed)
    assert len(asked2) <= 0.10 * pages
    assert second.stats["sitemaps/unchanged_skipped"] == pages - len(changed)
    assert second.stats["crawldb/sitemap_unchanged"] == pages - len(changed)
    texts = {i["url"]: i["text"] for i in second.items if i["status"] == 200}
    assert all("changed" in texts[server.url(HOST, f"/doc/{i}.html")] for i in changed)
    # the skipped pages come back when due again, not now
    conn = sqlite3.connect(db)
    due_now = conn.execute("SELECT count(*) FROM pages WHERE next_fetch <= ?",
                           (time.time(),)).fetchone()[0]
    conn.close()
    assert due_now == 0


OTHER = "127.0.0.3"
NAMES = ("upper", "lower", "octet", "untyped", "first", "second", "proved")
ELSEWHERE = "/docs/sitemap.xml"


def web_shapes_site() -> RoutedSiteServer:
    """robots.txt of HOST names: two sitemaps whose URLs differ only in case (two files: the
    server tells case apart), a text sitemap served as ``application/octet-stream`` and
    another with no ``Content-Type``, both with a BOM, a comment and blank lines; an index
    whose one entry has two ``<loc>`` (the second in a folder, listing pages outside it: the
    index is named in robots.txt, so its sitemaps may); and a sitemap on OTHER (a
    cross-submit) that lists pages of HOST (proved by its robots.txt), pages of its own
    folder, and pages of OTHER outside its folder (refused by the folder rule)."""
    graph = build_site([HostSpec(HOST, pages=1), HostSpec(OTHER, pages=1)], links_per_page=1,
                       extras=False)
    server = RoutedSiteServer(graph)
    for name in NAMES:
        for i in range(2):
            server.set_body(HOST, f"/{name}/{i}.html", hidden_page(i, name))
    for name in ("docs/inside", "outside"):
        for i in range(2):
            server.set_body(OTHER, f"/{name}/{i}.html", hidden_page(i, name))

    def robots(ask: Ask) -> Answer:
        lines = "".join(f"Sitemap: {ask.server.url(HOST, p)}\n" for p in (
            "/Sitemap.xml", "/sitemap.xml", "/urls.txt", "/urls-untyped", "/index.xml"))
        lines += f"Sitemap: {ask.server.url(OTHER, ELSEWHERE)}\n"
        return answer(f"User-agent: *\nAllow: /\n{lines}".encode(), "text/plain")

    def pages(ask: Ask, name: str, address: str = HOST) -> list[tuple[str, str | None]]:
        return [(ask.server.url(address, f"/{name}/{i}.html"), None) for i in range(2)]

    def text(ask: Ask, name: str) -> bytes:
        lines = [ask.server.url(HOST, f"/{name}/{i}.html") for i in range(2)]
        return ("\ufeff# the pages of the site\n\n" + "\n\n".join(lines) + "\n").encode()

    server.route(HOST, "/robots.txt", robots)
    server.route(HOST, "/Sitemap.xml", lambda ask: answer(urlset(pages(ask, "upper"))))
    server.route(HOST, "/sitemap.xml", lambda ask: answer(urlset(pages(ask, "lower"))))
    server.route(HOST, "/urls.txt",
                 lambda ask: answer(text(ask, "octet"), "application/octet-stream"))
    server.route(HOST, "/urls-untyped", lambda ask: (200, [], text(ask, "untyped")))
    server.route(HOST, "/index.xml", lambda ask: answer(
        b'<?xml version="1.0"?><sitemapindex><sitemap>'
        + f"<loc>{ask.server.url(HOST, '/first.xml')}</loc>".encode()
        + f"<loc>{ask.server.url(HOST, '/maps/second.xml')}</loc>".encode()
        + b"</sitemap></sitemapindex>"))
    server.route(HOST, "/first.xml", lambda ask: answer(urlset(pages(ask, "first"))))
    server.route(HOST, "/maps/second.xml", lambda ask: answer(urlset(pages(ask, "second"))))
    server.route(OTHER, ELSEWHERE, lambda ask: answer(urlset(
        pages(ask, "docs/inside", OTHER) + pages(ask, "outside", OTHER) + pages(ask, "proved"))))
    return server


def test_sitemaps_read_as_the_web_writes_them(tmp_path: Path) -> None:
    """Issue 35, defect 5, on a real server (:func:`web_shapes_site`): the access log shows
    every sitemap asked once, every page they may list asked, none outside the folder."""
    server = web_shapes_site()
    with server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=loopback_settings(
            FRONTIER_MIN_DELAY=0.01))
        asked = {(r.host, r.path) for r in server.records}
        paths = [r.path for r in server.records]
    assert result.returncode == 0, result.log[-3000:]
    for p in ("/Sitemap.xml", "/sitemap.xml", "/urls.txt", "/urls-untyped", "/index.xml",
              "/first.xml", "/maps/second.xml", ELSEWHERE):
        assert paths.count(p) == 1, (p, sorted(asked))
    for name in NAMES:
        for i in range(2):
            assert (HOST, f"/{name}/{i}.html") in asked, (name, sorted(asked))
    for i in range(2):
        assert (OTHER, f"/docs/inside/{i}.html") in asked, sorted(asked)
        assert (OTHER, f"/outside/{i}.html") not in asked, sorted(asked)
    assert result.stats["sitemaps/out_of_folder"] == 2
    lines = [line for line in result.log.splitlines() if "SITEMAPS_FOLDER_RULE" in line]
    assert len(lines) == 1, lines


def test_a_site_config_turns_the_folder_rule_off(tmp_path: Path) -> None:
    server = web_shapes_site()
    sites = tmp_path / "sites"
    write_site(sites, "lenient", "[settings]\nSITEMAPS_FOLDER_RULE = false\n")
    with server:
        result = run_crawl(tmp_path, "lenient", seeds=server.seeds(), sites_dir=sites,
                           settings=loopback_settings(FRONTIER_MIN_DELAY=0.01))
        asked = {(r.host, r.path) for r in server.records}
    assert result.returncode == 0, result.log[-3000:]
    for i in range(2):
        assert (OTHER, f"/outside/{i}.html") in asked, sorted(asked)
    assert "sitemaps/out_of_folder" not in result.stats
