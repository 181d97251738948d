"""The parse process (crawler/offload/components.py ``ParseProcess``): the same answer as a call in
this
process, and no call lost to a child that dies or hangs.

The functions below run in the spawned child, which imports them from this module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler.content.html import parse_page
from crawler.offload.components import ParseProcess
from tests.crawling import PROJECT, crawl_command, serve_pages
from tests.test_offload import _pages


def in_child() -> bool:
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return spec is not None and spec.name == "crawler.content.child"


def die_in_child(value: int) -> int:
    """Killed whenever it runs in a child: only the call in the parent answers."""
    if in_child():
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def die_once(marker: str, value: int) -> int:
    """Killed the first time it runs in a child (``marker`` says it was)."""
    if in_child() and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return value * 2 if in_child() else -1


def hang_in_child(value: int) -> int:
    if in_child():
        time.sleep(3600)
    return value


def fails(message: str) -> None:
    raise ValueError(message)


def pid() -> int:
    return os.getpid()


@pytest.fixture
def pool() -> ParseProcess:
    process = ParseProcess(min_bytes=1, timeout=60)
    yield process
    process.stop()


def test_a_page_parses_the_same_in_the_child(pool: ParseProcess) -> None:
    pages = _pages()
    for path in ("/big.html", "/small/1.html", "/"):
        body = pages[path].encode()
        for kwargs in ({}, {"max_links": 3, "max_text": 1000}, {"main_text": False}):
            there = pool.call(parse_page, body, "utf-8", **kwargs)
            here = parse_page(body, "utf-8", **kwargs)
            assert there == here, (path, kwargs)
    big = pool.call(parse_page, pages["/big.html"].encode(), "utf-8", max_links=3)
    assert big.links > 3 and len(big.page.links) == 3
    assert pool.calls == 10 and pool.restarts == 0


def test_one_child_serves_every_call_and_exceptions_come_back(pool: ParseProcess) -> None:
    first = pool.call(pid)
    assert first != os.getpid()
    assert pool.call(pid) == first
    with pytest.raises(ValueError, match="no such page"):
        pool.call(fails, "no such page")
    assert pool.call(pid) == first  # an exception in the call does not cost the child


def test_a_killed_child_is_replaced_and_the_call_made_again(pool: ParseProcess,
                                                             tmp_path: Path) -> None:
    before = pool.call(pid)
    assert pool.call(die_once, str(tmp_path / "died"), 21) == 42  # in a fresh child
    assert pool.restarts == 1 and pool.inline == 0
    assert pool.call(pid) != before


def test_a_call_that_kills_every_child_is_made_in_this_process(pool: ParseProcess) -> None:
    assert pool.call(die_in_child, 7) == 7
    assert pool.restarts == 2 and pool.inline == 1
    assert pool.call(pid) != os.getpid()  # and the next call has a child again


def test_a_child_that_keeps_dying_is_given_up(pool: ParseProcess) -> None:
    for _ in range(3):
        assert pool.call(die_in_child, 7) == 7
    assert pool.restarts == 6 and pool.inline == 3
    assert pool.call(pid) == os.getpid()  # no child any more
    assert pool.restarts == 6


def test_a_hung_child_is_killed(tmp_path: Path) -> None:
    pool = ParseProcess(min_bytes=1, timeout=1)
    try:
        assert pool.call(hang_in_child, 5) == 5
        assert pool.restarts == 2 and pool.inline == 1
    finally:
        pool.stop()


def test_a_stopped_child_is_reaped(pool: ParseProcess) -> None:
    child = pool.call(pid)
    pool.stop()
    with pytest.raises(ChildProcessError):
        os.waitpid(child, os.WNOHANG)
    assert pool.call(pid) == os.getpid()  # stopped for good: no new child


PAGES = 12
HOST = "127.0.0.44"


@pytest.fixture(scope="module")
def slow_site() -> Iterator[int]:
    """Pages that link to the next one, each answered after 0.3 s: a crawl of a few seconds."""
    pages = {
        f"/{number}.html": (
            f"<html><head><title>Page {number}</title></head><body>"
            f"<p>Page {number} of a slow chain, with words of its own: {number * 7}.</p>"
            f'<a href="/{number + 1}.html">next</a></body></html>'
        )
        for number in range(PAGES)
    }
    with serve_pages(HOST, pages, delay=0.3) as port:
        yield port


def _children(pid: int) -> list[int]:
    """The parse processes among ``pid``'s children (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"crawler.content.child" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.integration
def test_a_crawl_loses_no_page_to_a_killed_child(slow_site: int, tmp_path: Path) -> None:
    settings = {
        "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
        "CLOSESPIDER_TIMEOUT": 120, "LOG_LEVEL": "INFO",
        "TUNING": {"idle_horizon": 2, "process_min_bytes": 1, "neardup_link_demotion": 0},
    }
    cmd = crawl_command(tmp_path, seeds=[f"http://{HOST}:{slow_site}/0.html"],
                        settings=settings)
    crawl = subprocess.Popen(cmd, cwd=PROJECT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    killed = []
    try:
        while crawl.poll() is None and len(killed) < 2:
            for child in _children(crawl.pid):
                if child not in killed:
                    os.kill(child, signal.SIGKILL)
                    killed.append(child)
            time.sleep(0.5)
        _, stderr = crawl.communicate(timeout=300)
    finally:
        if crawl.poll() is None:
            crawl.kill()
    assert crawl.returncode == 0, stderr[-3000:]
    assert killed, "the crawl never started a parse process"
    rows = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(r["title"] for r in rows) == sorted(f"Page {i}" for i in range(PAGES))
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["content/process_calls"] == PAGES
    assert stats["content/process_restarts"] >= 1
    assert not _children(crawl.pid)
