"""Heavy page work on the content thread (crawler/offload/components.py) changes nothing a crawl
produces.

A real crawl of a loopback site with one big page (a 2 MB single-page manual: seconds of parsing
and main text on a loaded machine) and a few small ones, with ``content_thread`` on and off:
the items (text, main text, outlinks, near-duplicate decisions) and what the index took are the
same, the pages went through the content thread only when it is on (the index writes there
too, or on a thread of its own with ``TUNING``'s ``index_thread``), and the reactor-stall probe
reported.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from scrapy.exporters import JsonLinesItemExporter

from tests.crawling import PROJECT, crawl_command, serve_pages

pytestmark = pytest.mark.integration

HOST = "127.0.0.41"


def _pages() -> dict[str, str]:
    words = ["the", "parser", "keeps", "every", "link", "and", "the", "text", "a", "reader",
             "sees", "on", "the", "page"]
    para = " ".join(words[i % len(words)] for i in range(60))
    sections = "".join(
        f'<section><h2 id="s{i}">Section {i}</h2><p>{para} {i}.</p>'
        f'<p>See <a href="/small/{i % 5}.html">small page {i % 5}</a>.</p></section>'
        for i in range(6000)
    )
    nav = "".join(f'<li><a href="/small/{i}.html">Page {i}</a></li>' for i in range(5))
    big = (f"<html><head><title>Manual</title></head><body><nav><ul>{nav}</ul></nav>"
           f"<main><h1>Manual</h1>{sections}</main></body></html>")
    pages = {"/": f'<html><body><a href="/big.html">manual</a><ul>{nav}</ul></body></html>',
             "/big.html": big}
    for i in range(5):
        text = f"Small page number {i} says something of its own: " + " ".join(words) * 3
        pages[f"/small/{i}.html"] = (f"<html><head><title>Small {i}</title></head><body>"
                                     f"<nav><ul>{nav}</ul></nav><p>{text}</p>"
                                     f'<a href="/big.html">the manual</a></body></html>')
    pages["/small/copy.html"] = pages["/small/1.html"]  # an exact duplicate
    return pages


@pytest.fixture(scope="module")
def site() -> Iterator[int]:
    pages = _pages()
    pages["/"] = pages["/"].replace("</ul>", '<li><a href="/small/copy.html">c</a></li></ul>')

    with serve_pages(HOST, pages) as port:
        yield port


def _crawl(tmp: Path, port: int, thread: bool, **extra: Any
           ) -> tuple[dict[str, dict[str, Any]], dict]:
    settings = {
        "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
        "CLOSESPIDER_TIMEOUT": 120, "LOG_LEVEL": "INFO", "FRONTIER_HOST_CONCURRENCY": 1,
        **extra,
        "TUNING": {"idle_horizon": 2, **extra.get("TUNING", {}), "content_thread": thread},
    }
    cmd = crawl_command(tmp, seeds=[f"http://{HOST}:{port}/"], settings=settings)
    proc = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp / "items.jsonl").read_text().splitlines()]
    stats = json.loads((tmp / "stats.json").read_text())
    return {row["url"].split("/", 3)[3]: row for row in rows}, stats


def test_the_content_thread_changes_no_item(site: int, tmp_path: Path) -> None:
    for name in ("on", "off", "every"):
        (tmp_path / name).mkdir()
    on, on_stats = _crawl(tmp_path / "on", site, thread=True)  # the big page in the child
    off, off_stats = _crawl(tmp_path / "off", site, thread=False)
    every, every_stats = _crawl(tmp_path / "every", site, thread=True,
                                TUNING={"idle_horizon": 2, "process_min_bytes": 1,
                                        "index_thread": "index"})
    assert sorted(on) == sorted(off) == sorted(every) == sorted(
        ["", "big.html", "small/copy.html", *(f"small/{i}.html" for i in range(5))]
    )
    for path in on:
        for field in ("title", "text", "main_text", "outlinks", "content_fingerprint",
                      "duplicate_of"):
            assert on[path].get(field) == off[path].get(field), (path, field)
            assert every[path].get(field) == off[path].get(field), (path, field)
    assert on_stats["content/process_calls"] == 1  # only big.html is over 256 KiB
    assert every_stats["content/process_calls"] == len(every)
    assert "content/process_calls" not in off_stats
    assert "content/process_restarts" not in on_stats
    assert len(on["big.html"]["main_text"]) >= 500_000
    assert on["small/copy.html"]["duplicate_of"]  # decisions were made (and agree)
    assert on_stats["content/offloaded"] == len(on)
    for key in ("index/documents", "index/aliases", "neardup/new", "neardup/exact"):
        assert on_stats.get(key) == off_stats.get(key) == every_stats.get(key), key
    assert "content/offloaded" not in off_stats
    # big.html's feed line was made on the feed thread (feed.THREAD_MIN_CHARS), and is what
    # Scrapy's exporter writes for that item (the exporters' byte equality: tests/test_feed.py)
    assert on_stats["feed/lines_from_thread"] == 1 and "feed/lines_from_thread" not in off_stats
    big_line = next(line for line in (tmp_path / "on" / "items.jsonl").read_bytes().splitlines(True)
                    if b'/big.html"' in line[:200])
    again = BytesIO()
    JsonLinesItemExporter(again, encoding="utf-8").export_item(json.loads(big_line))
    assert again.getvalue() == big_line
    for stats in (on_stats, off_stats):
        assert stats["reactor/stall_samples"] > 0
        assert stats["reactor/stall_max_ms"] >= stats["reactor/stall_p99_ms"] - 1
        assert stats["reactor/stall_max_ms"] >= stats["reactor/stall_max_busy_ms"]
        assert "gc/full_max_ms" in stats  # the paced collector ran (gcpace.FREEZE_INTERVAL)


def test_a_chain_of_pages_is_not_held_up(tmp_path: Path) -> None:
    """Pages that link only to the next one: each page's link reaches the frontier after the
    download that brought it is over (the page is parsed off the reactor); the engine must ask
    the frontier again once the spider's output is done, or every hop waits for the engine's
    5-second heartbeat."""
    hops = 8
    pages = {f"/{i}.html": f'<html><body><p>Page {i} of a chain.</p>'
                           f'<a href="/{i + 1}.html">next</a></body></html>'
             for i in range(hops)}
    pages[f"/{hops}.html"] = "<html><body>end</body></html>"
    with serve_pages("127.0.0.42", pages) as port:
        settings = {
            "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0,
            "FRONTIER_DELAY_FACTOR": 0, "LOG_LEVEL": "INFO", "CLOSESPIDER_TIMEOUT": 120,
            # the chain's pages differ only by a number: near-duplicates, whose links would
            # otherwise go deeper each hop (neardup_link_demotion) and end the chain early
            "TUNING": {"idle_horizon": 2, "neardup_link_demotion": 0},
        }
        seed = f"http://127.0.0.42:{port}/0.html"
        cmd = crawl_command(tmp_path, seeds=[seed], settings=settings)
        proc = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=300,
                              check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["item_scraped_count"] == hops + 1
    assert stats["content/offloaded"] == hops + 1
    # How long the hops take (~0.1 s each when woken, 5 s on heartbeats alone) is measured by
    # bench/realcrawl.py, not bounded here: the time is in the stats for a reader.


def test_the_index_writes_on_the_content_thread_unless_given_its_own() -> None:
    """``TUNING``'s ``index_thread``: by default the index shares the content thread (one thread
    at the GIL beside the reactor); any other name is a thread of its own."""
    from scrapy import Spider, signals
    from scrapy.utils.test import get_crawler

    from crawler.offload.components import OffloadWorkers, content_worker, index_worker

    offload = {"EXTENSIONS": {"crawler.offload.components.OffloadWorkers": 1000}}
    for setting, shared in (({}, True), ({"TUNING": {"index_thread": "index"}}, False)):
        crawler = get_crawler(Spider, {**offload, **setting})
        crawler.crawling = True
        try:
            content, index = content_worker(crawler), index_worker(crawler)
            assert content is not None and index is not None
            assert (index is content) is shared  # one ContentWorker is one thread
            assert content.alive and index.alive
        finally:
            crawler.signals.send_catch_log(signals.engine_stopped)
        # closed with the engine: the threads ended, none is started again
        assert not content.alive and not index.alive
        assert content_worker(crawler) is None
        workers = crawler.get_extension(OffloadWorkers)
        assert workers is not None and workers.parse_process() is None


_ANSWERS = """
import threading
from scrapy.utils.reactor import install_reactor
install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
from twisted.internet import reactor
from twisted.internet.defer import DeferredList
from crawler.offload.components import ContentWorker

