"""The one per-host tally (crawler/report/tally.py) and the one thread idiom
(crawler/threads/jobs.py), without a crawl."""

from __future__ import annotations

import threading

import pytest

from crawler.report.tally import HostTally, is_broken, replay
from crawler.threads.jobs import JobThread


def test_one_definition_of_a_broken_link() -> None:
    assert is_broken(404) and is_broken(410) and is_broken(500) and is_broken(None)
    assert not is_broken(200) and not is_broken(304) and not is_broken(301)
    assert not is_broken(503, final=False)  # a retry follows: not the URL's final answer
    assert not is_broken(404, robots=True)


def test_gaps_are_held_against_the_delay_applied_after_the_latest_fetch() -> None:
    t = HostTally()
    fetches = [(0.0, 1.0, 200, 2.0), (3.0, 3.5, 404, 1.0), (4.0, 4.2, None, None),
               (4.1, 5.0, 200, 0.5)]  # the last starts while the third is in flight: no gap
    gaps = list(replay(t, fetches))
    assert gaps == [(3.0, 2.0, 2.0), (4.0, 0.5, 1.0)]
    assert (t.fetches, t.http_errors, t.failed, t.gaps, t.short) == (4, 1, 1, 2, 1)
    assert t.gap_min == 0.5 and t.gap == pytest.approx(1.25)
    assert t.delay == pytest.approx(3.5 / 3)  # the delays known
    live = HostTally()
    first = live.fetched(0.0, 1.0, 200, page=True, final=True, robots=False)
    live.delay_applied(2.0)
    second = live.fetched(2.5, 3.0, 404, page=True, final=True, robots=False)
    assert first.gap is None and not first.broken
    assert (second.gap, second.delay, second.short, second.broken) == (1.5, 2.0, True, True)
    assert (live.pages, live.broken) == (1, 1)
    both = HostTally.of_counts(live.counts())
    both.add(t)
    assert both.fetches == 6 and both.short == 2


class _Counting(JobThread):
    def __init__(self) -> None:
        self.batches = 0
        super().__init__("counting")

    def _between_batches(self) -> None:
        self.batches += 1


def test_a_job_thread_runs_jobs_in_order_and_answers() -> None:
    worker = _Counting()
    ran: list[int] = []
    names: set[str] = set()
    for i in range(50):
        worker.submit(lambda i=i: (ran.append(i), names.add(threading.current_thread().name)))
    assert worker.call(lambda: len(ran)) == 50
    with pytest.raises(ValueError):
        worker.call(lambda: int("x"))
    worker.submit(lambda: int("y"))  # dropped, counted
    assert worker.future(lambda: 7).result() == 7
    assert worker.flush(10)
    assert ran == list(range(50)) and names == {"counting"}
    assert worker.failed == 2 and worker.pending == 0 and worker.batches >= 1
    before = worker.batches
    worker.wake()
    worker.flush(10)
    assert worker.batches > before
    assert worker.close(10) and not worker.alive


def test_a_job_thread_that_cannot_connect_says_so() -> None:
    class Broken(JobThread):
        def _connect(self) -> None:
            raise OSError("no database")

    with pytest.raises(OSError, match="no database"):
        Broken("broken")
