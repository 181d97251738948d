"""``JobThread.answers_together`` (crawler/threads/jobs.py): the answers of the jobs a wake-up
found queued are given once they have all run (the content thread's pages then reach the
frontier together); without it, each as its job ends."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from crawler.threads.jobs import TOGETHER, JobThread


class _Together(JobThread):
    answers_together = True


def _events(thread: JobThread, jobs: int) -> list[str]:
    """What happened, in order, when ``jobs`` jobs were queued behind a running one."""
    events: list[str] = []
    started, release = threading.Event(), threading.Event()

    def blocker() -> None:
        started.set()
        release.wait()

    def job(i: int) -> int:
        events.append(f"ran {i}")
        return i

    first = thread.future(blocker)
    started.wait()
    answers: list[Future[Any]] = []
    for i in range(jobs):
        answer = thread.future(lambda i=i: job(i))
        answer.add_done_callback(lambda f: events.append(f"answered {f.result()}"))
        answers.append(answer)
    release.set()
    first.result()
    for answer in answers:
        answer.result()
    thread.close()
    return events


def test_the_answers_of_jobs_queued_together_are_given_together() -> None:
    assert _events(_Together("together"), 3) == [
        "ran 0", "ran 1", "ran 2", "answered 0", "answered 1", "answered 2"]


def test_answers_held_are_bounded() -> None:
    events = _events(_Together("together"), TOGETHER + 2)
    assert events.index(f"answered {TOGETHER - 1}") < events.index(f"ran {TOGETHER}")
    assert events[-4:] == [f"ran {TOGETHER}", f"ran {TOGETHER + 1}", f"answered {TOGETHER}",
                           f"answered {TOGETHER + 1}"]


def test_without_it_each_answer_is_given_as_its_job_ends() -> None:
    assert _events(JobThread("alone"), 3) == [
        "ran 0", "answered 0", "ran 1", "answered 1", "ran 2", "answered 2"]


def test_a_failed_job_held_answers_its_exception() -> None:
    thread = _Together("together")

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        thread.call(boom)
    assert thread.call(lambda: 5) == 5
    thread.close()
