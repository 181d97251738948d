"""A writer thread: one connection of its own, jobs run in the order they were submitted.

The crawl database (SQLite and PostgreSQL) and the PostgreSQL index hand their writes to one,
so the reactor never waits on a transaction. What differs per database (how to connect, how a
job runs in a transaction, what a failure means) is the subclass's; the queue, the order, the
``after`` hooks, ``flush`` and ``close`` are here.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_STOP = object()


class WriterThread:
    """Runs jobs on its own thread and connection. ``submit`` queues a job and returns at once;
    ``call`` runs one after everything queued and returns its result; ``flush`` waits until
    every job submitted so far has run; ``close`` runs what is queued, then closes the
    connection. ``after`` (of ``submit``) runs on the writer thread once the job is committed
    or given up. ``failed`` / ``committed`` count jobs, ``last_error`` says why the last one
    failed.

    Subclasses give :meth:`_connect` (on the writer thread; an exception there is raised by the
    constructor), :meth:`_execute` (runs a job in a transaction and returns its result, raising
    if it was given up: a ``call`` raises that, a submitted job is dropped and
    :meth:`_dropped` says so; the crawl goes on, as after a killed batch) and
    :meth:`_disconnect`."""

    def __init__(self, name: str) -> None:
        self.failed = 0  # jobs given up
        self.committed = 0  # jobs committed
        self.last_error: str | None = None
        self._queue: queue.Queue[Any] = queue.Queue()
        opened: queue.Queue[BaseException | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(opened,), name=name, daemon=True)
        self._thread.start()
        error = opened.get()
        if error is not None:
            raise error

    def submit(self, job: Any, after: Callable[[], None] | None = None) -> None:
        self._queue.put((job, after, None))

    def call(self, job: Any) -> Any:
        answer: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._queue.put((job, None, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def flush(self) -> None:
        self._queue.join()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def _run(self, opened: queue.Queue[BaseException | None]) -> None:
        try:
            self._connect()
        except BaseException as exc:  # handed to the constructor, which raises it
            opened.put(exc)
            return
        opened.put(None)
        try:
            while True:
                item = self._queue.get()
                try:
                    if item is _STOP:
                        return
                    job, after, answer = item
                    try:
                        value = self._execute(job)
                    except Exception as exc:
                        self.failed += 1
                        self.last_error = f"{type(exc).__name__}: {exc}"
                        if answer is not None:
                            answer.put((False, exc))
                        else:
                            self._dropped(job, exc)
                    else:
                        self.committed += 1
                        if answer is not None:
                            answer.put((True, value))
                    finally:
                        if after is not None:
                            after()
                finally:
                    self._queue.task_done()
        finally:
            self._disconnect()

    def _connect(self) -> None:
        raise NotImplementedError

    def _execute(self, job: Any) -> Any:
        raise NotImplementedError

    def _disconnect(self) -> None:
        raise NotImplementedError

    def _dropped(self, job: Any, exc: Exception) -> None:
        logger.error("%s: a batch of writes failed and was dropped: %s", self._thread.name, exc)
