"""``scrapy search``: results with title, URL and snippet; --site; clear query errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.backends.sqlite.index import SQLiteIndex
from crawler.commands.search import format_results
from crawler.index import PageDocument, SearchResult

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("search") / "ix.sqlite"
    ix = SQLiteIndex(path)
    ix.add_page(PageDocument(
        "http://a.test/frontier", site="a", title="The Mercator frontier",
        text="Front queues hold URLs by priority; back queues hold one host each, so "
        "politeness is kept per host.", status=200,
        outlinks=[("http://a.test/heap", "the host heap"), ("http://b.test/robots", "robots")],
    ))
    ix.add_page(PageDocument(
        "http://b.test/politeness", site="b", title="Politeness", status=200,
        text="Wait between requests to one host; the frontier enforces it.",
    ))
    ix.close()
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "search", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )


def test_search_prints_title_url_snippet_and_marks_anchor_only(index_path: Path) -> None:
    out = _run("--index", str(index_path), "host")
    assert out.returncode == 0, out.stderr
    lines = out.stdout
    assert "The Mercator frontier" in lines and "http://a.test/frontier" in lines
    assert "[host]" in lines  # the snippet highlights the match
    assert "http://a.test/heap" in lines and "not fetched: found by anchor text only" in lines
    assert 'linked as: "the host heap"' in lines


def test_search_site_filter_and_json(index_path: Path) -> None:
    out = _run("-s", f"INDEX_PATH={index_path}", "--site", "b", "--json", "frontier")
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["url"] for r in results] == ["http://b.test/politeness"]


def test_search_errors(index_path: Path, tmp_path: Path) -> None:
    bad = _run("--index", str(index_path), "frontier AND")
    assert bad.returncode == 2
    assert "cannot parse the query 'frontier AND'" in bad.stderr
    assert '"exact phrases"' in bad.stderr  # says how to write one
    missing = _run("--index", str(tmp_path / "none.sqlite"), "x")
    assert missing.returncode == 1 and "no index at" in missing.stderr
    assert not (tmp_path / "none.sqlite").exists()  # searching never creates an index


def test_format_results() -> None:
    assert format_results("x", []) == "No results for 'x'."
    assert format_results("x", [], site="s") == "No results for 'x' on site 's'."
    text = format_results("crawl", [
        SearchResult("http://a/", "A", "about [crawl]ing", 2.0, "s", aliases=["http://m/"]),
        SearchResult("http://b/", "", "", 1.0, fetched=False, matched_anchor=True,
                     anchors=["crawl notes"], status=404),
    ])
    assert " 1. A\n    http://a/  (s)\n    about [crawl]ing\n    duplicates: http://m/" in text
    assert " 2. (no title)  [not fetched: found by anchor text only; HTTP 404]" in text
