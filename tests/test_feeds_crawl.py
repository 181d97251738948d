"""Feeds as URL sources on a real server (issue 39): the feeds a home page names in its head
(``<link rel="alternate">``: RSS, Atom, JSON Feed) and a seed that is an Atom feed are each fetched
once, read as sitemaps (never as pages), and their entries, which no page links to, fetched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawler.middlewares.sitemaps import FEEDS_PER_HOST
from devsite import HostSpec, build_site
from devsite.routed import Ask, RoutedSiteServer
from tests.crawling import loopback_settings, run_crawl
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_sitemaps import answer, hidden_page, robots_naming

pytestmark = pytest.mark.integration

HOST = "127.0.0.2"
OTHER = "127.0.0.3"
THIRD = "127.0.0.4"  # its robots.txt names the feed that is also a seed
FEEDS = {(HOST, "/feed.rss"), (HOST, "/blog/atom.xml"), (HOST, "/feed.json"),
         (OTHER, "/news/atom.xml"), (THIRD, "/feed.atom")}
COMMENTED = 10  # posts with a comments feed each: more than FEEDS_PER_HOST with the site's
ENTRIES = {(HOST, "/posts/1.html"), (HOST, "/posts/2.html"), (HOST, "/blog/a.html"),
           (HOST, "/post-from-atom.html"), (HOST, "/posts/json.html"), (OTHER, "/stories/1.html"),
           (OTHER, "/stories/2.html"), (THIRD, "/t.html")}


def head_page(title: str, links: str) -> bytes:
    """A page whose head names the site's two feeds (each page of a site does)."""
    return (
        f"<html><head><title>{title}</title>"
        '<link rel="alternate" type="application/rss+xml" title="Posts" href="/feed.rss">'
        '<link rel="alternate" type="application/atom+xml" href="blog/atom.xml">'
        '<link rel="alternate" type="application/feed+json" href="/feed.json">'
        '<link rel="alternate" type="application/json" href="/wp-json/wp/v2/pages/2">'
        '<link rel="alternate" hreflang="fr" href="/fr/">'
        f"</head><body><h1>{title}</h1>{links}</body></html>"
    ).encode()


def atom(entries: list[tuple[str, str]]) -> bytes:
    rows = "".join(f'<entry><title>{u}</title><link href="{u}"/><updated>{d}</updated></entry>'
                   for u, d in entries)
    return f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">{rows}</feed>'.encode()


