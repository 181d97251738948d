"""A link is requested as it is found, made safe and nothing more; robots.txt decides on that
request; the canonical form is only the seen-test key (issue 35, defects 1 and 6).

Unit pairs (link -> request URL, link -> seen key), robots.txt + link pairs on the crawl path
(the request the scheduler builds, checked by the project's robots.txt parser), and crawls of a
real server (``devsite.tricky``) whose access log holds each request line byte for byte, on
the memory frontier and on a real Redis.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.frontier import normalize_url
from crawler.frontier.urls import url_forms
from crawler.net.weburl import InvalidUrl, join, request_url
from crawler.robots.rules import RULES, RobotsRecord, RobotsRules
from crawler.scheduler.adapter import FrontierScheduler
from devsite.tricky import (
    CANONICAL,
    DISALLOWED,
    DOT_HOST,
    HOME,
    IDN_WIRE,
    LINKS,
    REDIRECTS,
    TrickySite,
)
from tests.crawling import loopback_settings, run_crawl, write_site
from tests.dns_support import dns_server
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

# --- the request URL of a link ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "sent"),
    [
        ("http://a.test/index.php?/blog/post/1", "http://a.test/index.php?/blog/post/1"),
        ("http://a.test/show.php?article300", "http://a.test/show.php?article300"),
        ("http://a.test/go?url=http://x.test/&ref=1", "http://a.test/go?url=http://x.test/&ref=1"),
        ("http://a.test/s?z=1&a=2&z=0", "http://a.test/s?z=1&a=2&z=0"),
        ("http://a.test/s?q=a%20b", "http://a.test/s?q=a%20b"),
        ("http://a.test/a//b///c", "http://a.test/a//b///c"),
        ("http://a.test/a%2Fb?x=%2f", "http://a.test/a%2Fb?x=%2f"),
        ("http://a.test/a b?c d", "http://a.test/a%20b?c%20d"),
        ("http://a.test/caf\u00e9?q=\u00fc", "http://a.test/caf%C3%A9?q=%C3%BC"),
        ("http://a.test/100%?x=5%&y=%4", "http://a.test/100%25?x=5%25&y=%254"),
        ("http://a.test/x#frag", "http://a.test/x"),
        ("http://a.test", "http://a.test/"),
        ("http://a.test?x", "http://a.test/?x"),
        ("HTTP://A.Test:80/P?Q", "http://a.test/P?Q"),
        ("https://a.test:443/", "https://a.test/"),
        ("https://a.test:8443/", "https://a.test:8443/"),
        ("http://user:secret@a.test/x", "http://a.test/x"),
        ("http://a.test/a/./b/../c", "http://a.test/a/c"),
        ("http://a.test/a/%2e%2E/c", "http://a.test/c"),
        ("  http://a.test/x\n\ty  ", "http://a.test/xy"),
        ("http:\\\\a.test\\x\\y?a\\b", "http://a.test/x/y?a%5Cb"),
        ("http:///a.test/x", "http://a.test/x"),
        ("http://fa\u00df.example/", "http://xn--fa-hia.example/"),
        ("http://B\u00dcCHER.example/", "http://xn--bcher-kva.example/"),
        ("http://xn--fa-hia.example/", "http://xn--fa-hia.example/"),
        ("http://XN--FA-HIA.example/", "http://xn--fa-hia.example/"),
        ("http://\u2603.test/", "http://xn--n3h.test/"),  # UTS #46 takes what IDNA2008 refuses
        (
            "http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff0e\uff43\uff4f\uff4d/",
            "http://example.com/",
        ),  # full-width letters and dot
        ("http://a.b\u3002c/", "http://a.b.c/"),
        ("http://www.example.org./x", "http://www.example.org/x"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://2130706433:8080/", "http://127.0.0.1:8080/"),
        ("http://127.1/", "http://127.0.0.1/"),
        ("http://0177.0.0.1./", "http://127.0.0.1/"),
        ("http://[0:0::1]:80/", "http://[::1]/"),
    ],
)
def test_a_link_is_requested_as_found_made_safe(link: str, sent: str) -> None:
    assert request_url(link)[0] == sent
    assert Request(sent).url == sent  # Scrapy's Request leaves it as it is


@pytest.mark.parametrize(
    ("link", "reason"),
    [
        ("ftp://a.test/", "scheme"),
        ("javascript:void(0)", "scheme"),
        ("http://", "invalid_url"),
        ("http://a b.test/", "invalid_url"),
        ("http://a.test:65536/", "invalid_url"),
        ("http://256.0.0.1/", "invalid_url"),
        ("http://1.2.3.4.5/", "invalid_url"),
        ("http://[::1/", "invalid_url"),
        ("http://xn--a.test/", "invalid_url"),
        ("http://\u00ad/", "invalid_url"),
    ],
)
def test_a_link_no_request_can_be_made_of_is_refused(link: str, reason: str) -> None:
    with pytest.raises(InvalidUrl) as info:
        request_url(link)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("links", "same"),
    [
        (["http://a.test/s?b=2&a=1", "http://a.test/s?a=1&b=2"], True),
        (["http://a.test/x?sid=0123456789abcdef0123", "http://a.test/x"], True),
        (["http://A.test:80/x#y", "http://a.test/x"], True),
        (["http://www.example.org./x", "http://www.example.org/x"], True),
        (["http://0x7f.1/x", "http://127.0.0.1/x", "http://2130706433/x"], True),
        (["http://fa\u00df.example/", "http://xn--fa-hia.example/"], True),
        (["http://fa\u00df.example/", "http://fass.example/"], False),
        (["http://a.test/a%20b", "http://a.test/a b"], True),
        (["http://a.test/?/blog", "http://a.test/?%2Fblog="], True),
        (["http://a.test/x?a=1", "http://a.test/x?a=2"], False),
    ],
)
def test_the_seen_key_is_the_canonical_form(links: list[str], same: bool) -> None:
    keys = {normalize_url(link)[0] for link in links}
    assert (len(keys) == 1) is same


def test_a_url_is_its_own_canonical_form_when_nothing_changes_it() -> None:
    """Most links: one string for both, no second hash stored with the entry."""
    url = "https://docs.test/std/vec/struct.Vec.html"
    request, canonical, host = url_forms(url)
    assert request is canonical and host == "docs.test"
    request, canonical, _ = url_forms("http://a.test/index.php?/blog/post/1")
    assert request == "http://a.test/index.php?/blog/post/1"
    assert canonical == "http://a.test/index.php?%2Fblog%2Fpost%2F1="


@pytest.mark.parametrize(
    ("href", "joined"),
    [
        ("\\\\cdn.test\\a\\b.js", "http://cdn.test/a/b.js"),
        ("\\img\\x.png", "http://a.test/img/x.png"),
        ("///cdn.test/a", "http://cdn.test/a"),
        # the page's own scheme and one slash: a path on the page's host (WHATWG; urltestdata
        # "http:/example.com/" against an http base), not a host
        ("http:/cdn.test/a", "http://a.test/cdn.test/a"),
        ("http:\\\\cdn.test/a", "http://cdn.test/a"),
        ("https:/cdn.test/a", "https://cdn.test/a"),
        ("http:relative.html", "http://a.test/d/relative.html"),
        ("https:other.test", "https://other.test"),
        ("https:///other.test/x", "https://other.test/x"),
        ("?q=a\\b", "http://a.test/d/p.html?q=a\\b"),
        (" \t/x\ny ", "http://a.test/xy"),
    ],
)
def test_links_are_joined_as_a_browser_joins_them(href: str, joined: str) -> None:
    assert join("http://a.test/d/p.html", href) == joined


# --- robots.txt decides on the request the crawl sends ---------------------------------------

ROBOTS_PAIRS = [
    ("Disallow: /search?q=", "/search?q=shoes&lang=en", False),
    ("Disallow: /search?q=", "/search?lang=en&q=shoes", True),
    ("Disallow: /*?sort=", "/items?sort=price&page=2", False),
    ("Disallow: /*?sort=", "/items?page=2&sort=price", True),
    ("Disallow: /go?url=http://", "/go?url=http://x.test/&ref=1", False),
    ("Disallow: /*?ref=", "/news?ref=home&id=7", False),
    ("Disallow: /index.php?/admin", "/index.php?/admin/users", False),
    ("Disallow: /index.php?/admin", "/index.php?/blog/post/1", True),
    ("Disallow: /show.php?article", "/show.php?article300", False),
]


class TrickSpider(scrapy.Spider):
    name = "tricks"
    allowed_domains = ["a.test"]


@pytest.mark.parametrize(("rule", "path", "allowed"), ROBOTS_PAIRS)
def test_robots_txt_decides_on_the_request_the_crawl_sends(
    rule: str, path: str, allowed: bool
) -> None:
    """The link goes through the scheduler (admission, the frontier's entry, the Request built
    from it) and the request that comes out is what the robots.txt rules are asked about."""
    crawler = get_crawler(TrickSpider, {"FRONTIER_MIN_DELAY": 0})
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    scheduler = FrontierScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    link = f"http://a.test{path}"
    page = HtmlResponse("http://a.test/", body=b"", request=scrapy.Request("http://a.test/"))
    crawler.signals.send_catch_log(
        crawler_signals.links_extracted, response=page, urls=[link], spider=crawler.spider
    )
    sent = scheduler.next_request()
    if sent is not None and sent.url.endswith("/robots.txt"):
        sent = scheduler.next_request()
    assert sent is not None and sent.url == link
    record = RobotsRecord("http://a.test", RULES, 200, 0.0, 1e12, f"User-agent: *\n{rule}\n")
    assert RobotsRules(record, "crawler").allowed(sent.url) is allowed


# --- crawls of a real server -------------------------------------------------------------------

ZONE: dict[str, Any] = {
    "names": {HOME: {"a": "127.0.0.1", "ttl": 300}},
    "suffixes": {"." + HOME: {"a": "127.0.0.1", "ttl": 300}},
}


def _check_access_log(site: TrickySite) -> None:
    """Each link requested byte for byte as linked, once; nothing robots.txt disallows for the
    link as written (a redirect's target too); one request for two links of one canonical
    form."""
    seen = Counter(site.requests)
    for _, target, host in LINKS:
        assert seen[(host, target)] == 1, (host, target, site.requests)
    for path in REDIRECTS:
        assert seen[(HOME, path)] == 1, path
    assert seen[(HOME, REDIRECTS["/moved-on"])] == 1, site.requests
    assert seen[(HOME, CANONICAL)] == 1, site.requests  # <link rel="canonical"> as written
    paths = [p for _, p in site.requests]
    for path in [*DISALLOWED, REDIRECTS["/moved"]]:
        assert path not in paths
    assert not [p for p in paths if p.startswith(("/search", "/items", "/go?", "/news"))]
    assert len([p for p in paths if p.startswith("/list")]) == 1
    hosts = {h for h, _ in site.requests}
    assert hosts == {HOME, IDN_WIRE, DOT_HOST}  # no "www.tricky.test." apart, no "bücher"
    assert all(seen[(h, "/robots.txt")] == 1 for h in hosts)


def _crawl(tmp_path: Path, site: TrickySite, dns: Any, **extra: Any) -> Any:
    sites = tmp_path / "sites"
    write_site(sites, "tricky", f'[scope]\ndomains = ["{HOME}"]\n')
    return run_crawl(
        tmp_path,
        "tricky",
        seeds=[site.url()],
        sites_dir=sites,
        settings=loopback_settings(DNS_SERVERS=dns.address, CLOSESPIDER_TIMEOUT=60, **extra),
    )


def _items_urls(result: Any) -> set[str]:
    return {item["url"] for item in result.items}


def test_a_crawl_requests_each_link_as_found(tmp_path: Path) -> None:
    with TrickySite() as site, dns_server(tmp_path / "dns", ZONE) as dns:
        result = _crawl(tmp_path, site, dns)
        assert result.returncode == 0, result.log[-3000:]
        _check_access_log(site)
        urls = _items_urls(result)  # the items record the URL fetched
        assert f"http://{HOME}:{site.port}/index.php?/blog/post/1" in urls
        assert f"http://{IDN_WIRE}:{site.port}/regal?b=1&a=2" in urls


def test_a_crawl_on_redis_requests_each_link_as_found(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with TrickySite() as site, dns_server(tmp_path / "dns", ZONE) as dns:
        result = _crawl(
            tmp_path,
            site,
            dns,
            FRONTIER_BACKEND="redis",
            REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/0",
            FRONTIER_REDIS_KEY=fresh_key(),
        )
        assert result.returncode == 0, result.log[-3000:]
        _check_access_log(site)
        assert f"http://{DOT_HOST}:{site.port}/punkt?z=9&y=8" in _items_urls(result)


def test_a_recrawl_requests_each_page_as_it_was_linked(tmp_path: Path) -> None:
    """The crawl database is keyed by the canonical form and keeps the URL requested: a page
    that comes due is requested again as it was linked, not in its canonical form."""
    db = tmp_path / "crawldb.sqlite"
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    with TrickySite() as site, dns_server(tmp_path / "dns", ZONE) as dns:
        first = _crawl(tmp_path / "1", site, dns, CRAWLDB_PATH=db, RECRAWL_INTERVAL=3600)
        assert first.returncode == 0, first.log[-3000:]
        conn = sqlite3.connect(db)
        keys = {row[0] for row in conn.execute("SELECT url FROM pages")}
        assert f"http://{HOME}:{site.port}/index.php?%2Fblog%2Fpost%2F1=" in keys
        conn.execute("UPDATE pages SET next_fetch = 0")
        conn.commit()
        conn.close()
        site.requests.clear()
        second = _crawl(tmp_path / "2", site, dns, CRAWLDB_PATH=db, RECRAWL_INTERVAL=3600)
        assert second.returncode == 0, second.log[-3000:]
        seen = Counter(site.requests)
        for _, target, host in LINKS:
            assert seen[(host, target)] == 1, (host, target, site.requests)
        assert not [p for _, p in site.requests if "%2F" in p and "to=%2Fx" not in p]
