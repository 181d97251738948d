"""The engine waker: the engine is asked for requests when the earliest host comes due.

Without it Scrapy asks the scheduler again only at its 5-second heartbeat when every host is
waiting out its delay. Judged by what is scheduled and called, not by wall-clock time, so a
loaded machine cannot make it fail or pass.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

import crawler.scheduler.waker as waker_module
from crawler.scheduler.waker import EngineWaker


class _Timer:
    """A pending ``call_later``: cancelled or fired by the test, never by a clock."""

    def __init__(self, delay: float, func: Callable[[], object]) -> None:
        self.delay, self.func, self.cancelled = delay, func, False

    def cancel(self) -> None:
        self.cancelled = True


class _NextCall:
    def __init__(self) -> None:
        self.scheduled = 0

    def schedule(self) -> None:
        self.scheduled += 1


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[_Timer]:
    made: list[_Timer] = []

    def call_later(delay: float, func: Callable[[], object]) -> _Timer:
        made.append(_Timer(delay, func))
        return made[-1]

    monkeypatch.setattr(waker_module, "call_later", call_later)
    return made


def _crawler(closing: Any = None) -> tuple[Any, _NextCall]:
    nextcall = _NextCall()
    slot = SimpleNamespace(nextcall=nextcall, closing=closing)
    return SimpleNamespace(engine=SimpleNamespace(_slot=slot)), nextcall


def test_wakes_the_engine_when_the_earliest_host_is_due(timers: list[_Timer]) -> None:
    crawler, nextcall = _crawler()
    waker = EngineWaker(crawler)
    waker.wake_at(100.3, now=100.0)
    assert [t.delay for t in timers] == [pytest.approx(0.3)]
    waker.wake_at(101.0, now=100.0)  # later than the pending wake-up: nothing changes
    assert len(timers) == 1 and not timers[0].cancelled
    waker.wake_at(100.1, now=100.0)  # earlier: replaces it
    assert timers[0].cancelled and timers[1].delay == pytest.approx(0.1)
    waker.wake_at(99.0, now=100.0)  # already due: at once, never a negative delay
    assert timers[2].delay == 0.0
    timers[2].func()
    assert nextcall.scheduled == 1
    waker.wake_at(105.0, now=100.0)  # after firing, a later wake-up is scheduled again
    assert timers[3].delay == pytest.approx(5.0)


def test_cancel_and_a_closing_engine(timers: list[_Timer]) -> None:
    crawler, nextcall = _crawler(closing=object())
    waker = EngineWaker(crawler)
    waker.wake_at(1.0, now=0.0)
    waker.cancel()
    assert timers[0].cancelled
    waker.wake_at(2.0, now=0.0)
    timers[1].func()  # the engine is closing: not asked for more requests
    assert nextcall.scheduled == 0
