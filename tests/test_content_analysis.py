"""The content analysis: one call per HTML page gives the parsed page, the site's fields, the
near-duplicate verdict and the links' prepared forms; and its parts come only when the crawl has
what they serve (a frontier, a pipeline that consumes verdicts)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.content.analysis_neardup import NearDuplicateJudge
from crawler.content.neardup import NearDuplicateDetector
from crawler.frontier.urls import UrlPolicy
from crawler.robots import Directives
from crawler.sites import load_site_config
from crawler.sites.analysis import ContentAnalysis, LinkPreparer, main_text_wanted
from crawler.sites.fields import parse_field_spec
from crawler.spiders.analysis import CrawlContentAnalysis
from crawler.spiders.links import UrlJoiner
from crawler.spiders.site import SiteSpider

ARTICLE = "<p>" + "The article says something worth reading about crawlers. " * 6 + "</p>"


def page(links: str, head: str = "", article: str = ARTICLE) -> bytes:
    return (f"<html><head><title>T</title>{head}</head><body><nav>{links}</nav>"
            f"<main><h1 class=byline>By A</h1>{article}</main></body></html>").encode()


def test_link_forms_are_prepared_once_per_raw_link() -> None:
    policy = UrlPolicy(any_host=True, max_url_length=60)
    preparer = LinkPreparer(policy, cache_size=4)
    first = ["http://a.test/x?b=2&a=1", "http://a.test/y", "http://a.test/" + "z" * 60]
    forms = preparer.prepare(first)
    assert forms == {u: policy.link_form(u) for u in first[:2]}  # too long: the reactor says so
    # the request URL as linked, the canonical form (the seen key's) apart
    assert forms["http://a.test/x?b=2&a=1"][1] == "http://a.test/x?b=2&a=1"
    assert forms["http://a.test/x?b=2&a=1"][5] == "http://a.test/x?a=1&b=2"
    # the menu repeated on the next page is not prepared again; its new link is
    assert preparer.prepare([*first[:2], "http://a.test/new"]) == {
        "http://a.test/new": policy.link_form("http://a.test/new")
    }
    # a full cache is forgotten at once: its links are prepared again after that
    preparer.prepare([f"http://a.test/{i}" for i in range(3)])
    assert list(preparer.prepare(["http://a.test/y"])) == ["http://a.test/y"]


def test_one_call_gives_the_page_its_fields_verdict_and_link_forms() -> None:
    judge = NearDuplicateJudge(NearDuplicateDetector(), host_min_pages=1, link_demotion=3)
    analysis = ContentAnalysis(
        UrlJoiner,
        fields={"byline": parse_field_spec(".byline::text")},
        robots_token="crawler-bot",
        main_text=True,
        judge=judge,
        links=LinkPreparer(UrlPolicy(any_host=True)),
    )
    links = ('<a href="/a">A</a> <a href="b.html#x">B</a> <a href="mailto:x@y">M</a>'
             '<a href="/hidden" rel="nofollow">H</a>')
    first = analysis.analyze(page(links), "utf-8", "http://h.test/dir/p", Directives())
    assert first.title == "T" and first.main_text.startswith("By A\nThe article says")
    assert first.follow == ["http://h.test/a", "http://h.test/dir/b.html"]
    assert first.outlinks == [{"url": "http://h.test/a", "text": "A"},
                              {"url": "http://h.test/dir/b.html", "text": "B"}]
    assert first.stats["links/nofollow"] == 1 and first.stats["links/skipped_scheme"] == 1
    assert first.fields == {"byline": "By A"}
    assert first.forms is not None and set(first.forms) == set(first.follow)
    assert first.verdict is not None and first.verdict.kind == "new" and first.demote == 0
    assert first.fingerprint and not first.noindex
    # its mirror: a duplicate, whose links go deeper; the links were prepared already
    mirror = analysis.analyze(page(links), "utf-8", "http://m.test/dir/p", Directives())
    assert mirror.verdict is not None and mirror.verdict.duplicate_of == "http://h.test/dir/p"
    assert mirror.demote == 3 and mirror.stats["neardup/links_demoted_pages"] == 1
    assert mirror.verdict.host == "m.test" and mirror.verdict.host_duplicates == 1.0
    assert mirror.forms == {"http://m.test/a": UrlPolicy(any_host=True).link_form(
        "http://m.test/a"), "http://m.test/dir/b.html": UrlPolicy(any_host=True).link_form(
        "http://m.test/dir/b.html")}
    # an error page is not judged; a page addressed to our token may say nofollow
    head = '<meta name="crawler-bot" content="noindex, nofollow">'
    error = analysis.analyze(page(links, head), "utf-8", "http://e.test/p", Directives(),
                             status=404)
    assert error.verdict is None and error.follow == [] and error.outlinks == []
    assert error.noindex and error.nofollow and error.forms is None
    assert len(judge.detector) == 2


def test_a_failing_near_duplicate_check_costs_the_page_its_verdict_not_its_links(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A detector that raises (a bug; Redis away is the detector's own to ride out): the page
    keeps its links, text and link forms, the error is logged once with its URL, and counted."""

    class Broken(NearDuplicateDetector):
        def check(self, *args: object, **kwargs: object) -> Any:
            raise TypeError("a bug in the detector")

    analysis = ContentAnalysis(
        UrlJoiner, main_text=True, links=LinkPreparer(UrlPolicy(any_host=True)),
        judge=NearDuplicateJudge(Broken(), host_min_pages=1, link_demotion=3),
    )
    with caplog.at_level(logging.ERROR):
        out = analysis.analyze(page('<a href="/a">A</a>'), "utf-8", "http://h.test/p",
                               Directives())
    assert out.follow == ["http://h.test/a"] and out.forms and out.main_text
    assert out.verdict is None and out.stats["neardup/errors"] == 1
    assert [r.getMessage() for r in caplog.records] == [
        "Near-duplicate check of http://h.test/p failed; its links are kept"]
    assert caplog.records[0].exc_info is not None


