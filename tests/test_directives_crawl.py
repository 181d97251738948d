"""A page's ``unavailable_after``, end to end: two real crawls into one full-text index. The
page is indexed by the first; by the second its ``X-Robots-Tag: unavailable_after`` date has
passed, so the index writer treats it as ``noindex`` and drops the document it holds (how the
date is read: tests/test_vectors_directives.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawler.backends.registry import open_index
from tests.crawling import loopback_settings, run_crawl, serve_pages

HOST = "127.0.0.47"
PAGE = "<html><head><title>Zebra</title></head><body><p>The zebra page.</p></body></html>"


def _indexed(path: Path) -> list[str]:
    index = open_index({"INDEX_PATH": str(path)}, readonly=True)
    try:
        return [hit.url for hit in index.search("zebra")]
    finally:
        index.close()


@pytest.mark.integration
@pytest.mark.parametrize(
    "purpose",
    [
        "search",
        "search,archive",
    ],
)
def test_a_page_past_its_unavailable_after_leaves_the_index(tmp_path: Path, purpose: str) -> None:
    headers: dict[str, dict[str, str]] = {}
    index_path = tmp_path / "index.sqlite"
    with serve_pages(HOST, {"/": PAGE}, "text/html", headers=headers) as port:
        url = f"http://{HOST}:{port}/"
        settings = loopback_settings(FRONTIER_MIN_DELAY=0, TUNING={"idle_horizon": 2},
                                     CRAWL_PURPOSE=purpose, INDEX_PATH=index_path)
        results: list[Any] = []
        for run in ("first", "second"):
            (tmp_path / run).mkdir()
            results.append(run_crawl(tmp_path / run, seeds=[url], settings=settings))
            assert results[-1].returncode == 0, results[-1].log[-3000:]
            if run == "first":
                assert _indexed(index_path) == [url]
                headers["/"] = {"X-Robots-Tag": "unavailable_after: 25 Jun 2010 15:00:00 PST"}
    assert _indexed(index_path) == []
    second = results[1]
    assert [item["noindex"] for item in second.items] == [True]
    assert second.stats["index/noindex"] == 1
