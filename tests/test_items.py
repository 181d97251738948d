"""Items a user can use: text with a line per block, outlinks in the feed unless ITEM_OUTLINKS is
off, and a site config's [fields] extracted on the test site."""

from __future__ import annotations

import json
from pathlib import Path

import lxml.html
import pytest

from crawler.content.analysis_neardup import Verdict
from crawler.content.html import _marked_text, block_text, parse_html
from crawler.items import PAGE_FIELDS
from crawler.sites import SiteConfigError, load_site_config
from crawler.sites.fields import field_name_problem
from crawler.spiders.site_items import PageItem
from devsite import HostSpec, SiteServer, build_site
from tests.crawling import run_crawl, write_site

HOST = "127.0.0.4"


def test_the_page_item_is_made_of_the_one_list_of_fields() -> None:
    assert list(PageItem.fields) == list(PAGE_FIELDS)  # the feeds' column order
    for name in PAGE_FIELDS:  # and a site's [fields] may not take one of them
        assert field_name_problem(name) == (
            f"{name} is a built-in item field; give the new field another name"
        )


def test_a_judged_item_carries_its_verdict_but_exports_only_its_fields() -> None:
    from scrapy.exporters import PythonItemExporter

    item = PageItem(url="http://a.test/", title="T")
    assert item.verdict is None
    verdict = Verdict("f" * 32, "http://o.test/", 0.93, "near", "a.test", 0.5, 4)
    item.judged(verdict)
    assert item.verdict is verdict
    assert dict(item) == {"url": "http://a.test/", "title": "T", "content_fingerprint": "f" * 32,
                          "duplicate_of": "http://o.test/", "similarity": 0.93}
    assert PythonItemExporter().export_item(item) == dict(item)
    original = PageItem(url="http://o.test/")
    original.judged(Verdict("e" * 32, kind="new", host="o.test"))
    assert dict(original) == {"url": "http://o.test/", "content_fingerprint": "e" * 32}


def test_text_has_a_line_per_block_and_runs_inline_elements_together() -> None:
    page = parse_html(
        b"<html><head><title>T</title><style>p{}</style></head><body>"
        b"<header><h1>Test site 127.0.0.4</h1><nav><a href=/>Home</a> <a href=/p>First page</a>"
        b"</nav></header><main><p>Some\n  text <b>bold</b> here.</p><ul><li>one<li>two</ul>"
        b"x<br>y<table><tr><td>a<td>b</table></main></body></html>",
        main_text=True,
    )
    assert page.text == (
        "Test site 127.0.0.4\nHome First page\nSome text bold here.\none\ntwo\nx\ny\na\nb"
    )
    assert "Some text bold here." in page.main_text  # main text unchanged by the marks


def test_the_python_fallback_marks_blocks_like_the_stylesheet() -> None:
    """Pages nested deeper than libxslt's template depth are marked from Python instead."""
    html = b"<body><h1>A</h1><nav><a>b</a> <a>c</a></nav><div>d<p>e <i>f</i></p>g</div></body>"
    stylesheet = block_text(lxml.html.fromstring(html))
    fallback = _marked_text(lxml.html.fromstring(html)).split("\u2029")
    assert stylesheet == "A\nb c\nd\ne f\ng"
    assert "\n".join(t for t in (" ".join(p.split()) for p in fallback) if t) == stylesheet


def test_text_of_a_page_with_control_characters() -> None:
    page = parse_html(b"<p>a\x01b</p><div>c</div>" + bytes(range(256)), main_text=True)
    assert "c" in page.text.split("\n")


FIELDS = """
[fields]
heading = "main h2::text"
nav = { xpath = "//nav/a/text()", all = true }
missing = ".nope::text"
"""


@pytest.mark.integration
def test_site_fields_and_outlinks_in_the_feed(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOST, pages=3)], links_per_page=2, extras=False)
    sites = tmp_path / "sites"
    write_site(sites, "fielded", f"[scope]\nhosts = [{json.dumps(HOST)}]\n{FIELDS}")
    settings = {"ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0.02}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with SiteServer(graph) as server:
        full = run_crawl(tmp_path / "a", "fielded", seeds=server.seeds(), sites_dir=sites,
                         settings=settings)
        lean = run_crawl(tmp_path / "b", "fielded", seeds=server.seeds(), sites_dir=sites,
                         settings={**settings, "ITEM_OUTLINKS": False})
    assert full.returncode == 0, full.log[-3000:]
    assert lean.returncode == 0, lean.log[-3000:]
    assert len(full.items) == len(lean.items) == 4
    for item in full.items:
        assert item["heading"] and item["title"].startswith(item["heading"] + " | ")
        assert item["nav"] == ["Home", "First page"]
        assert item["missing"] is None
        assert item["outlinks"] and item["text"].startswith(f"Test site {HOST}\nHome First page\n")
    for item in lean.items:
        assert "outlinks" not in item
        assert item["heading"] and item["nav"] == ["Home", "First page"]
    # the index still learned the anchor texts from the outlinks
    assert lean.stats["index/documents"] == full.stats["index/documents"] == 4


@pytest.fixture
def sites_dir(tmp_path: Path) -> Path:
    (tmp_path / "tmp_sites").mkdir()
    return tmp_path / "tmp_sites"


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        ('title = "h1::text"', "fields.title", "title is a built-in item field"),
        ('Price = "b"', "fields.Price", "field names are lower_case identifiers"),
        ('a = "span[["', "fields.a", "not a valid CSS selector"),
        ('b = { xpath = "//a[" }', "fields.b.xpath", "not a valid XPath expression"),
        ('c = { css = "p", xpath = "//p" }', "fields.c", "give one of css or xpath, not both"),
        ('d = { css = "p", many = true }', "fields.d.many", "unknown key"),
        ("e = 3", "fields.e", "must be a CSS selector string or a table with css or xpath"),
        ('f = { xpath = "//p", all = "yes" }', "fields.f.all", "must be true or false"),
    ],
)
def test_a_wrong_field_is_refused_at_load(
    sites_dir: Path, body: str, key: str, problem: str
) -> None:
    path = write_site(sites_dir, "bad", f'seeds = ["https://a.example/"]\n[fields]\n{body}\n')
    with pytest.raises(SiteConfigError) as info:
        load_site_config(path)
    assert info.value.key == key and info.value.problem.startswith(problem)
