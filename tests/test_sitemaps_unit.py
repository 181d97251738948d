"""The Scrapy-free sitemap core: file kinds, text sitemaps, lastmod, the book's bounds."""

from __future__ import annotations

import gzip

from crawler.robots import RobotsRecord, RobotsRules
from crawler.sitemaps import (
    CHANGED,
    GZIP,
    NEW,
    TEXT,
    UNCHANGED,
    UNKNOWN,
    XML,
    SitemapBook,
    SitemapFile,
    SitemapLimits,
    decide,
    file_kind,
    parse_lastmod,
    text_sitemap_urls,
)


def test_file_kind_reads_the_bytes_not_the_label() -> None:
    assert file_kind(gzip.compress(b"<urlset/>")) == GZIP
    assert file_kind(b'\xef\xbb\xbf <?xml version="1.0"?><urlset/>') == XML
    assert file_kind(b"http://a.example/1\nhttp://a.example/2\n") == TEXT
    assert file_kind(b"<!DOCTYPE html><html><body>login</body></html>") is None
    assert file_kind(b"\x89PNG\r\n") is None
    assert file_kind(b"") is None


def test_text_sitemap_is_bounded() -> None:
    body = b"# comment\nhttp://a.example/1\n\nftp://no\nhttps://a.example/2\nhttp://a.example/3\n"
    assert text_sitemap_urls(body, 10) == (
        ["http://a.example/1", "https://a.example/2", "http://a.example/3"], False, 1)
    assert text_sitemap_urls(body, 2) == (["http://a.example/1", "https://a.example/2"], True, 1)


def test_lastmod_w3c_datetimes_and_decisions() -> None:
    assert parse_lastmod("2024-05-17") == parse_lastmod("2024-05-17T00:00:00Z")
    assert parse_lastmod("2024-05-17T02:00:00+02:00") == parse_lastmod("2024-05-17")
    assert parse_lastmod("2024") == parse_lastmod("2024-01-01")
    assert parse_lastmod("2024-05") == parse_lastmod("2024-05-01")
    assert parse_lastmod("yesterday") is None and parse_lastmod("") is None
    t = parse_lastmod("2024-05-17")
    assert t is not None
    assert decide(t, None, t) == NEW
    assert decide(None, t, t) == UNKNOWN
    assert decide(t, t, t + 10) == UNCHANGED
    assert decide(t + 5, t, t + 10) == CHANGED
    assert decide(t + 10 * 86400, t, t) == UNKNOWN  # in the future: says nothing


def test_book_refuses_loops_nesting_files_and_caps_the_site() -> None:
    book = SitemapBook(SitemapLimits(max_site_urls=10, max_files=3))
    index = SitemapFile("http://a.example/index.xml", "http://a.example")
    assert book.want(index) == ""
    assert book.want(SitemapFile("http://a.example/index.xml#x", "http://a.example", 1)) == "loop"
    assert book.want(SitemapFile("http://a.example/deep.xml", "http://a.example", 3)) == "nesting"
    assert book.want(SitemapFile("http://a.example/1.xml", "http://a.example", 1)) == ""
    assert book.want(SitemapFile("http://a.example/2.xml", "http://a.example", 1)) == ""
    assert book.want(SitemapFile("http://a.example/3.xml", "http://a.example", 1)) == "files"
    assert book.take(7) == 7
    assert book.take(7) == 3
    assert book.take(1) == 0 and book.full
    assert book.first_time("site_cap") and not book.first_time("site_cap")


def test_robots_rules_list_their_sitemaps() -> None:
    body = ("User-agent: *\nDisallow: /x\nSitemap: https://a.example/s1.xml\n"
            "sitemap: /s2.xml.gz\nSitemap: https://a.example/s1.xml\n")
    rules = RobotsRules(RobotsRecord("https://a.example", "rules", 200, 0, 1, body), "bot")
    assert rules.sitemaps() == ["https://a.example/s1.xml", "https://a.example/s2.xml.gz"]


def test_read_sitemap_bounds_each_hostile_shape() -> None:
    from crawler.middlewares.sitemaps_reading import read_sitemap

    origin = SitemapFile("http://a.example/s.xml", "http://a.example")
    limits = SitemapLimits(max_urls=3, max_size=10_000)
    rows = "".join(f"<url><loc>http://a.example/{i}</loc><lastmod>2024-01-0{i + 1}</lastmod></url>"
                   for i in range(5))
    urlset = f'<?xml version="1.0"?><urlset>{rows}<url><loc>http://b.example/x</loc></url></urlset>'
    got = read_sitemap(urlset.encode(), "application/xml", "http://a.example/s.xml",
                       origin, limits)
    assert [e[0] for e in got.entries] == [f"http://a.example/{i}" for i in range(3)]
    assert got.entries[0][2] == parse_lastmod("2024-01-01")
    assert [p[0] for p in got.problems] == ["urls"]  # more than 3: the rest ignored
    bomb = read_sitemap(gzip.compress(b"<urlset>" + b" " * 50_000), None,
                        "http://a.example/b.xml.gz", origin, limits)
    assert [p[0] for p in bomb.problems] == ["size"] and not bomb.entries  # cut at the limit
    html = read_sitemap(b"<html><body>hi</body></html>", "text/html",
                        "http://a.example/s.xml", origin, limits)
    assert [p[0] for p in html.problems] == ["content_type"]
    index = read_sitemap(b"<sitemapindex><sitemap><loc>http://a.example/1.xml</loc></sitemap>"
                         b"</sitemapindex>", "text/xml", "http://a.example/i.xml",
                         origin, limits)
    assert index.index and index.children == ["http://a.example/1.xml"]
    foreign = read_sitemap(b"http://a.example/1\nhttp://evil.example/2\n", "text/plain",
                           "http://a.example/s.txt", origin, limits)
    assert [e[0] for e in foreign.entries] == ["http://a.example/1"] and foreign.foreign == 1
