"""Feed entries' dates as recrawl hints, and Google's sitemap extensions (issue 39): the dates
as feeds write them (RFC 822 with named zones, ISO 8601 where RFC 822 is due, Dublin Core),
the latest date of an entry, a News sitemap's publication date, image and video extensions
that never become pages."""

from __future__ import annotations

import json

import pytest

from crawler.content.html import MAX_FEEDS, parse_html
from crawler.sitemaps import FOREIGN, IN, OUT_OF_FOLDER, Coverage, file_kind, is_feed, parse_lastmod
from crawler.sitemaps.feeds import rfc822_to_w3c
from tests.test_sitemaps_reading import SITE, read, urlset


@pytest.mark.parametrize(("text", "same_as"), [
    ("Sun, 06 Sep 2009 16:20:00 GMT", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 16:20:00 UT", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 16:20:00 Z", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 11:20:00 EST", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 12:20:00 edt", "2009-09-06T16:20:00Z"),
    ("Sun, 6 Sep 2009 09:20 PDT", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 18:20:00 CEST", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 17:20:00 CET", "2009-09-06T16:20:00Z"),
    ("Mon, 07 Sep 2009 01:20:00 JST", "2009-09-06T16:20:00Z"),
    ("Sun, 06 Sep 2009 18:20:00 +0200", "2009-09-06T16:20:00Z"),
    ("Sunday, 06 Sept 2009 16:20:00 GMT", "2009-09-06T16:20:00Z"),
    ("06 Sep 09 16:20 GMT", "2009-09-06T16:20:00Z"),
    ("2009-09-06T18:20:00+02:00", "2009-09-06T16:20:00Z"),  # ISO 8601 in a pubDate
])
def test_rfc822_dates_as_feeds_write_them(text: str, same_as: str) -> None:
    assert parse_lastmod(rfc822_to_w3c(text)) == parse_lastmod(same_as)


@pytest.mark.parametrize("text", [
    "Sun, 06 Sep 2009 16:20:00",  # no zone
    "Sun, 06 Sep 2009 16:20:00 -0000",  # RFC 5322: the local time, zone unknown
    "Sun, 06 Sep 2009 16:20:00 A",  # military zones: their sign was never reliable
    "Sun, 06 Sep 2009 16:20:00 IST",  # India, Ireland or Israel
    "Sun, 31 Feb 2009 16:20:00 GMT",
    "2009-13-45",
    "last Tuesday",
    "",
])
def test_rfc822_dates_that_say_nothing(text: str) -> None:
    assert rfc822_to_w3c(text) is None


def test_an_rss_item_takes_its_latest_date_dublin_core_included() -> None:
    rss = (b'<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" '
           b'xmlns:atom="http://www.w3.org/2005/Atom"><channel>'
           b"<item><link>https://shop.example/a</link>"
           b"<pubDate>Sun, 06 Sep 2009 16:20:00 CEST</pubDate>"
           b"<atom:updated>2010-01-02T03:04:05Z</atom:updated></item>"
           b"<item><link>https://shop.example/b</link><dc:date>2011-05-06T07:08:09+02:00"
           b"</dc:date></item>"
           b"<item><link>https://shop.example/c</link>"
           b"<pubDate>Sun, 06 Sept 2009 16:20:00 GMT</pubDate></item>"
           b"</channel></rss>")
    got = read(rss, f"{SITE}/feed.rss", "application/rss+xml")
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/a", parse_lastmod("2010-01-02T03:04:05Z")),
        (f"{SITE}/b", parse_lastmod("2011-05-06T05:08:09Z")),
        (f"{SITE}/c", parse_lastmod("2009-09-06T16:20:00Z"))]
    rdf = (b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
           b'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns="http://purl.org/rss/1.0/">'
           b"<item><link>https://shop.example/d</link><dc:date>2012-03-04</dc:date></item>"
           b"</rdf:RDF>")
    got = read(rdf, f"{SITE}/news.rdf")
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/d", parse_lastmod("2012-03-04"))]


def test_an_atom_entry_takes_its_latest_date() -> None:
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="/p"/>'
            b"<published>2020-01-01T00:00:00Z</published><updated>bogus</updated></entry>"
            b'<entry><link href="/q"/><updated>2021-06-01T10:00:00Z</updated>'
            b"<published>2021-01-01T00:00:00Z</published></entry></feed>")
    got = read(atom, f"{SITE}/atom.xml")
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/p", parse_lastmod("2020-01-01T00:00:00Z")),
        (f"{SITE}/q", parse_lastmod("2021-06-01T10:00:00Z"))]


NEWS = 'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"'
IMAGE = 'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
VIDEO = 'xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"'


def extended(*rows: str) -> bytes:
    return urlset(*rows).replace(b"<urlset ", f"<urlset {NEWS} {IMAGE} {VIDEO} ".encode())


def test_a_news_sitemap_dates_its_entries_by_publication() -> None:
    news = ("<news:news><news:publication><news:name>The Shop Times</news:name>"
            "<news:language>en</news:language></news:publication>"
            "<news:publication_date>{}</news:publication_date>"
            "<news:title>Sale</news:title></news:news>")
    body = extended(
        f"<url><loc>{SITE}/n/1</loc>{news.format('2008-12-23T14:30:00+01:00')}</url>",
        f"<url><loc>{SITE}/n/2</loc><lastmod>2009-01-01</lastmod>{news.format('2008-12-23')}"
        "</url>",
        f"<url><loc>{SITE}/n/3</loc>{news.format('not a date')}</url>",
    )
    got = read(body)
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/n/1", parse_lastmod("2008-12-23T13:30:00Z")),
        (f"{SITE}/n/2", parse_lastmod("2009-01-01")),  # its own lastmod comes first
        (f"{SITE}/n/3", None)]


