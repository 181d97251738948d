"""What a page says beyond its text: Markdown, metadata, language, and the text records of the
archive (crawler.content.markdown, metadata, language; the WARC conversion record)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crawler.content.html import parse_page
from crawler.content.language import declared_language, identify_language
from crawler.report.build import build_report
from crawler.report.recordfile import read_records
from devsite.manpages import MAN_ROOT, PAGES, labelled_paragraphs, multilingual_pages
from tests.crawling import loopback_settings, run_crawl, serve_pages, write_site
from tests.warc_support import all_records

ARTICLE = b"""<!DOCTYPE html><html lang="en"><head><title>T</title>
<meta name="description" content="  A page   about crawlers. ">
<meta property="og:title" content="OG title"><meta property="og:image" content="/i.png">
<meta property="article:published_time" content="2023-04-05T06:07:08+02:00">
<meta name="twitter:card" content="summary_large_image">
<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
 {"@type": "WebSite", "name": "S"},
 {"@type": "NewsArticle", "headline": "H", "dateModified": "2024-02-03"}]}</script>
<script type="application/ld+json">{ not json </script>
</head><body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<main><h1>A <a href="#t">title</a></h1>
<p>Crawlers read <a href="/docs/x y">the docs</a> with <code>scrapy crawl</code> and
<em>care</em>; this paragraph is long enough to be the main content of the page.</p>
<p>First line,
still the first.<br>Second line.</p>
<h2>Steps<a class="headerlink" href="#steps">\xc2\xb6</a></h2>
<ol><li>Fetch</li><li>Parse<ul><li>links</li></ul></li></ol>
<pre class="language-sh">scrapy crawl web
  -s WARC_ENABLED=1</pre>
<table><thead><tr><th>Kind</th><th>Count</th></tr></thead>
<tbody><tr><td>pages</td><td>12</td></tr></tbody></table>
<div itemscope itemtype="https://schema.org/Person"><span itemprop="name">Ada</span>
<div itemprop="address" itemscope itemtype="https://schema.org/PostalAddress">
<span itemprop="addressLocality">Paris</span></div></div>
</main><footer>Visits: 12</footer></body></html>"""


def test_markdown_keeps_headings_lists_tables_links_and_code() -> None:
    page = parse_page(ARTICLE, "utf-8", markdown=True, url="http://s.example/a/").page
    md = page.markdown
    assert md.startswith("# A title\n\n")  # a permalink to the page itself is no link
    assert "[the docs](http://s.example/docs/x%20y)" in md
    assert "`scrapy crawl`" in md and "*care*" in md
    assert "## Steps\n\n1. Fetch\n2. Parse\n  - links" in md  # no permalink mark
    assert "First line, still the first.\nSecond line." in md  # only <br> breaks a line
    assert "```sh\nscrapy crawl web\n  -s WARC_ENABLED=1\n```" in md  # as written
    assert "| Kind | Count |\n| --- | --- |\n| pages | 12 |" in md
    assert "Home" not in md and "Visits" not in md  # the main text's choice
    # the same blocks as the main text, in the same order
    assert page.main_text.splitlines()[0] == "A title"


def test_markdown_is_not_computed_unless_asked() -> None:
    page = parse_page(ARTICLE, "utf-8", main_text=False).page
    assert page.markdown == "" and page.main_text == "" and page.metadata == {}


def test_metadata_reads_cards_json_ld_microdata_and_dates() -> None:
    meta = parse_page(ARTICLE, "utf-8", metadata=True).page.metadata
    assert meta["description"] == "A page about crawlers."
    assert meta["opengraph"] == {"title": "OG title", "image": "/i.png"}
    assert meta["twitter"] == {"card": "summary_large_image"}
    assert [o["@type"] for o in meta["json_ld"]] == ["WebSite", "NewsArticle"]  # @graph
    assert meta["json_ld_errors"] == 1  # counted, never raised
    assert meta["microdata"] == [{
        "@type": "https://schema.org/Person", "name": "Ada",
        "address": {"@type": "https://schema.org/PostalAddress", "addressLocality": "Paris"},
    }]
    assert meta["published"] == "2023-04-05T06:07:08+02:00"  # article:published_time
    assert meta["modified"] == "2024-02-03"  # JSON-LD's dateModified
    assert meta["html_lang"] == "en"


def test_hostile_json_ld_is_counted_never_raised() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    big = b'{"@type": "Dataset", "x": "' + b"a" * 200_000 + b'"}'
    body = b"<html><head>" + b"".join(
        b'<script type="application/ld+json">' + script + b"</script>" for script in (deep, big)
    ) + b"</head><body><p>text</p></body></html>"
    meta = parse_page(body, "utf-8", metadata=True).page.metadata
    assert meta["json_ld_errors"] == 2 and "json_ld" not in meta
    # microdata items nested past Python's recursion limit: read to a depth
    nested = b'<div itemscope itemprop="p" itemtype="t">' * 1500 + b"</div>" * 1500
    meta = parse_page(b"<html><body>" + nested + b"</body></html>", "utf-8",
                      metadata=True).page.metadata
    item, depth = meta["microdata"][0], 0
    while "p" in item:
        item, depth = item["p"], depth + 1
    assert depth == 16 and item == {"@type": "t"}


def test_language_comes_from_the_text_and_is_checked_against_html_lang() -> None:
    french = ("Le robot lit chaque page une seule fois et en tire le texte principal, "
              "les liens et la langue du document.")
    found = identify_language(french, "en-GB")
    assert (found.code, found.declared, found.agrees) == ("fr", "en", False)
    # too little text to overrule what the page declares
    assert identify_language("OK", "pt-BR").code == "pt"
    assert identify_language("OK", "").code == ""
    assert declared_language("zh_Hant_TW") == "zh" and declared_language("x!") == ""


def _man_pages_here() -> None:
    if not (MAN_ROOT / "de").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("translated manual pages missing under /usr/share/man (manpages-de...)")
        pytest.skip("no translated manual pages under /usr/share/man")


def test_real_paragraphs_in_ten_languages_are_identified() -> None:
    _man_pages_here()
    labelled = labelled_paragraphs(per_language=8)
    assert len(labelled) >= 10
    wrong = [(code, text[:60], identify_language(text).code)
             for code, texts in labelled.items() for text in texts
             if identify_language(text).code != code]
    total = sum(len(t) for t in labelled.values())
    assert len(wrong) <= 0.1 * total, wrong


def test_a_crawl_yields_markdown_metadata_language_and_text_records(tmp_path: Path) -> None:
    _man_pages_here()
    warc_dir = tmp_path / "warc"
    settings = loopback_settings(WARC_ENABLED=True, WARC_DIR=warc_dir)
    with serve_pages("127.0.0.1", multilingual_pages()) as port:
        site = f"http://127.0.0.1:{port}"
        result = run_crawl(tmp_path, seeds=[site + "/"], settings=settings)
    assert result.returncode == 0, result.log[-3000:]
    items = {item["url"].removeprefix(site): item for item in result.items}
    assert set(items) == {"/", *(path for path, _, _ in PAGES)}
    for path, code, declared in PAGES:
        item = items[path]
        assert item["language"] == code, (path, item["main_text"][:200])
        assert item["metadata"]["html_lang"] == declared
        assert item["metadata"]["opengraph"]["locale"] == code
        assert item["metadata"]["json_ld"][0]["@type"] == "TechArticle"
        assert item["published"].startswith("2024-0") and item["modified"].startswith("2025-0")
        assert item["description"] and item["description"] in item["main_text"]
        assert item["markdown"].startswith(f"# Manual ({code})\n\n")
        assert f"| {code} | [index]({site}/) |" in item["markdown"]
        assert f"```\nman -L {code} man\n```" in item["markdown"]
        assert result.stats[f"language/{code}"] == 1
    assert result.stats["language/html_lang_differs"] == 1  # the Swedish page says "en"
    # the report's chart of languages
    report = build_report(read_records([tmp_path / "stats.record.jsonl"]))
    chart = report.split('<figure data-chart="languages"', 1)[1].split("</figure>", 1)[0]
    assert "said another language: 1" in chart
    for _, code, _ in PAGES:
        assert f">{code}<" in chart

    records = all_records(warc_dir)
    responses = {r["headers"]["WARC-Record-ID"]: r for r in records if r["type"] == "response"}
    conversions = [r for r in records if r["type"] == "conversion"]
    assert len(conversions) == len(items)
    for record in conversions:
        headers = record["headers"]
        response = responses[headers["WARC-Refers-To"]]  # its response record
        assert response["headers"]["WARC-Target-URI"] == headers["WARC-Target-URI"]
        assert headers["Content-Type"] == "text/markdown; charset=utf-8"
        url = headers["WARC-Target-URI"]
        assert record["payload"].decode() == items[url.removeprefix(site)]["markdown"]
    assert result.stats["warc/records/conversion"] == len(items)
    # indexed with the responses: text and archive travel together
    [index] = warc_dir.glob("*.cdxj")
    lines = [json.loads(line.split(" ", 2)[2]) for line in index.read_text().splitlines()]
    de = [(line["mime"], line.get("status")) for line in lines if line["url"] == f"{site}/de"]
    assert sorted(de) == [("text/html", "200"), ("text/markdown", None)]
    # dated as the response (a replay tool must never take the text for a newer capture)
    for record in conversions:
        response = responses[record["headers"]["WARC-Refers-To"]]
        assert record["headers"]["WARC-Date"] == response["headers"]["WARC-Date"]


def test_a_site_keeps_only_its_languages_and_still_follows_the_others_links(
    tmp_path: Path,
) -> None:
    _man_pages_here()
    sites = tmp_path / "sites"
    write_site(sites, "two", '[content]\nlanguages = ["DE", "fr"]\n')
    with serve_pages("127.0.0.1", multilingual_pages()) as port:
        site = f"http://127.0.0.1:{port}"
        result = run_crawl(tmp_path, "two", seeds=[site + "/"], settings=loopback_settings(),
                           sites_dir=sites)
    assert result.returncode == 0, result.log[-3000:]
    assert sorted(item["url"].removeprefix(site) for item in result.items) == ["/de", "/fr"]
    # the English index (too little text: its <html lang> decides) linked to every page
    assert result.stats["language/not_kept"] == len(PAGES) - 1
    assert result.stats["language/ja"] == result.stats["language/en"] == 1
