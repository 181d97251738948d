"""What the caller of a :class:`~crawler.frontier.buffered.BufferedFrontier` asks of the shared
frontier (counts for a progress line, whether the crawl has work, the hosts it admitted; whether
a URL was seen), answered without waiting for it.

The caller is Scrapy's reactor thread: while it waits nothing else runs (no download, no
SIGINT, no progress line), and a shared frontier may take as long as Redis is away to answer.
So a question goes to the frontier's worker thread and the caller is given the last answer at
once; the fresh one is kept for the caller's next ask, and ``notify`` tells it one came (the
engine asks again then). The end-of-crawl test ("has work?") takes only a fresh answer: to a
question asked since it last looked, after which nothing that may add work (an add, a page's
links, a release) was queued; until it comes the crawl has work, and a no wakes the engine.
When the crawl closes (its stats are final) a report waits for a fresh answer, a bounded time,
unless the shared frontier is away.

A seen-test is queued with the adds, in order, and its answer handed to a callback on the worker
thread: :meth:`AskedReports.mark_seen_later` (URLs a crawl database fetched before),
:meth:`AskedReports.add_unseen` (a page requisite, queued by the first worker to claim it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, TypeVar

from crawler.frontier.api import AddResult, Entry, Frontier, FrontierCounts, HostReport

T = TypeVar("T")

PENDING = "pending"  # AddResult.reason of an add that was queued, not yet answered
REPORT_WAIT = 5.0  # seconds a closing report waits for the worker before the last answer
# seconds a fresh answer is given again, if nothing was queued since (the engine asks twice
# before it closes a crawl, in one turn of the reactor)
FRESH_FOR = 1.0


class AskedReports:
    """The reports of a buffered frontier (see the module docstring). The frontier gives
    ``inner``, ``notify``, ``on_added``, ``transient``, ``_closed``, ``_away_since``,
    ``_worker`` and ``_submit``."""

    inner: Frontier
    notify: Callable[[], None] | None
    on_added: Callable[[list[Entry], list[AddResult]], None] | None
    transient: Callable[[BaseException], bool]
    _closed: bool
    _away_since: float | None
    _worker: Any
    _submit: Callable[..., None]

    def _init_reports(self) -> None:
        self._reports: dict[str, Any] = {}  # the last answer of each report
        self._asking: set[str] = set()  # asked of the worker, not answered yet
        self._answered: set[str] = set()  # ... answered since the caller last took them
        self._reports_lock = threading.Lock()
        self._final = False  # closing: reports wait (bounded) for a fresh answer
        self._changes = 0  # calls that may change the frontier, queued so far
        self._taken: dict[str, tuple[Any, float, int]] = {}  # fresh answers given: when, _changes
        self._asked_at: dict[str, int] = {}  # _changes when each question was queued

    def _report(self, name: str, fn: Callable[[], T], default: T, *, fresh: bool = False) -> T:
        """The answer asked at the last call if it came since, else the last answer
        (``fresh``: ``default``), and a new question for the worker if none is waiting.
        After :meth:`final_reports` a fresh answer is waited for, and after ``close`` asked
        here; the last one while the shared frontier is away."""
        if (self._final or self._closed) and self._away_since is None:
            future: Future[T] = Future()
            if self._closed or not self._worker.alive:
                settle(future, fn)  # the worker has stopped: asked here
            else:
                self._submit(lambda: settle(future, fn), change=False)
            try:
                value = future.result(timeout=REPORT_WAIT)
            except Exception as exc:
                if not isinstance(exc, TimeoutError) and not self.transient(exc):
                    raise
                # away (or slow) now: the last answer
            else:
                self._reports[name] = value
                return value
        if self._final or self._closed:
            return self._reports.get(name, default)
        now = time.monotonic()
        with self._reports_lock:
            taken = self._taken.get(name)
            if taken is not None and taken[2] == self._changes and now - taken[1] < FRESH_FOR:
                return taken[0]  # type: ignore[no-any-return]
            if name in self._answered:
                self._answered.discard(name)
                value = self._reports[name]
                # a fresh answer holds only if nothing was queued after its question
                if not fresh or self._asked_at.get(name) == self._changes:
                    self._taken[name] = (value, now, self._changes)
                    return value  # type: ignore[no-any-return]
            if name not in self._asking:
                self._asking.add(name)
                self._submit(lambda: self._answer(name, fn, fresh), change=False)
                self._asked_at[name] = self._changes
        return default if fresh else self._reports.get(name, default)

    def _answer(self, name: str, fn: Callable[[], Any], fresh: bool = False) -> None:
        """On the worker: one report's answer, kept for the caller's next ask; a ``fresh``
        one that says no (the crawl has no work) wakes the caller (it would not ask before
        its next heartbeat otherwise; a yes changes nothing for it)."""
        try:
            value = fn()
        finally:
            with self._reports_lock:
                self._asking.discard(name)
        with self._reports_lock:
            self._reports[name] = value
            self._answered.add(name)
        if fresh and not value and self.notify is not None:
            self.notify()

    def final_reports(self) -> None:
        """The crawl is closing: reports wait (bounded) for a fresh answer from now on."""
        self._final = True

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the worker, after everything queued before it, and wait for it: for
        a caller off the reactor thread (the reactor's own use :meth:`mark_seen_later` and
        :meth:`add_unseen`, which never wait). Once the worker has stopped it runs here."""
        if self._closed or not self._worker.alive:
            return fn()
        future: Future[T] = Future()
        self._submit(lambda: settle(future, fn))
        return future.result()

    def mark_seen(self, keys: Iterable[str]) -> int:
        """Waits for the shared frontier: not for the reactor (see :meth:`mark_seen_later`)."""
        batch = list(keys)
        return self._call(lambda: self.inner.mark_seen(batch))

    def mark_seen_later(
        self, keys: Iterable[str], then: Callable[[int], None] | None = None
    ) -> None:
        """``mark_seen`` queued in order with the adds (before any queued after it): ``then``
        gets how many were new, on the worker thread, once the shared frontier answered."""
        batch = list(keys)

        def job() -> None:
            new = self.inner.mark_seen(batch)
            if then is not None:
                then(new)

        self._submit(job)

    def add_unseen(
        self, entry: Entry, key: str, then: Callable[[bool], None] | None = None
    ) -> AddResult:
        """Queue ``entry`` (forced: outside the page budget) if ``key`` was not seen by the
        crawl, and make it seen, in one queued job (a page requisite: the first worker to
        claim it fetches it). ``then`` gets whether it was queued, on the worker thread; the
        answer goes to ``on_added`` too."""

        def job() -> None:
            if self.inner.mark_seen([key]) == 1:
                result = self.inner.add(entry, force=True)
            else:
                result = AddResult(False, "seen")
            if self.on_added is not None:
                self.on_added([entry], [result])
            if then is not None:
                then(result.added)

        self._submit(job)
        return AddResult(True, PENDING)

    def hosts_later(self, then: Callable[[list[str]], None]) -> None:
        """``then`` gets :meth:`Frontier.hosts` on the worker thread, once the shared frontier
        answered (the opening's: the caller restores its budgets then)."""
        self._submit(lambda: then(self.inner.hosts()), change=False)

    def counts(self) -> FrontierCounts:
        return self._report("counts", lambda: self.inner.counts(), FrontierCounts())

    def waiting_hosts(self) -> list[HostReport]:
        return self._report("waiting", lambda: self.inner.waiting_hosts(), [])

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        return self._report("busiest", lambda: self.inner.busiest_hosts(n), [])

    def hosts(self) -> list[str]:
        return self._report("hosts", lambda: self.inner.hosts(), [])


def settle(future: Future[T], fn: Callable[[], T]) -> None:
    """``fn``'s result or exception into ``future`` (a call the caller waits for is not
    retried by the guard: its exception is the caller's)."""
    try:
        future.set_result(fn())
    except BaseException as exc:
        future.set_exception(exc)