def test_image_and_video_extensions_are_no_pages() -> None:
    body = extended(
        f"<url><loc>{SITE}/gallery</loc><image:image><image:loc>{SITE}/a.jpg</image:loc>"
        f"</image:image><image:image><image:loc>{SITE}/b.jpg</image:loc></image:image></url>",
        f"<url><loc>{SITE}/clip</loc><video:video><video:thumbnail_loc>{SITE}/t.jpg"
        f"</video:thumbnail_loc><video:content_loc>{SITE}/v.mp4</video:content_loc>"
        f"<video:player_loc>{SITE}/player?v=1</video:player_loc>"
        "<video:publication_date>2007-11-05T19:20:30+08:00</video:publication_date>"
        "</video:video><lastmod>2020-02-02</lastmod></url>",
    )
    got = read(body)
    assert not got.problems
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/gallery", None), (f"{SITE}/clip", parse_lastmod("2020-02-02"))]


# -- feeds a page's head names ------------------------------------------------------------------


def test_a_head_names_its_feeds_once_each_and_boundedly() -> None:
    head = (
        '<link rel="alternate" type="application/rss+xml" href="/feed.rss">'
        '<link rel="Alternate" type="Application/Atom+XML; charset=utf-8" href="atom.xml">'
        '<link rel="alternate" type="application/rss+xml" href="/feed.rss">'  # again
        '<link rel="alternate" hreflang="de" href="/de/">'  # a translation, no feed
        '<link rel="stylesheet" type="application/rss+xml" href="/style.css">'
        '<link rel="alternate" type="application/atom+xml" href="">'
        '<link rel="canonical" href="/home">'
        + "".join(f'<link rel="alternate" type="application/rss+xml" href="/t/{i}.rss">'
                  for i in range(50))
    )
    page = parse_html(f"<html><head>{head}</head><body><p>hi</p></body></html>".encode())
    assert page.feed_hrefs[:3] == ["/feed.rss", "atom.xml", "/t/0.rss"]
    assert len(page.feed_hrefs) == MAX_FEEDS
    assert page.canonical_href == "/home"


def test_a_feed_a_page_names_may_list_the_pages_folder() -> None:
    feed = f"{SITE}/blog/feed/atom.xml"
    coverage = Coverage(feed, SITE, named=False, folder_rule=True, vouched=f"{SITE}/blog/")
    assert coverage.entry(f"{SITE}/blog/feed/x") == IN
    assert coverage.entry(f"{SITE}/blog/2024/post") == IN
    assert coverage.entry(f"{SITE}:443/blog/2024/post") == IN
    assert coverage.entry(f"{SITE}/shop/item") == OUT_OF_FOLDER
    assert coverage.entry("http://shop.example/blog/2024/post") == OUT_OF_FOLDER
    assert coverage.entry("https://other.example/blog/") == FOREIGN
    alone = Coverage(feed, SITE, named=False, folder_rule=True)
    assert alone.entry(f"{SITE}/blog/2024/post") == OUT_OF_FOLDER


def test_a_feed_is_told_from_other_xml_by_its_root() -> None:
    assert is_feed(b'<?xml version="1.0"?>\n<rss version="2.0"><channel/></rss>')
    assert is_feed(b'\xef\xbb\xbf<feed xmlns="http://www.w3.org/2005/Atom"/>')
    assert is_feed(b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>')
    assert not is_feed(b'<?xml version="1.0"?><urlset/>')
    assert not is_feed(b"<!DOCTYPE html><html><head><title>feed</title></head></html>")
    assert not is_feed(b"<feedback/>")


# -- JSON Feed ------------------------------------------------------------------------------------


def test_a_json_feed_is_read_as_the_other_feeds_are() -> None:
    body = json.dumps({
        "version": "https://jsonfeed.org/version/1.1", "title": "Shop",
        "items": [
            {"id": "1", "url": "https://shop.example/j/1", "date_published": "2020-01-01T00:00:00Z",
             "date_modified": "2021-01-01T00:00:00+01:00"},
            {"id": "https://shop.example/j/2", "external_url": "https://elsewhere.example/x"},
            {"id": "urn:3", "external_url": "https://elsewhere.example/y"},  # no page of its own
            {"url": "/j/4", "date_published": "bogus"},
            "not an item",
            {"url": 5},
        ],
    }).replace("/", "\\/").encode()  # JSON may escape its slashes
    got = read(body, f"{SITE}/feed.json", "application/feed+json")
    assert not got.problems
    assert [(loc, mod) for loc, _, mod in got.entries] == [
        (f"{SITE}/j/1", parse_lastmod("2020-12-31T23:00:00Z")),
        (f"{SITE}/j/2", None), (f"{SITE}/j/4", None)]
    assert is_feed(body)


def test_json_that_is_no_feed_or_is_hostile_is_not_read() -> None:
    assert file_kind(b'{"error": "not found"}') is None
    assert not is_feed(b'{"items": []}')
    deep = b'{"version": "https://jsonfeed.org/version/1", "items": ' + b"[" * 50_000
    got = read(deep, f"{SITE}/feed.json")
    assert not got.entries and [r for r, _ in got.problems] == ["unreadable"]
    many = json.dumps({"version": "https://jsonfeed.org/version/1",
                       "items": [{"url": f"{SITE}/m/{i}"} for i in range(150)]}).encode()
    got = read(many, f"{SITE}/feed.json")
    assert len(got.entries) == 100 and [r for r, _ in got.problems] == ["urls"]
