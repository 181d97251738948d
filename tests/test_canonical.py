"""Canonical URLs in a real crawl on loopback: pages served under several URLs that name one
canonical URL are indexed once; a canonical loop stays bounded; another site's canonical URL is
not believed. Plus the Scrapy-free rules (crawler.content.canonical)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crawler.content.canonical import (
    CanonicalChains,
    CanonicalPolicy,
    link_header_canonical,
)
from crawler.content.html import parse_html
from crawler.frontier import normalize_url
from crawler.frontier.urls import registered_domain_function
from devsite import HostSpec, build_site
from devsite.routed import Answer, Ask, RoutedSiteServer
from tests.crawling import loopback_settings, run_crawl

HOST = "127.0.0.2"
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
]


def page(title: str, seed: int, canonical: str | None = None) -> bytes:
    """A page whose text differs from every other page's (no near-duplicate verdicts)."""
    text = " ".join(WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)] + str(seed * 100 + i)
                    for i in range(60))
    link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (f"<html><head><title>{title}</title>{link}</head>"
            f"<body><main><p>{text}</p></main></body></html>").encode()


def html(body: bytes, *headers: tuple[str, str]) -> Answer:
    return 200, [("Content-Type", "text/html; charset=utf-8"), *headers], body


# -- the rules -----------------------------------------------------------------------------------


def test_link_header_and_html_canonical_are_read() -> None:
    assert link_header_canonical(['<https://a.example/x>; rel="preload", '
                                  '<https://a.example/c>; rel="canonical"']) == "https://a.example/c"
    assert link_header_canonical(["<https://a.example/c>; rel=canonical"]) == "https://a.example/c"
    assert link_header_canonical(['<https://a.example/n>; rel="next"']) is None
    parsed = parse_html(b'<html><head><link rel="Canonical" href=" /c.html "></head></html>')
    assert parsed.canonical_href == "/c.html"


def test_policy_honours_only_the_pages_own_site() -> None:
    domain = CanonicalPolicy("domain", normalize_url, registered_domain_function())
    host = CanonicalPolicy("host", normalize_url)
    page = "https://www.example.com/a?utm=1"
    assert domain.judge(page, "/a") == ("https://www.example.com/a", "honoured")
    assert domain.judge(page, "https://example.com/a") == ("https://example.com/a", "honoured")
    assert host.judge(page, "https://example.com/a") == (None, "other_site")
    assert domain.judge(page, "https://spam.example.net/a") == (None, "other_site")
    assert domain.judge("https://www.example.com/a", "/a#top") == (None, "self")
    assert domain.judge(page, "javascript:alert(1)") == (None, "invalid")
    assert CanonicalPolicy("off", normalize_url).judge(page, "/a") == (None, "off")


def test_the_crawls_domain_scope_reads_sites_as_the_whole_public_suffix_list_does() -> None:
    """``CANONICAL_SCOPE = "domain"`` (``canonical_policy``): a page on alice.github.io naming
    a URL on bob.github.io names another site (github.io is a rule of the list's private
    section: another user's), as one on a.site1.test naming site2.test does (the list's
    implicit ``*`` rule); its own site's hosts are believed."""
    from crawler.spiders.canonical import canonical_policy

    policy = canonical_policy({"CANONICAL_SCOPE": "domain"})
    page = "https://alice.github.io/post"
    assert policy.judge(page, "https://bob.github.io/post") == (None, "other_site")
    assert policy.judge(page, "https://www.alice.github.io/p") == (
        "https://www.alice.github.io/p", "honoured")
    assert policy.judge("https://a.blogspot.com/x", "https://b.blogspot.com/x") == (
        None, "other_site")
    assert policy.judge("http://a.site1.test/x", "http://site2.test/x") == (None, "other_site")
    assert policy.judge("http://a.site1.test/x", "http://b.site1.test/x") == (
        "http://b.site1.test/x", "honoured")


def test_chains_follow_names_and_stop_at_loops() -> None:
    chains = CanonicalChains(max_chain=5)
    assert chains.target("/a", "/b") == ("/b", "alias")
    assert chains.target("/b", "/a") == (None, "loop")  # /b stays a document, /a its alias
    assert chains.target("/x", "/y") == ("/y", "alias")
    assert chains.target("/w", "/x") == ("/y", "chain")  # /x named /y: /w goes there too
    long = CanonicalChains(max_chain=2)
    for i in range(5):
        long.target(f"/{i}", f"/{i + 1}")
    target, how = long.target("/s", "/0")
    assert how == "chain" and target is not None  # bounded: stops after two hops


# -- a real crawl --------------------------------------------------------------------------------


@pytest.mark.integration
def test_variants_naming_one_canonical_are_indexed_once(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOST, pages=0)], links_per_page=1, extras=False)
    server = RoutedSiteServer(graph)
    variants = ["/article.html?utm_source=feed", "/print/article.html", "/amp/article.html",
                "/article.html?ref=home"]

    def home(ask: Ask) -> Answer:
        links = "".join(f'<a href="{v}">variant</a>' for v in
                        [*variants, "/header.html", "/loop-a.html", "/foreign.html"])
        return html(f"<html><body>{links}</body></html>".encode())

    def canonical_to_article(n: int) -> object:
        return lambda ask: html(page("Article", n, ask.server.url(HOST, "/article.html")))

    server.route(HOST, "/", home)
    server.route(HOST, "/article.html", lambda ask: html(page("Article", 0, "/article.html")))
    for n, v in enumerate(variants, 1):
        server.route(HOST, v, canonical_to_article(n))  # type: ignore[arg-type]
    # a Link header instead of the HTML tag
    server.route(HOST, "/header.html", lambda ask: html(
        page("Header", 9), ("Link", f'<{ask.server.url(HOST, "/article.html")}>; rel="canonical"')))
    server.route(HOST, "/loop-a.html", lambda ask: html(page("Loop A", 10, "/loop-b.html")))
    server.route(HOST, "/loop-b.html", lambda ask: html(page("Loop B", 11, "/loop-a.html")))
    server.route(HOST, "/foreign.html", lambda ask: html(
        page("Foreign", 12, "http://127.0.0.3:9/stolen.html")))
    with server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=loopback_settings(
            FRONTIER_MIN_DELAY=0.01))
        paths = [r.path for r in server.records]
    assert result.returncode == 0, result.log[-3000:]
    assert "/article.html" in paths  # no page links to it: queued from the canonical names
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    rows = {url: (has_doc, alias) for url, has_doc, alias in conn.execute(
        "SELECT url, has_doc, alias_of FROM pages")}
    ids = dict(conn.execute("SELECT url, id FROM pages"))
    conn.close()
    article = server.url(HOST, "/article.html")
    assert rows[article][0] == 1
    named = [u for u in rows if "article" in u or u.endswith("/header.html")]
    docs = [u for u in named if rows[u][0]]
    assert docs == [article], docs  # indexed once
    assert all(rows[u][1] == ids[article] for u in named if u != article)
    assert result.stats["canonical/honoured"] >= len(variants) + 1
    # the loop: one of the two stays a document, the other is its alias
    a, b = server.url(HOST, "/loop-a.html"), server.url(HOST, "/loop-b.html")
    assert sorted([rows[a][0], rows[b][0]]) == [0, 1]
    assert result.stats["index/canonical_loop"] == 1
    # another site's URL is not believed: the page is a document of its own
    assert rows[server.url(HOST, "/foreign.html")][0] == 1
    assert result.stats["canonical/other_site"] == 1
    assert "stolen" not in " ".join(paths)