def feeds_site() -> RoutedSiteServer:
    graph = build_site([HostSpec(HOST, pages=1), HostSpec(OTHER, pages=1),
                        HostSpec(THIRD, pages=1)], links_per_page=1, extras=False)
    server = RoutedSiteServer(graph)
    posts = "".join(f'<a href="/c/{i}/">Post {i}</a>' for i in range(COMMENTED))
    server.set_body(HOST, "/", head_page("Home", '<a href="/about.html">About</a>' + posts))
    for i in range(COMMENTED):  # a post naming its own comments feed, as WordPress's do
        server.set_body(HOST, f"/c/{i}/", (
            f'<html><head><title>Post {i}</title><link rel="alternate" '
            'type="application/rss+xml" href="feed/"></head><body>Post</body></html>').encode())
        server.route(HOST, f"/c/{i}/feed/", lambda ask: answer(
            b'<rss version="2.0"><channel></channel></rss>', "application/rss+xml"))
    server.set_body(HOST, "/about.html", head_page("About", '<a href="/">Home</a>'))
    for address, path in ENTRIES:
        server.set_body(address, path, hidden_page(len(path), path))

    def rss(ask: Ask) -> tuple[int, list[tuple[str, str]], bytes]:
        items = "".join(
            f"<item><title>Post {i}</title><link>{ask.server.url(HOST, f'/posts/{i}.html')}"
            f"</link><pubDate>Sun, 06 Sep 2009 18:20:00 CEST</pubDate></item>"
            for i in (1, 2))
        return answer(f'<?xml version="1.0"?><rss version="2.0"><channel><title>Posts</title>'
                      f"{items}</channel></rss>".encode(), "application/rss+xml")

    server.route(HOST, "/feed.rss", rss)
    # its folder is /blog/; the home page that names it vouches for / too
    server.route(HOST, "/blog/atom.xml", lambda ask: answer(atom([
        ("a.html", "2024-01-02T03:04:05Z"),
        (ask.server.url(HOST, "/post-from-atom.html"), "2024-01-02T03:04:05Z"),
    ]), "application/atom+xml"))
    server.route(HOST, "/feed.json", lambda ask: answer(json.dumps({
        "version": "https://jsonfeed.org/version/1.1", "title": "Posts",
        "items": [{"id": "j", "url": ask.server.url(HOST, "/posts/json.html")}],
    }).encode(), "application/feed+json"))
    # a seed; served as text/xml, as many are: its bytes say it is a feed
    server.route(OTHER, "/news/atom.xml", lambda ask: answer(atom([
        (ask.server.url(OTHER, "/stories/1.html"), "2024-01-02T03:04:05Z"),
        (ask.server.url(OTHER, "/stories/2.html"), "2024-01-02T03:04:05Z"),
    ]), "text/xml"))
    server.route(THIRD, "/robots.txt", robots_naming("/feed.atom"))
    server.route(THIRD, "/feed.atom", lambda ask: answer(atom([
        (ask.server.url(THIRD, "/t.html"), "2024-01-02T03:04:05Z")]), "application/atom+xml"))
    return server


def test_feeds_named_in_a_head_and_a_seed_feed_are_read_once_each(tmp_path: Path) -> None:
    check_feeds(tmp_path)


def check_feeds(tmp_path: Path, **settings: Any) -> None:
    server = feeds_site()
    with server:
        seeds = [server.url(HOST, "/"), server.url(OTHER, "/news/atom.xml"),
                 server.url(THIRD, "/feed.atom")]
        result = run_crawl(tmp_path, seeds=seeds, settings=loopback_settings(
            FRONTIER_MIN_DELAY=0.01, **settings))
        asked = [(r.host, r.path) for r in server.records]
    assert result.returncode == 0, result.log[-3000:]
    for feed in FEEDS:
        assert asked.count(feed) == 1, (feed, asked)
    assert set(asked) >= ENTRIES, sorted(ENTRIES - set(asked))
    for other in ("/fr/", "/wp-json/wp/v2/pages/2"):  # alternates that are no feeds
        assert (HOST, other) not in asked
    urls = {i["url"] for i in result.items}
    assert not any(u.endswith((".rss", ".xml")) for u in urls), sorted(urls)
    comment_feeds = [p for h, p in asked if p.startswith("/c/") and p.endswith("/feed/")]
    assert len(comment_feeds) == FEEDS_PER_HOST - 3, sorted(comment_feeds)
    assert result.stats["sitemaps/feeds_linked"] == FEEDS_PER_HOST
    assert result.stats["sitemaps/refused/feeds_per_host"] == COMMENTED - (FEEDS_PER_HOST - 3)
    assert result.log.count("feeds named by the pages of") == 1
    assert result.stats["sitemaps/seed_feeds"] == 1
    assert result.stats["sitemaps/seed_read_as_sitemap"] == 1
    assert "already read this crawl" not in result.log
    assert result.stats["sitemaps/entries"] == len(ENTRIES)


def test_feeds_through_the_redis_frontier(
    tmp_path: Path, redis_server: RedisServer  # noqa: F811
) -> None:
    """The feed requests' meta (the vouching folder) and the seed's survive a shared frontier."""
    check_feeds(tmp_path, FRONTIER_BACKEND="redis", FRONTIER_REDIS_KEY=fresh_key(),
                REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/0")