def test_limits_are_reported_for_the_reactor_to_log() -> None:
    analysis = ContentAnalysis(UrlJoiner, max_links=1, max_text=10, max_html=400)
    links = "".join(f'<a href="/{i}">{i}</a>' for i in range(5))
    out = analysis.analyze(page(links), "utf-8", "http://h.test/", Directives())
    assert [name for name, _ in out.limits] == ["page_html", "page_links", "content_text"]
    assert out.follow == ["http://h.test/0"] and len(out.text) == 10
    assert out.main_text == "" and out.verdict is None and out.forms is None  # none wanted


def test_main_text_is_wanted_by_near_duplicates_or_a_crawl_database() -> None:
    settings = get_crawler().settings
    assert main_text_wanted(settings)  # NEARDUP_ENABLED by default
    assert not main_text_wanted(get_crawler(settings_dict={"NEARDUP_ENABLED": False}).settings)
    assert main_text_wanted(
        get_crawler(settings_dict={"NEARDUP_ENABLED": False, "RECRAWL_INTERVAL": 60}).settings
    )


def test_links_are_prepared_only_once_a_frontier_takes_them(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\nseeds = ["http://a.test/"]\n[scope]\nhosts = ["a.test"]\n'
                    '[urls]\ndeny = ["/private/"]\n', encoding="utf-8")
    cls = SiteSpider.for_site(load_site_config(path))
    crawler = get_crawler(cls)
    spider = cls.from_crawler(crawler)
    assert isinstance(spider.content, CrawlContentAnalysis)
    analysis = spider.content.analysis
    assert analysis.links is None and analysis.judge is None  # no crawl has opened yet
    crawler.signals.send_catch_log(crawler_signals.frontier_opened, frontier=None,
                                   spider=Spider("other"))
    assert analysis.links is None  # another spider's frontier
    crawler.signals.send_catch_log(crawler_signals.frontier_opened, frontier=None, spider=spider)
    assert analysis.links is not None
    # the site's own policy: its fixed filters give the verdict the scheduler would
    assert analysis.links.prepare(["http://a.test/private/x"])["http://a.test/private/x"][4] \
        == "denied"
