"""Usage preferences in real crawls: the site of ``devsite/usage.py`` states them every way
(robots.txt, headers, meta tags, tdmrep.json, conflicting and unknown values), and a crawl
declared for search, for archive and for AI training must do with each page exactly what the
decision table says (docs/topics/usage-preferences.md), as seen in the server's access log, the
items, the index and the WARC files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from devsite.usage import PAGES, PAGES_HOST, TDM_HOST, usage_site
from tests.crawling import loopback_settings, run_crawl
from tests.warc_support import all_records


@pytest.mark.integration
@pytest.mark.parametrize("purpose", ["search", "archive", "ai-train"])
def test_each_page_gets_what_the_decision_table_says(tmp_path: Path, purpose: str) -> None:
    server = usage_site()
    warc_dir = tmp_path / "warc"
    with server:
        # every page a seed: a page not fetched is the decision's doing, not a lost link
        seeds = [*server.seeds(), *(server.url(h, p) for h, p in PAGES)]
        result = run_crawl(tmp_path, seeds=seeds, settings=loopback_settings(
            CRAWL_PURPOSE=purpose, WARC_ENABLED=True, WARC_DIR=warc_dir))
        requests = [(r.host, r.path) for r in server.records]
    fetched = set(requests)
    assert result.returncode == 0, result.log[-3000:]
    items = {item["url"]: item for item in result.items}
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    indexed = {url for url, has_doc in conn.execute("SELECT url, has_doc FROM pages") if has_doc}
    conn.close()
    records = all_records(warc_dir)
    archived = {r["headers"]["WARC-Target-URI"] for r in records if r["type"] == "response"}
    seen = {}
    for host, path in PAGES:
        url = server.url(host, path)
        seen[path] = "".join(letter for letter, happened in (
            ("f", (host, path) in fetched), ("k", url in items), ("i", url in indexed),
            ("a", url in archived)) if happened)
    assert seen == {path: want[purpose] for (_, path), (_, _, want) in PAGES.items()}

    # tdmrep.json: read by the TDM crawl only, once per host it fetches pages of; a missing one
    # (404) is no broken link, and neither it nor robots.txt is a page
    assert "pages/broken" not in result.stats
    assert result.stats["pages/status/200"] == len(items) + sum(
        1 for h, p in fetched if p != "/robots.txt" and p != "/.well-known/tdmrep.json"
        and server.url(h, p) not in items)
    assert sorted(h for h, p in requests if p == "/.well-known/tdmrep.json") == (
        [PAGES_HOST, TDM_HOST] if purpose == "ai-train" else [])

    # the signals are on the item as read, unknown ones verbatim, and in the WARC metadata
    unknown = items[server.url("127.0.0.3", "/unknown.html")]
    assert set(unknown["usage"]) == {
        "header robots:noml", "header content-usage:train-ai=maybe",
        "header tdm:tdm-reservation=2"}
    assert unknown["usage_denied"] == []
    stats = result.stats
    assert stats["usage/unknown/content-usage:train-ai/maybe"] == 1
    assert stats["usage/robots:noml/set"] == 1
    metadata = [r for r in records if r["type"] == "metadata"
                and r["headers"]["WARC-Target-URI"].endswith("/unknown.html")]
    assert b"usage: header content-usage:train-ai=maybe" in metadata[0]["payload"]
    if purpose == "search":
        assert items[server.url("127.0.0.3", "/meta-noai.html")]["usage_denied"] == [
            "ai-input", "ai-train"]
        assert stats["usage/effect/not_fetched"] == 1  # /nosearch/b.html
        assert stats["usage/effect/not_kept"] == 1  # /content-usage.html
        summary = "usage preferences: recorded 8, not archived 1, not fetched 1, not kept 1"
        assert summary in result.log
        assert "usage values nobody defined: content-usage:train-ai/maybe 1" in result.log
