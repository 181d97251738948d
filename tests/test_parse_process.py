"""The parse process (crawler/offload.py ``ParseProcess``): the same answer as a call in this
process, and no call lost to a child that dies or hangs.

The functions below run in the spawned child, which imports them from this module.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from crawler.content.html import parse_page
from crawler.offload import ParseProcess
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
