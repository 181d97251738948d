"""A shared frontier served to a single-threaded caller that must never wait on it.

Scrapy's scheduler interface is synchronous and runs on the reactor thread; a round trip to a
shared frontier (Redis) costs 0.1-0.2 ms and stalls every download in the process while it
waits. :class:`BufferedFrontier` puts every call on the shared frontier on one worker thread:

* leases are fetched ahead into a small buffer, so ``next()`` is a ``popleft``;
* completions, acknowledgements, holds and link batches are queued and sent in order, several
  per wake-up of the worker, without the caller waiting for them;
* what the caller asks about (``due_in``, ``has_work``, ``counts``) is answered from a snapshot
  the worker refreshes after each batch of calls and at least every ``refresh`` seconds (and
  also takes fresh leases then when work is due: an idle worker learns of new work that way);
* the worker renews the leases this process holds, so a long fetch never loses its lease, and
  hands the buffered, never-started ones back at ``close``.

Callbacks (``notify`` when leases arrived, ``on_added`` with the results of queued adds,
``on_error`` when a call on the shared frontier failed) run on the worker thread: the adapter
hops them over to its own thread (``reactor.callFromThread``). ``poll`` runs there too at each
housekeeping (work arriving from outside the frontier, such as seeds pushed to a list); while
it returns True the crawl has work.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from crawler import defaults

from .api import AddResult, Entry, Frontier, FrontierCounts, HostReport, Lease, Outcome

logger = logging.getLogger(__name__)

T = TypeVar("T")

PENDING = "pending"  # AddResult.reason of an add that was queued, not yet answered


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the shared frontier said at ``taken`` (on the caller's monotonic clock)."""

    taken: float
    due_in: float | None
    in_flight: int
    queued: int