worker = ContentWorker("test")
seen, ran_on, main = [], [], threading.current_thread()

def boom():
    raise ValueError("boom")

def noted(value, what):
    seen.append((what, value, threading.current_thread() is main))

first = worker.run(lambda: ran_on.append(threading.current_thread().name) or 1)
first.addCallback(noted, "first")
second = worker.run(boom)
second.addErrback(lambda f: noted(f.value.args[0], "second"))
third = worker.run(lambda x, y=0: x + y, 2, y=3)
third.addCallback(noted, "third")
DeferredList([first, second, third]).addBoth(lambda _: reactor.callLater(0, reactor.stop))
reactor.run()
worker.close()
print(repr((ran_on, seen, worker.alive)))
"""


def test_a_worker_answers_on_the_reactor_thread_in_order() -> None:
    """ContentWorker.run: the function runs on the worker thread, its result (or exception)
    fires the Deferred on the reactor thread, in the order the calls were made (in a process
    of its own: a test process must not run a reactor)."""
    import ast
    import sys

    proc = subprocess.run([sys.executable, "-c", _ANSWERS], cwd=PROJECT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran_on, seen, alive = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert ran_on == ["crawler-test"]
    assert seen == [("first", 1, True), ("second", "boom", True), ("third", 5, True)]
    assert alive is False
