"""Sitemaps read as the rest of the web reads them (issue 35, defect 5): case-differing
``Sitemap:`` lines, files read by their bytes whatever their label, repeated ``<loc>``, the
sitemaps.org folder rule, and crawler-commons' other behaviours (cut files, markup in
``<loc>``, entities, lastmod formats, limits). Cases of our own, in the spirit of
crawler-commons' ``SiteMapParserTest``."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import pytest

from crawler.middlewares.sitemaps_reading import SitemapReading, read_sitemap
from crawler.robots import RobotsRecord, RobotsRules
from crawler.sitemaps import (
    FOREIGN,
    IN,
    OUT_OF_FOLDER,
    Coverage,
    SitemapFile,
    SitemapLimits,
    parse_lastmod,
    read_xml,
)

SITE = "https://shop.example"
LIMITS = SitemapLimits(max_urls=100, max_size=100_000)


def read(body: bytes, url: str = f"{SITE}/sitemap.xml", ctype: str | None = None, *,
         named: bool = True, origin: str = SITE, folder_rule: bool = True,
         limits: SitemapLimits = LIMITS) -> SitemapReading:
    return read_sitemap(body, ctype, url, SitemapFile(url, origin, named=named), limits,
                        folder_rule)


def locs(reading: SitemapReading) -> list[str]:
    return [loc for loc, _, _ in reading.entries]


def urlset(*rows: str) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(rows) + "</urlset>").encode()


# -- robots.txt: every Sitemap: line as written ------------------------------------------------


def test_sitemap_lines_that_differ_in_case_are_all_kept() -> None:
    body = ("Sitemap: https://shop.example/Sitemap.xml\n"
            "SITEMAP: https://shop.example/sitemap.xml\n"
            "sitemap: https://shop.example/SITEMAP.XML\n"
            "Sitemap: https://shop.example/sitemap.xml\n")  # an exact repeat: once
    rules = RobotsRules(RobotsRecord(SITE, "rules", 200, 0, 1, body), "bot")
    assert rules.sitemaps() == [f"{SITE}/Sitemap.xml", f"{SITE}/sitemap.xml",
                                f"{SITE}/SITEMAP.XML"]


# -- a text sitemap is read by its content ------------------------------------------------------


@pytest.mark.parametrize("ctype", [None, "application/octet-stream", "text/html",
                                   "application/xml", "text/plain; charset=utf-8"])
def test_a_text_sitemap_is_read_whatever_its_label(ctype: str | None) -> None:
    body = (b"\xef\xbb\xbf# pages of the shop\r\n\r\n  https://shop.example/a  \r\n\n"
            b"https://shop.example/b\n# the end\n")
    got = read(body, f"{SITE}/urls.txt", ctype)
    assert locs(got) == [f"{SITE}/a", f"{SITE}/b"] and got.read and not got.problems


def test_a_gzip_text_sitemap_is_read_and_junk_text_is_not() -> None:
    got = read(gzip.compress(b"\nhttps://shop.example/a\n"), f"{SITE}/urls.txt.gz",
               "application/octet-stream")
    assert locs(got) == [f"{SITE}/a"]
    for junk in (b"this is no sitemap\nhttps://shop.example/a\n", b'{"error": "not found"}',
                 b"\x00\x01https://shop.example/a"):
        got = read(junk, f"{SITE}/urls.txt", "text/plain")
        assert not got.entries and [p[0] for p in got.problems] == ["content_type"]


def test_a_text_sitemap_cut_at_the_size_limit_loses_its_partial_last_line() -> None:
    body = b"".join(b"https://shop.example/page-%03d\n" % i for i in range(100))
    limits = SitemapLimits(max_urls=1000, max_size=len(body) // 2 + 27)  # "...page-0"
    got = read(body, f"{SITE}/urls.txt", limits=limits)
    assert got.entries and all(len(loc) == len(f"{SITE}/page-000") for loc in locs(got))
    assert [p[0] for p in got.problems] == ["size"]


def test_a_gzip_sitemap_past_the_size_limit_is_inflated_up_to_it_and_read_there() -> None:
    spaces = 30_000_000  # a bomb: ~30 KB on the wire, 30 MB inflated
    body = gzip.compress(urlset(*(f"<url><loc>{SITE}/a{i}</loc></url>" for i in range(3)))[:-9]
                         + b" " * spaces + f"<url><loc>{SITE}/past</loc></url></urlset>".encode())
    limits = SitemapLimits(max_urls=1000, max_size=1_000_000)
    tracemalloc.start()
    try:
        got = read(body, f"{SITE}/sitemap.xml.gz", "application/gzip", limits=limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert locs(got) == [f"{SITE}/a{i}" for i in range(3)]  # the entries before the cut
    assert got.problems == [("size", "inflates past 1000000 bytes (sitemap_max_bytes; a gzip "
                                     "bomb?): cut, read up to there")]
    assert peak < 4 * limits.max_size < spaces  # the inflation stopped at the limit
    text = gzip.compress(b"".join(b"https://shop.example/page-%03d\n" % i for i in range(100)))
    got = read(text, f"{SITE}/urls.txt.gz", limits=SitemapLimits(max_urls=1000, max_size=1000))
    assert locs(got) == [f"{SITE}/page-{i:03d}" for i in range(1000 // 30)]  # whole lines only


# -- repeated <loc>: each is kept -------------------------------------------------------------


def test_an_index_entry_with_two_locs_names_two_sitemaps() -> None:
    body = (b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap>'
            b"<loc>https://shop.example/s1.xml</loc><lastmod>2024-03-01</lastmod>"
            b"<loc>https://shop.example/s2.xml</loc></sitemap>"
            b"<sitemap><loc>https://shop.example/s3.xml</loc></sitemap></sitemapindex>")
    got = read(body, f"{SITE}/index.xml")
    assert got.index
    assert got.children == [f"{SITE}/s1.xml", f"{SITE}/s2.xml", f"{SITE}/s3.xml"]


def test_a_url_entry_with_two_locs_lists_two_pages_each_with_its_lastmod() -> None:
    got = read(urlset("<url><lastmod>2024-01-02</lastmod><loc>https://shop.example/a</loc>"
                      "<loc>https://shop.example/b</loc><lastmod>2024-05-06</lastmod></url>"))
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/a", parse_lastmod("2024-01-02")), (f"{SITE}/b", parse_lastmod("2024-05-06"))]


# -- the folder rule ---------------------------------------------------------------------------


def test_the_folder_rule_of_sitemaps_org() -> None:
    sitemap = "http://example.com/catalog/sitemap.xml"
    rule = Coverage(sitemap, "http://example.com", named=False, folder_rule=True)
    assert rule.entry("http://example.com/catalog/show?item=233&user=3453") == IN
    assert rule.entry("http://EXAMPLE.com:80/catalog/x") == IN
    assert rule.entry("http://example.com./catalog/x") == IN
    assert rule.entry("http://example.com/image/show?item=233&user=3453") == OUT_OF_FOLDER
    assert rule.entry("http://example.com/catalogue") == OUT_OF_FOLDER
    assert rule.entry("https://example.com/catalog/page1.php") == OUT_OF_FOLDER
    assert rule.entry("http://example.com:8080/catalog/x") == OUT_OF_FOLDER
    assert rule.entry("http://other.example/catalog/x") == FOREIGN
    assert rule.entry("http://example.com@other.example/catalog/x") == FOREIGN
    # a "/" in the query is no folder
    rule = Coverage("https://example.com/index.php?route=feed/sitemap", "https://example.com",
                    named=False, folder_rule=True)
    assert rule.entry("https://example.com/catalog/page1.php") == IN


def test_robots_txt_proves_ownership_of_its_host_across_folders_and_hosts() -> None:
    # named in robots.txt: any URL of the naming host, whatever the folder
    rule = Coverage(f"{SITE}/feeds/sitemap.xml", SITE, named=True, folder_rule=True)
    assert rule.entry(f"{SITE}/anything/else") == IN
    assert rule.entry("http://shop.example/anything") == IN  # robots.txt proves the host
    # a cross-submit: shop.example's robots.txt names a sitemap on a CDN host
    rule = Coverage("https://cdn.example/shop/sitemap.xml", SITE, named=True, folder_rule=True)
    assert rule.entry(f"{SITE}/p/1") == IN
    assert rule.entry("https://cdn.example/shop/p/1") == IN
    assert rule.entry("https://cdn.example/other/p/1") == OUT_OF_FOLDER
    assert rule.entry("https://third.example/p/1") == FOREIGN


def test_entries_outside_the_folder_are_refused_and_counted() -> None:
    body = urlset("<url><loc>https://shop.example/blog/1</loc></url>",
                  "<url><loc>https://shop.example/shop/1</loc></url>",
                  "<url><loc>https://evil.example/blog/1</loc></url>")
    got = read(body, f"{SITE}/blog/sitemap.xml", named=False)
    assert locs(got) == [f"{SITE}/blog/1"]
    assert (got.out_of_folder, got.foreign) == (1, 1)
    got = read(body, f"{SITE}/blog/sitemap.xml", named=True)  # robots.txt named it
    assert locs(got) == [f"{SITE}/blog/1", f"{SITE}/shop/1"] and got.foreign == 1
    got = read(body, f"{SITE}/blog/sitemap.xml", named=False, folder_rule=False)
    assert locs(got) == [f"{SITE}/blog/1", f"{SITE}/shop/1"] and got.foreign == 1


def test_an_index_names_sitemaps_of_its_own_site_only() -> None:
    body = (b"<sitemapindex><sitemap><loc>https://shop.example/s1.xml</loc></sitemap>"
            b"<sitemap><loc>https://evil.example/s2.xml</loc></sitemap>"
            b"<sitemap><loc>http://shop.example/s3.xml</loc></sitemap></sitemapindex>")
    got = read(body, f"{SITE}/index.xml", named=False)
    assert got.children == [f"{SITE}/s1.xml"] and got.off_site == 2
    got = read(body, "https://cdn.example/index.xml", named=True)  # shop's robots.txt names it
    assert got.children == [f"{SITE}/s1.xml", "http://shop.example/s3.xml"]
    assert got.off_site == 1
    got = read(body, f"{SITE}/index.xml", named=False, folder_rule=False)
    assert len(got.children) == 3


# -- crawler-commons' other behaviours -------------------------------------------------------


def test_locations_written_oddly_are_read() -> None:
    body = ("<sitemapindex><sitemap>\n https://shop.example/s.jsp?a=1&amp;b=2\n</sitemap>"
            "<sitemap><loc>\n <![CDATA[\u00a0https://shop.example/s2.xml ]]> \u2000\n</loc>"
            "</sitemap><sitemap><loc>https://shop.example/dyn<![CDATA[?d=1&all=0]]></loc>"
            "</sitemap></sitemapindex>").encode()
    assert read(body, f"{SITE}/index.xml").children == [
        f"{SITE}/s.jsp?a=1&b=2", f"{SITE}/s2.xml", f"{SITE}/dyn?d=1&all=0"]
    got = read(urlset("<url><loc><url><![CDATA[https://shop.example/jobs/1]]></url></loc>"
                      "<lastmod>2015-04-28</lastmod></url>"))
    assert locs(got) == [f"{SITE}/jobs/1"]


def test_malformed_xml_is_read_as_far_as_it_goes_never_half_a_url() -> None:
    body = urlset("<url><loc>https://shop.example/a</loc></url>",
                  "<url><loc>https://shop.example/b</loc>",  # </url> forgotten
                  "<url><loc>https://shop.example/c</loc></url>")
    assert locs(read(body)) == [f"{SITE}/a", f"{SITE}/b", f"{SITE}/c"]
    cut = urlset("<url><loc>https://shop.example/a</loc></url>")[:-9] + (
        b"<url><loc>https://shop.example/bc")
    assert locs(read(cut)) == [f"{SITE}/a"]
    assert [p[0] for p in read(b"<urlset").problems + read(b"<").problems] == [
        "unreadable", "unreadable"]


def test_xml_entities_are_never_expanded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("https://shop.example/secret-from-disk")
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY disk SYSTEM "file://{secret}">'
            '<!ENTITY net SYSTEM "http://127.0.0.1:9/x"><!ENTITY here "https://shop.example/e">'
            ']><urlset><url><loc>https://shop.example/ok</loc></url>'
            "<url><loc>&disk;</loc></url><url><loc>&net;</loc></url>"
            "<url><loc>&here;</loc></url><url>&here;</url></urlset>").encode()
    got = read(body)
    assert locs(got) == [f"{SITE}/ok"]
    assert [p[0] for p in got.problems] == ["entities"]


def test_a_billion_laughs_stays_small() -> None:
    """libxml2 gives up on the file at the reference (its amplification guard); nothing is
    expanded either way."""
    lol = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY l0 "lol">{lol}]>'
            "<urlset><url><loc>https://shop.example/ok</loc></url>"
            "<url><loc>https://shop.example/&l9;</loc></url></urlset>").encode()
    assert locs(read(body)) == [f"{SITE}/ok"]


def test_the_per_file_limit_counts_every_loc() -> None:
    body = urlset(*(f"<url><loc>https://shop.example/{i}</loc></url>" for i in range(12)))
    assert len(read_xml(body, 12).rows) == 12 and not read_xml(body, 12).more
    capped = read_xml(body, 10)
    assert [r[0] for r in capped.rows][-1] == f"{SITE}/9" and capped.more
    assert SitemapLimits().max_urls == 50_000 and SitemapLimits().max_size == 52_428_800


@pytest.mark.parametrize("text, same_as", [
    ("1997-07-16T19:20+01:00", "1997-07-16T18:20:00Z"),
    ("1997-07-16T19:20:30.45+01:00", "1997-07-16T18:20:30.45Z"),
    ("1997-07-16t19:20:30z", "1997-07-16T19:20:30Z"),
    ("1997", "1997-01-01T00:00:00Z"),
    ("1997-07", "1997-07-01T00:00:00Z"),
    (" 1997-07-16\n", "1997-07-16T00:00:00Z"),
])
def test_w3c_datetimes(text: str, same_as: str) -> None:
    assert parse_lastmod(text) == parse_lastmod(same_as) is not None


@pytest.mark.parametrize("text", ["yesterday", "1997-7-16", "1997-13-01", "", "16/07/1997"])
def test_unreadable_lastmod_says_nothing(text: str) -> None:
    assert parse_lastmod(text) is None


# -- feeds, which sitemaps.org accepts as sitemaps ---------------------------------------------


def test_rss_and_atom_feeds_are_read_as_sitemaps() -> None:
    rss = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>Shop</title>'
           b"<link>https://shop.example/</link>"
           b"<item><link>https://shop.example/post/1</link>"
           b"<pubDate>Sun, 06 Sep 2009 16:20:00 +0000</pubDate></item>"
           b"<item><guid>https://shop.example/guid.html</guid><pubDate>06 Sep 09 16:20 GMT"
           b"</pubDate></item>"
           b"<item><guid isPermaLink='false'>urn:uuid:1234</guid></item>"
           b"<item><link>/post/3</link><pubDate>Sun, 06 Sep 2009 16:20:00</pubDate></item>"
           b"</channel></rss>")
    got = read(rss, f"{SITE}/feed.rss", "application/rss+xml")
    t = parse_lastmod("2009-09-06T16:20:00Z")
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/post/1", t), (f"{SITE}/guid.html", t), (f"{SITE}/post/3", None)]
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><title>Shop</title>'
            b'<link href="https://shop.example/"/>'
            b'<entry><link rel="edit" href="https://shop.example/edit/1"/>'
            b'<link href="https://shop.example/post/1"/><updated>2003-12-13T18:30:02Z</updated>'
            b'</entry><entry><link rel="alternate" href="post/2"/>'
            b"<published>2003-12-14</published></entry></feed>")
    got = read(atom, f"{SITE}/atom.xml", "text/xml")
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/post/1", parse_lastmod("2003-12-13T18:30:02Z")),
        (f"{SITE}/post/2", parse_lastmod("2003-12-14"))]
    rdf = (b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
           b'xmlns="http://purl.org/rss/1.0/"><channel><link>https://shop.example/</link>'
           b"</channel><item><link>https://shop.example/pub/1.html</link></item></rdf:RDF>")
    assert locs(read(rdf, f"{SITE}/news.rdf")) == [f"{SITE}/pub/1.html"]
