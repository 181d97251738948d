"""The fast URL joiner gives exactly what the WHATWG join (crawler.net.weburl) gives;
links go to the frontier or come back as Requests."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.net.weburl import join as web_join
from crawler.spiders.links import UrlJoiner, follow_links

BASES = [
    "http://127.0.0.2:8080/docs/guide/intro.html",
    "http://127.0.0.2:8080/std/collections/hash_map/struct.HashMap.html",
    "http://h/x/y;p",
    "http://h/a/b/",
    "https://example.org/",
    "https://example.org",
    "https://example.org/a/b/?q=1#frag",
    "http://user:pw@example.org:81/x/y",
]
HREFS = [
    "/p/1.html",
    "p/1.html",
    "sub/dir/page.html?x=1#y",
    "./p.html",
    "../up.html",
    "/a/../b",
    "/a/./b",
    "?q=2",
    "#top",
    "",
    "   /spaced.html  ",
    "//other.org/x",
    "http://other.org/x",
    "HTTPS://Other.org/x",
    "https://other.org",
    "http://other.org?x",
    "mailto:a@b.org",
    "javascript:void(0)",
    "data:text/plain,hi",
    "ftp://h/f",
    "a:b/c",
    "x/y:z",
    "\\back\\slash",
    "/ü/ß.html",
    "p%20q.html",
    "..",
    ".",
    "/",
    "?",
    "#",
    "http:relative",
    "https://h/a/../b",
    "foo.html#frag",
    ".hidden",
    "/trailing/",
    "C:/windows",
    "http://h/x?",
    "http://h/x#",
    "http://h/a;p/x",
    "https://h/a;p?q#f",
    "/a;p/b",
    "a;b",
    "http://h/x?a=1&b=2#c",
    "https://h:443/x",
    "Http://h/x",
    "/x?y=/../z",
    "p.html?next=/./a",
    # climbing first, as rustdoc and Sphinx write links
    "../../std/vec/struct.Vec.html",
    "../../../../../x.html",
    "./../a.html",
    "../.",
    "../..",
    "../",
    "./",
    "../a/../b.html",
    "../a/./b",
    "../?q",
    "../#f",
    "../a.html?x=../y#z",
    "../a:b.html",
    "..//x",
    "../.hidden",
    "../\\x",
    ".../x",
    "..x/y",
    "./a/b.html#c",
    "#impl-From%3Cu8%3E-for-char",
    "#a#b",
    "#?x",
    "# x",
]


@pytest.mark.parametrize("base", BASES)
def test_join_matches_the_whatwg_join(base):
    joiner = UrlJoiner(base)
    for href in HREFS:
        assert joiner.join(href) == web_join(base, href), (base, href)


def _spider():
    crawler = get_crawler(Spider)
    crawler.stats.open_spider()
    return crawler._create_spider("links")


def test_links_go_to_the_frontier_only_in_a_crawl_that_announced_one():
    """``links_extracted`` goes out only once the crawl's scheduler said it runs a frontier
    (``frontier_opened``); otherwise the links come back as Requests to yield."""
    with_frontier, without = _spider(), _spider()
    taken = []

    def links_extracted(response, urls, spider, demote, forms):
        taken.append((spider, urls, demote, forms))

    for spider in (with_frontier, without):
        spider.crawler.signals.connect(links_extracted, crawler_signals.links_extracted)
    with_frontier.crawler.signals.send_catch_log(
        crawler_signals.frontier_opened, frontier=object(), spider=with_frontier
    )
    response = HtmlResponse("http://a.test/", body=b"", request=Request("http://a.test/"))
    urls = ["http://a.test/1", "http://a.test/2"]
    assert follow_links(with_frontier, response, urls, 1, {"x": None}) == []
    assert taken == [(with_frontier, urls, 1, {"x": None})]
    requests = follow_links(without, response, [*urls, "http://a.test/\x00bad\ud800"])
    assert [r.url for r in requests] == urls and len(taken) == 1
    assert without.crawler.stats.get_value("links/invalid") == 1
    assert follow_links(with_frontier, response, []) == [] and len(taken) == 1
