"""The crawl's one way to run work off the reactor: a thread of its own that runs jobs in the
order they were submitted.

The crawl database's writers (SQLite, PostgreSQL), the PostgreSQL index, the content, index and
feed threads (``crawler.offload``) and the shared frontier's worker (``BufferedFrontier``) are
each one :class:`JobThread`: what differs (how to connect, how a job runs, what a failure means,
what to do between batches and how long to sleep when idle) is the subclass's; the queue, the
order, answers, ``after`` hooks, ``flush`` and ``close`` are here. Free of Scrapy and Twisted: the
Scrapy side hands an answer over to the reactor itself (``reactor.callFromThread``).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

BATCH = 256  # jobs run per wake-up before ``_between_batches``
TOGETHER = 16  # jobs whose answers are held at most, with ``answers_together``


@dataclass(slots=True)
class _Job:
    job: Any
    after: Callable[[], None] | None = None
    answer: Future[Any] | None = None
    own: bool = False  # the thread's own (``flush``): called as is, not through ``_execute``


_STOP = object()
_WAKE = object()


class JobThread:
    """Runs jobs on its own thread. ``submit`` queues a job and returns at once (``after`` runs
    on the thread once the job has run or been given up); ``future`` queues one and returns a
    :class:`~concurrent.futures.Future` of its result (done on this thread: a caller on the
    reactor hops back with ``callFromThread``); ``call`` runs one after everything queued and
    returns its result; ``flush`` waits until every job submitted so far has run; ``wake``
    makes an idle thread run ``_between_batches`` soon; ``close`` runs what is queued, then
    ends the thread. ``failed`` / ``committed`` count jobs, ``last_error`` says why the last one
    failed; ``pending`` counts the jobs queued or running.

    Subclasses may give :meth:`_connect` (on the thread before the first job; an exception there
    is raised by the constructor), :meth:`_execute` (runs a job and returns its result, raising
    if it was given up: a ``call`` or a ``future`` gets that exception, a submitted job is
    dropped and :meth:`_dropped` says so), :meth:`_disconnect`, :meth:`_between_batches` (after
    each wake-up's jobs, up to ``BATCH`` of them, and after an idle wait) and :meth:`_idle_wait`
    (how long the thread sleeps with nothing queued before ``_between_batches`` runs anyway).

    With ``answers_together`` the answers of the jobs found queued at a wake-up are given
    together once they have all run (up to :data:`TOGETHER` at a time): their callers go on
    together, e.g. the content thread's pages, whose links and acknowledgements then go to the
    frontier in one batch instead of one call a page."""

    answers_together = False

    def __init__(self, name: str, *, start: bool = True) -> None:
        self.name = name
        self.failed = 0  # jobs given up
        self.committed = 0  # jobs run to the end
        self.last_error: str | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._woken = threading.Event()  # a wake-up queued and not acted on yet
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    def start(self) -> None:
        """Start the thread (the constructor does, unless told not to: an owner that must finish
        setting up what the hooks read first). An exception of ``_connect`` is raised here."""
        opened: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, args=(opened,), name=self.name, daemon=True
        )
        self._thread.start()
        error = opened.get()
        if error is not None:
            raise error

    # -- any thread ------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def pending(self) -> int:
        """Jobs queued or running (a batch's jobs count until the whole batch has run)."""
        return self._pending

    def submit(self, job: Any, after: Callable[[], None] | None = None) -> None:
        self._put(_Job(job, after))

    def future(self, job: Any) -> Future[Any]:
        answer: Future[Any] = Future()
        self._put(_Job(job, None, answer))
        return answer

    def call(self, job: Any, timeout: float | None = None) -> Any:
        """The job's result (or its exception), once everything queued before it has run."""
        return self.future(job).result(timeout)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every job submitted so far has run; False on timeout."""
        done = threading.Event()
        self._put(_Job(done.set, own=True))
        return done.wait(timeout)

    def wake(self) -> None:
        """Run ``_between_batches`` soon (news from elsewhere). Wake-ups that arrive before the
        thread got to the last one cost nothing more."""
        if not self._woken.is_set():
            self._woken.set()
            self._queue.put(_WAKE)

    def close(self, timeout: float | None = None) -> bool:
        """Run what is queued, then end the thread; False if it is still running after
        ``timeout`` seconds."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(_STOP)
            thread.join(timeout)
        return not self.alive

    def _put(self, item: _Job) -> None:
        with self._pending_lock:
            self._pending += 1
        self._queue.put(item)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self, opened: queue.SimpleQueue[BaseException | None]) -> None:
        try:
            self._connect()
        except BaseException as exc:  # handed to the constructor, which raises it
            opened.put(exc)
            return
        opened.put(None)
        try:
            while self._wake_up():
                pass
        finally:
            self._disconnect()

    def _wake_up(self) -> bool:
        """Wait for work (or the idle wait), run what is queued, up to ``BATCH`` jobs, then
        ``_between_batches``; False once told to stop."""
        try:
            first = self._queue.get(timeout=self._idle_wait())
        except queue.Empty:
            first = None
        if first is _STOP:
            return False
        batch = [first] if isinstance(first, _Job) else []
        stop = False
        while len(batch) < BATCH:  # whatever else is queued goes in the same wake-up
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is _STOP:
                stop = True
                break
            if isinstance(more, _Job):
                batch.append(more)
        self._woken.clear()
        held: list[tuple[Future[Any], BaseException | None, Any]] = []
        for n, item in enumerate(batch, 1):
            self._one(item, held if self.answers_together else None)
            if len(held) >= TOGETHER or n == len(batch):
                for answer, error, value in held:
                    if error is None:
                        answer.set_result(value)
                    else:
                        answer.set_exception(error)
                held.clear()
        with self._pending_lock:
            self._pending -= len(batch)
        self._between_batches()
        return not stop

    def _one(
        self, item: _Job, held: list[tuple[Future[Any], BaseException | None, Any]] | None
    ) -> None:
        """Run one job; its answer given now, or added to ``held`` (given by the caller)."""
        if item.own:
            item.job()
            return
        try:
            value = self._execute(item.job)
        except Exception as exc:
            self.failed += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            if item.answer is None:
                self._dropped(item.job, exc)
            elif held is None:
                item.answer.set_exception(exc)
            else:
                held.append((item.answer, exc, None))
        else:
            self.committed += 1
            if item.answer is not None and held is None:
                item.answer.set_result(value)
            elif item.answer is not None:
                held.append((item.answer, None, value))
        finally:
            if item.after is not None:
                item.after()

    # -- the subclass's --------------------------------------------------------------------------

    def _connect(self) -> None:
        """Open what the jobs need (on the thread)."""

    def _execute(self, job: Any) -> Any:
        return job()

    def _disconnect(self) -> None:
        """Close what ``_connect`` opened (on the thread, after the last job)."""

    def _dropped(self, job: Any, exc: Exception) -> None:
        logger.error("%s: a submitted job failed and was dropped: %s", self.name, exc)

    def _between_batches(self) -> None:
        """After each wake-up's jobs (and an idle wait): the subclass's housekeeping."""

    def _idle_wait(self) -> float | None:
        """Seconds to wait for a job before ``_between_batches`` runs anyway (None: wait for
        one)."""
        return None
