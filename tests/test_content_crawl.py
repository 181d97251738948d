"""Crawl a loopback site with a mirror host and counter pages; check near-dups and search.

``scrapy crawl web`` runs for real (spider, frontier scheduler, downloader) against two loopback
hosts serving the same template-heavy site (real prose, see devsite/testset.py): host A,
and host B, a mirror of it. Two URLs of one news page differ only by a view counter the server
increments on every request. Expected: every page of one host is flagged as a duplicate of its
twin on the other host (whichever was fetched first is the original), the second counter page
as a duplicate of the first, no two different pages of one host are flagged, and the index
finds pages by a phrase of their text and an unfetched page by the anchor text of links to it.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crawler.backends.sqlite.index import SQLiteIndex
from devsite.testset import (
    Document,
    make_sites,
    random_chrome,
    render_page,
    sentence_pool,
)
from devsite.testset import documents as corpus_documents

ROOT = Path(__file__).resolve().parents[1]
HOST_A, HOST_B = "127.0.0.5", "127.0.0.6"
PAGES = 8
ELSEWHERE_URL = "http://127.0.0.7:1/elsewhere.html"
ELSEWHERE_TEXT = "the unvisited lighthouse handbook"

pytestmark = pytest.mark.integration


def _site_pages() -> dict[str, tuple[str, Document]]:
    """path -> (title, document): a home page, PAGES articles and one news page."""
    docs = corpus_documents()
    chosen = docs[10 : 10 + PAGES + 1]
    pages = {f"/page/{i}.html": (d.title, d) for i, d in enumerate(chosen[:PAGES])}
    pages["/news.html"] = (chosen[PAGES].title, chosen[PAGES])
    return pages


class _Site:
    """Renders the pages in one template; the same HTML on every host (a mirror)."""

    def __init__(self) -> None:
        rng = random.Random(11)
        self.pages = _site_pages()
        titles = [d.title for d in corpus_documents()]
        site = make_sites(rng, 1, titles)[0]
        nav = [(path, title.split(" (")[0][:40]) for path, (title, _) in self.pages.items()]
        nav += [("/news.html?ref=a", "Latest news"), ("/news.html?ref=b", "News again")]
        nav.append((ELSEWHERE_URL, ELSEWHERE_TEXT))  # another host: out of scope, never fetched
        self.site = replace(site, nav=nav, tags=[], footer_links=[("/", "Home")])
        self.chrome = random_chrome(rng, titles, sentence_pool())
        self.views = 0
        self.lock = threading.Lock()

    def render(self, path: str, host: str) -> str | None:
        if path == "/":
            doc = Document("home", "Home", ("Welcome. " + " ".join(
                t for t, _ in self.pages.values()),))
            return render_page(self.site, doc, self.chrome, host=host)
        bare = path.split("?")[0]
        if bare not in self.pages:
            return None
        _, doc = self.pages[bare]
        chrome = self.chrome
        if bare == "/news.html":
            with self.lock:
                self.views += 1
                chrome = replace(chrome, counter=1000 + self.views, views=self.views)
            doc = replace(doc, paragraphs=(f"This story was read {self.views} times.",
                                           *doc.paragraphs))
        return render_page(self.site, doc, chrome, host=host)


def _handler(site: _Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = site.render(self.path, self.headers.get("Host", ""))
            if body is None:
                self.send_error(404)
                return
            data = body.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _bind_both(site: _Site) -> tuple[ThreadingHTTPServer, ThreadingHTTPServer]:
    """Host A on a free port, host B on the same one (another process may hold it on B: retry).

    A machine that cannot bind the addresses at all skips the module, except in CI, where that
    would hide every test here behind a green run.
    """
    error: OSError | None = None
    for _ in range(5):
        first = ThreadingHTTPServer((HOST_A, 0), _handler(site))
        try:
            return first, ThreadingHTTPServer((HOST_B, first.server_address[1]), _handler(site))
        except OSError as exc:
            first.server_close()
            error = exc
    reason = f"cannot bind {HOST_B} on the port of {HOST_A}: {error}"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[_Site, int]]:
    site = _Site()
    first, second = _bind_both(site)
    port = first.server_address[1]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (first, second)]
    for t in threads:
        t.start()
    yield site, port
    for s in (first, second):
        s.shutdown()
        s.server_close()


@pytest.fixture(scope="module")
def crawl(servers: tuple[_Site, int], tmp_path_factory: pytest.TempPathFactory) -> dict:
    _, port = servers
    tmp = tmp_path_factory.mktemp("crawl")
    seeds = tmp / "seeds.txt"
    seeds.write_text(f"http://{HOST_A}:{port}/\nhttp://{HOST_B}:{port}/\n")
    items = tmp / "items.jsonl"
    index = tmp / "index.sqlite"
    cmd = [
        sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
        "-o", f"{items}:jsonlines",
        "-s", "ALLOW_PRIVATE_ADDRESSES=True", "-s", "FRONTIER_MIN_DELAY=0",
        "-s", "FRONTIER_DELAY_FACTOR=0", "-s", f"INDEX_PATH={index}",
        "-s", 'TUNING={"idle_horizon": 2}', "-s", "CLOSESPIDER_TIMEOUT=60", "-s", "LOG_LEVEL=INFO",
        "-s", f"RECORD_PATH={tmp / 'record.jsonl'}",  # not in the checkout
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert items.exists(), proc.stderr[-3000:]
    rows = [json.loads(line) for line in items.read_text().splitlines()]
    return {"items": rows, "index": index, "port": port, "log": proc.stderr}


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_mirror_pages_are_flagged_with_their_twin(crawl: dict) -> None:
    by_url = {row["url"]: row for row in crawl["items"]}
    port = crawl["port"]
    for i in range(PAGES):
        a = by_url.get(f"http://{HOST_A}:{port}/page/{i}.html")
        b = by_url.get(f"http://{HOST_B}:{port}/page/{i}.html")
        assert a and b, (i, sorted(by_url), crawl["log"][-2000:])
        flagged = [r for r in (a, b) if r.get("duplicate_of")]
        assert len(flagged) == 1, (a.get("duplicate_of"), b.get("duplicate_of"))
        twin = b if flagged[0] is a else a
        assert flagged[0]["duplicate_of"] == twin["url"]
        assert flagged[0]["similarity"] == 1.0
        assert "duplicate_of" not in twin or twin["duplicate_of"] is None


def test_counter_page_is_a_duplicate(crawl: dict) -> None:
    news = [r for r in crawl["items"] if "/news.html" in r["url"]]
    assert len(news) == 6  # /news.html, ?ref=a and ?ref=b, on both hosts
    originals = [r for r in news if not r.get("duplicate_of")]
    assert len(originals) == 1
    assert all(r["duplicate_of"] == originals[0]["url"] for r in news if r is not originals[0])


def test_template_sharing_pages_are_not_flagged_as_each_other(crawl: dict) -> None:
    flagged = [row for row in crawl["items"] if row.get("duplicate_of")]
    # Without flags there is nothing to check: a crawl that flags nothing must not pass here.
    # At least one page of every mirrored pair, and all counter pages but one, are flagged.
    assert len(flagged) >= PAGES + 5, [row["url"] for row in flagged]
    for row in flagged:
        original = row["duplicate_of"]
        assert _path(original) == _path(row["url"]) or "/news.html" in original, row["url"]


def test_search_by_text_and_by_anchor_text_only(crawl: dict, servers: tuple[_Site, int]) -> None:
    site, _ = servers
    reader = SQLiteIndex(crawl["index"], readonly=True)
    try:
        for i in range(PAGES):
            _, doc = site.pages[f"/page/{i}.html"]
            words = re.findall(r"[^\W_]+", doc.paragraphs[0])  # FTS5's tokens
            phrase = '"' + " ".join(words[10:15]) + '"'
            hits = reader.search(phrase)
            assert hits and _path(hits[0].url) == f"/page/{i}.html", phrase
            assert hits[0].fetched and len(hits[0].aliases) == 1  # the mirror's copy
        [hit] = reader.search(ELSEWHERE_TEXT)
        assert hit.url == ELSEWHERE_URL
        assert not hit.fetched and hit.matched_anchor
    finally:
        reader.close()