class BufferedFrontier(Frontier):
    def __init__(
        self,
        inner: Frontier,
        *,
        read_ahead: int = defaults.FRONTIER_READ_AHEAD,
        refresh: float = defaults.FRONTIER_REFRESH_INTERVAL,
        notify: Callable[[], None] | None = None,
        on_added: Callable[[list[Entry], list[AddResult]], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        poll: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.lease_ttl = inner.lease_ttl
        self.read_ahead = max(1, read_ahead)
        self.refresh = refresh
        self.notify = notify
        self.on_added = on_added
        self.on_error = on_error
        self.poll = poll
        self._poll_more = False  # the last poll said more is waiting outside the frontier
        self.clock = clock
        self._jobs: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._pending = 0  # jobs queued or running (read on the caller's thread)
        self._pending_lock = threading.Lock()
        self._buffer: deque[Lease] = deque()  # appended by the worker, popped by the caller
        self._leasing = False
        self._open: dict[str, float] = {}  # token -> when handed out or last renewed
        self._open_lock = threading.Lock()
        self._closed = False
        self.snapshot = Snapshot(clock(), None, 0, 0)
        self._take_snapshot()  # a first answer before the crawl asks anything
        self._thread = threading.Thread(target=self._run, name="frontier-worker", daemon=True)
        self._thread.start()

    # -- the worker thread -----------------------------------------------------------------------

    def _submit(self, job: Callable[[], Any]) -> None:
        with self._pending_lock:
            self._pending += 1
        self._jobs.put(job)

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the worker, after everything queued before it, and wait for it (for
        the few calls whose answer the caller needs at once, outside the crawl's hot path).
        Once the worker has stopped (after ``close``: a closing report) it runs here."""
        if self._closed or not self._thread.is_alive():
            return fn()
        future: Future[T] = Future()

        def job() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        self._submit(job)
        return future.result()

    def _run(self) -> None:
        last_refresh = self.clock()
        while True:
            try:
                job = self._jobs.get(timeout=self.refresh)
            except queue.Empty:
                job = None
            else:
                if job is None:
                    return
            batch = [job] if job is not None else []
            while len(batch) < 256:  # whatever else is queued goes in the same wake-up
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._jobs.put(None)
                    break
                batch.append(more)
            for fn in batch:
                self._guard(fn)
            with self._pending_lock:
                self._pending -= len(batch)
            now = self.clock()
            if batch or now - last_refresh >= self.refresh:
                last_refresh = now
                self._guard(self._housekeeping)

    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # the worker must survive a failed call
            if self.on_error is not None:
                self.on_error(exc)
            else:
                logger.exception("Call on the shared frontier failed")

    def _housekeeping(self) -> None:
        if self.poll is not None and not self._closed:
            self._poll_more = self.poll()
        self._renew_old_leases()
        self._take_snapshot()
        if (
            not self._closed
            and not self._leasing
            and len(self._buffer) < self.read_ahead
            and self.snapshot.due_in is not None
            and self.snapshot.due_in <= 0
        ):
            self._lease(self.read_ahead - len(self._buffer))

    def _take_snapshot(self) -> None:
        inner = self.inner
        self.snapshot = Snapshot(self.clock(), inner.due_in(), inner.in_flight(), len(inner))

    def _lease(self, n: int) -> None:
        if self._closed:
            self._leasing = False
            return
        try:
            leases = self.inner.next_many(n)
        finally:
            self._leasing = False
        if leases:
            self._buffer.extend(leases)
            if self.notify is not None:
                self.notify()

    def _release_buffer(self) -> None:
        unstarted = [lease.token for lease in self._buffer]
        self._buffer.clear()
        if unstarted:
            self.inner.release(unstarted)

    def _renew_old_leases(self) -> None:
        now = self.clock()
        cutoff = now - self.lease_ttl / 3
        with self._open_lock:
            old = [t for t, at in self._open.items() if at <= cutoff]
            for token in old:
                self._open[token] = now
        buffered_old = [lease.token for lease in list(self._buffer) if lease.issued_at <= cutoff]
        if old or buffered_old:
            self.inner.renew(old + buffered_old)

    # -- the caller's side -----------------------------------------------------------------------

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        def job() -> None:
            result = self.inner.add(entry, force=force, first=first)
            if self.on_added is not None:
                self.on_added([entry], [result])

        self._submit(job)
        return AddResult(True, PENDING)

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        batch = list(entries)
        if not batch:
            return []

        def job() -> None:
            results = self.inner.add_many(batch)
            if self.on_added is not None:
                self.on_added(batch, results)

        self._submit(job)
        return [AddResult(True, PENDING)] * len(batch)

    def mark_seen(self, keys: Iterable[str]) -> int:
        batch = list(keys)
        return self._call(lambda: self.inner.mark_seen(batch))

    def next(self) -> Lease | None:
        try:
            lease = self._buffer.popleft()
        except IndexError:
            lease = None
        if lease is not None:
            with self._open_lock:
                self._open[lease.token] = self.clock()
        if (
            len(self._buffer) <= self.read_ahead // 2
            and not self._leasing
            and not self._closed
            and self.snapshot.due_in is not None
            and self.due_in() == 0
        ):  # else the worker's housekeeping leases when the snapshot says work is due
            self._leasing = True
            self._submit(lambda: self._lease(self.read_ahead - len(self._buffer)))
        return lease

    def complete(
        self, token: str, duration: float | None, outcome: Outcome = Outcome.FETCHED
    ) -> None:
        self._submit(lambda: self.inner.complete(token, duration, outcome))

    def ack(self, token: str) -> None:
        with self._open_lock:
            self._open.pop(token, None)
        self._submit(lambda: self.inner.ack(token))

    def finish(
        self, token: str, duration: float | None, outcome: Outcome = Outcome.FETCHED
    ) -> None:
        with self._open_lock:
            self._open.pop(token, None)
        self._submit(lambda: self.inner.finish(token, duration, outcome))

    def renew(self, tokens: Iterable[str]) -> int:
        batch = list(tokens)
        self._submit(lambda: self.inner.renew(batch))
        return len(batch)

    def release(self, tokens: Iterable[str]) -> int:
        batch = list(tokens)
        with self._open_lock:
            for token in batch:
                self._open.pop(token, None)
        self._submit(lambda: self.inner.release(batch))
        return len(batch)

    def expire(self) -> int:
        self._submit(self.inner.expire)
        return 0

    def due_in(self) -> float | None:
        if self._buffer:
            return 0.0
        snap = self.snapshot
        if snap.due_in is None:
            return None
        return max(0.0, snap.due_in - (self.clock() - snap.taken))

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        self._submit(lambda: self.inner.set_crawl_delay(host, seconds))
        return True

    def hold_host(self, host: str, seconds: float) -> None:
        self._submit(lambda: self.inner.hold_host(host, seconds))

    def has_work(self, horizon: float) -> bool:
        if self._buffer or self._pending or self._poll_more:
            return True
        with self._open_lock:
            if self._open:
                return True
        snap = self.snapshot
        if snap.in_flight:
            return True
        due = self.due_in()
        return due is not None and due <= horizon

    def in_flight(self) -> int:
        with self._open_lock:
            return len(self._open)

    def __len__(self) -> int:
        return self.snapshot.queued + len(self._buffer)

    def counts(self) -> FrontierCounts:
        return self._call(self.inner.counts)

    def waiting_hosts(self) -> list[HostReport]:
        return self._call(self.inner.waiting_hosts)

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        return self._call(lambda: self.inner.busiest_hosts(n))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far has been sent; False on timeout."""
        done = threading.Event()
        self._submit(done.set)
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Hand the buffered leases back, send what is queued, stop the worker."""
        if self._closed:
            return
        self._closed = True
        self._submit(self._release_buffer)  # on the worker: after any lease call under way
        self._jobs.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("The frontier worker did not finish within %.0fs", timeout)
        self.inner.close()
