"""The index pipeline with a real Scrapy crawler: real HTML -> main text -> near-dups -> index."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawler.backends.sqlite.index import SQLiteIndex
from crawler.pipelines.index import IndexPipeline
from crawler.pipelines.neardup import NearDuplicatePipeline
from crawler.spiders.analysis import near_duplicate_judge
from devsite.testset import LabelledSet, build_labelled_set, page_item


class _Judged:
    """The content analysis's near-duplicate judge, as the crawl uses it before the pipelines:
    a 2xx page item gets its verdict's fields (the site spider sets them on the item)."""

    def __init__(self, crawler: Any) -> None:
        self.judge = near_duplicate_judge(crawler)
        self.judge.open()

    def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if 200 <= int(item.get("status", 200)) < 300:  # type: ignore[call-overload]
            verdict = self.judge.judge(
                item.get("final_url") or item["url"], item["main_text"],
                title=item.get("title") or None, noindex=bool(item.get("noindex")),
            )
            item.update(verdict.item_fields())
        return item


Pipes = tuple[_Judged, NearDuplicatePipeline, IndexPipeline]


def _pipelines(tmp_path: Path, **settings: Any) -> Pipes:
    crawler = get_crawler(settings_dict={"INDEX_PATH": str(tmp_path / "ix.sqlite"), **settings})
    judged = _Judged(crawler)
    neardup = NearDuplicatePipeline.from_crawler(crawler)
    index = IndexPipeline.from_crawler(crawler)
    index.open_spider()
    return judged, neardup, index


def _feed(pipes: Pipes, item: dict[str, Any]) -> dict:
    for pipe in pipes:
        item = pipe.process_item(item)
    return item


def _reader(tmp_path: Path) -> SQLiteIndex:
    return SQLiteIndex(tmp_path / "ix.sqlite", readonly=True)


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return build_labelled_set(pages=24, variants_per_page=6, seed=9)


def _distinctive_words(labelled: LabelledSet, i: int) -> str:
    """A phrase query of four words from the middle of page i's main text."""
    words = re.findall(r"[^\W_]+", labelled.originals[i].doc.paragraphs[0])  # FTS5's tokens
    middle = len(words) // 2
    return '"' + " ".join(words[middle : middle + 4]) + '"'


def test_site_with_mirror_and_counter_pages(tmp_path: Path, labelled: LabelledSet) -> None:
    pipes = _pipelines(tmp_path)
    for page in labelled.originals:
        item = _feed(pipes, page_item(page.url, page.html, site=page.url.split("/")[2]))
        assert "duplicate_of" not in item  # template-sharing pages are all documents
    variants = [v for v in labelled.variants if v.kind in ("mirror", "chrome")]
    for page in variants:
        item = _feed(pipes, page_item(page.url, page.html))
        assert item["duplicate_of"] == labelled.originals[page.original or 0].url
    pipes[-1].close_spider()
    reader = _reader(tmp_path)
    try:
        stats = reader.stats()
        assert stats["documents"] == len(labelled.originals)
        assert stats["aliases"] == len(variants)
        # every page is found by a phrase of its text, and its duplicates are listed with it
        for i, page in enumerate(labelled.originals):
            hits = reader.search(_distinctive_words(labelled, i))
            assert hits and hits[0].url == page.url, (i, page.url)
            assert hits[0].fetched and hits[0].matched_text
        mirrored = next(v for v in variants if v.kind == "mirror")
        [hit] = [h for h in reader.search(_distinctive_words(labelled, mirrored.original or 0))]
        assert mirrored.url in hit.aliases
        # a nav link's anchor text finds its target, which was never fetched
        nav_url, nav_text = next(
            (href, text) for href, text in labelled_nav(labelled) if "/section/" in href
        )
        words = " ".join(re.findall(r"[^\W_]+", nav_text))
        hit = next(h for h in reader.search(words, limit=50) if h.url == nav_url)
        assert not hit.fetched and hit.matched_anchor and nav_text in hit.anchors
    finally:
        reader.close()


def labelled_nav(labelled: LabelledSet) -> list[tuple[str, str]]:
    item = page_item(labelled.originals[0].url, labelled.originals[0].html)
    return [(link["url"], link["text"]) for link in item["outlinks"]]  # type: ignore[union-attr]


def test_duplicates_indexed_when_configured(tmp_path: Path, labelled: LabelledSet) -> None:
    pipes = _pipelines(tmp_path, NEARDUP_INDEX_DUPLICATES=True)
    page = labelled.originals[0]
    _feed(pipes, page_item(page.url, page.html))
    dup = _feed(pipes, page_item("http://mirror.test/0", page.html))
    assert dup["duplicate_of"] == page.url  # still flagged on the item
    pipes[-1].close_spider()
    reader = _reader(tmp_path)
    assert reader.stats()["documents"] == 2 and reader.stats()["aliases"] == 0
    reader.close()


def test_statuses_redirects_and_noindex(tmp_path: Path, labelled: LabelledSet) -> None:
    pipes = _pipelines(tmp_path)
    a, b, c = labelled.originals[:3]
    word_a, word_b, word_c = (_distinctive_words(labelled, i) for i in range(3))
    _feed(pipes, page_item(a.url, a.html))
    # 304: the document stays
    not_modified = {"url": a.url, "final_url": a.url, "status": 304, "site": "t",
                    "fetched_at": "2026-03-03T00:00:00Z", "text": "", "outlinks": []}
    assert _feed(pipes, not_modified) is not_modified
    # redirected: the requested URL becomes an alias of the final one
    _feed(pipes, page_item("http://short.test/b", b.html, final_url=b.url))
    # noindex: no document
    item_c = page_item(c.url, c.html)
    item_c["noindex"] = True
    _feed(pipes, item_c)
    # 500: visit recorded, nothing else
    _feed(pipes, {"url": b.url, "final_url": b.url, "status": 500, "text": ""})
    pipes[-1].close_spider()
    reader = _reader(tmp_path)
    try:
        assert [h.url for h in reader.search(word_a)] == [a.url]
        assert reader.page(a.url)["visited_at"] == "2026-03-03T00:00:00Z"
        [hit] = reader.search(word_b)
        assert hit.url == b.url and hit.aliases == ["http://short.test/b"]
        assert reader.page(b.url)["status"] == 500 and reader.page(b.url)["has_doc"] == 1
        assert reader.search(word_c) == []
        assert reader.page(c.url)["has_doc"] == 0
    finally:
        reader.close()
    # a 404 on refetch drops the document
    pipes = _pipelines(tmp_path)
    _feed(pipes, {"url": a.url, "final_url": a.url, "status": 404, "text": ""})
    pipes[-1].close_spider()
    reader = _reader(tmp_path)
    assert reader.search(word_a) == []
    reader.close()


def test_writes_are_batched(tmp_path: Path, labelled: LabelledSet) -> None:
    settings = {"INDEX_PATH": str(tmp_path / "ix.sqlite")}
    index = IndexPipeline(get_crawler(settings_dict=settings), batch_size=3)
    index.open_spider()
    reader = _reader(tmp_path)
    try:
        for i, page in enumerate(labelled.originals[:7]):
            index.process_item(page_item(page.url, page.html))
            assert reader.stats()["documents"] == (i + 1) // 3 * 3
        assert index.crawler.stats.get_value("index/commits") == 2
        index.close_spider()
        assert reader.stats()["documents"] == 7
    finally:
        reader.close()


def test_disabled(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured):
        IndexPipeline.from_crawler(get_crawler(settings_dict={"INDEX_ENABLED": False}))
