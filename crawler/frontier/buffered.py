"""A shared frontier served to a single-threaded caller that must never wait on it.

Scrapy's scheduler interface is synchronous and runs on the reactor thread; a round trip to a
shared frontier (Redis) costs 0.1-0.2 ms and stalls every download in the process while it
waits. :class:`BufferedFrontier` puts every call on the shared frontier on one worker thread:

* leases are fetched ahead into a small buffer, so ``next()`` is a ``popleft``; how many
  adapts to the caller: the read-ahead doubles when the caller found the buffer empty while
  work was due, and a lease the caller leaves in the buffer for ``max_wait`` seconds is handed
  back (and the read-ahead halves), so a busy worker never sits on host slots that an idle
  worker could use;
* completions, acknowledgements, holds and link batches are queued and sent in order, several
  per wake-up of the worker, without the caller waiting for them;
* what the caller asks about (``due_in``, ``has_work``, ``counts``) is answered from a snapshot
  the worker refreshes after each batch of calls (one ``status`` call, or the reply of the
  lease call);
* an idle worker does not poll: a frontier that can ``watch`` (Redis pub/sub) wakes it when
  another process made work available, and it sleeps until the earliest host is due
  otherwise, looking anyway every ``refresh`` seconds (a frontier that cannot watch is polled
  at that interval);
* the worker renews the leases this process holds, so a long fetch never loses its lease, and
  hands the buffered, never-started ones back at ``close``;
* the shared frontier itself may be opened by the worker (``opener``: connect, check, claim
  partitions), as its first job, so the caller has a frontier at once (empty until then:
  :mod:`crawler.frontier.unopened`); reports and seen-tests never wait either
  (:mod:`crawler.frontier.asking`).

Callbacks (``notify`` when leases arrived, ``on_added`` with the results of queued adds,
``on_completed`` with the rest each completion gave its host's slot, ``on_error`` when a call on
the shared frontier failed, not as the server away: ``transient``) run on the worker thread: the
adapter hops them over to its own thread (``reactor.callFromThread``). ``poll`` runs there too,
every ``refresh`` seconds (work arriving from outside the frontier, such as seeds pushed to a
list); while it returns True the crawl has work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawler.config.tuning import knob_default
from crawler.frontier.api import (
    AddResult,
    Entry,
    Frontier,
    Lease,
    Outcome,
    Settlement,
)
from crawler.frontier.asking import PENDING, AskedReports
from crawler.frontier.unopened import Unopened
from crawler.threads.jobs import JobThread

logger = logging.getLogger(__name__)

POLL_AGAIN = 0.05  # seconds between polls while the last one said more is waiting
REFRESH = 1.0  # seconds between an idle worker's looks, if nothing wakes it (``refresh``)
LEASE_MAX_WAIT = 0.2  # seconds a read-ahead lease waits for the engine (``max_wait``)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the shared frontier said at ``taken`` (on the caller's monotonic clock)."""

    taken: float
    due_in: float | None
    in_flight: int
    queued: int


class BufferedFrontier(AskedReports, Frontier):
    """See the module docstring. ``read_ahead`` is the most leases buffered at once; how many
    are really fetched ahead adapts to the caller's demand (``_target``): it doubles when the
    caller found the buffer empty, and halves when a buffered lease waited ``max_wait``
    seconds without being taken (it is then handed back, for another worker to take).
    ``refresh`` is the longest the worker goes without looking at the shared frontier; with
    a frontier that can ``watch``, an idle worker otherwise sleeps until it is told of work or
    the earliest host comes due."""

    completes_later = True  # completions are sent by the worker: see ``on_completed``

    def __init__(
        self,
        inner: Frontier | None = None,
        *,
        opener: Callable[[], Frontier] | None = None,
        lease_ttl: float = 0.0,
        read_ahead: int = knob_default("read_ahead"),
        refresh: float = REFRESH,
        max_wait: float = LEASE_MAX_WAIT,
        notify: Callable[[], None] | None = None,
        on_added: Callable[[list[Entry], list[AddResult]], None] | None = None,
        on_completed: Callable[[str, float | None], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        poll: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        transient: Callable[[BaseException], bool] = lambda exc: False,  # (no server: none)
        max_backoff: float = 5.0,
        linger: float = 0.0,
    ) -> None:
        # No shared frontier yet (``opener``): the worker opens it as its first job, retried
        # while the server is away, and the caller is served an empty one meanwhile
        self.inner: Frontier = inner if inner is not None else Unopened(lease_ttl)
        self._opener = opener
        self.refused = ""  # why the shared frontier could not be opened (not "away": refused)
        # seconds a batch of links and completions waits for more before it is sent (group
        # commit: fewer, fuller calls; a sharded frontier pays a round trip per node per call)
        self.linger = linger
        # which errors mean "the shared frontier is away for now" (a lost connection, a server
        # restarting; the backend's own notion): retried, with backoff, until it goes through
        self.transient = transient
        self.max_backoff = max_backoff
        self._away_since: float | None = None
        self._init_reports()
        self._stopping = threading.Event()  # set at close: a retry's backoff ends at once
        self._gave_up = False  # "still away at close" said
        self._last_error: BaseException | None = None
        self.lease_ttl = self.inner.lease_ttl
        self.read_ahead = max(1, read_ahead)
        self.refresh = refresh
        self.max_wait = max_wait
        self.notify = notify
        self.on_added = on_added
        self.on_completed = on_completed
        self.on_error = on_error
        self.poll = poll
        self._poll_more = False  # the last poll said more is waiting outside the frontier
        self._last_poll = float("-inf")
        self.clock = clock
        # (lease, when buffered): appended by the worker, popped by the caller, both under
        # the lock (the worker also takes stale ones back from the head)
        self._buffer: deque[tuple[Lease, float]] = deque()
        self.returned = 0  # stale leases handed back (for reports and benchmarks)
        self._buffer_lock = threading.Lock()
        self._target = min(2, self.read_ahead)  # leases to fetch ahead now (adaptive)
        self._asked = False  # the caller took a lease since the last lease call
        self._starved = False  # the caller found the buffer empty: it waits for ``notify``
        self._missed = False  # ... while work was due: the read-ahead was too small
        self._leasing = False
        self._open: dict[str, float] = {}  # token -> when handed out or last renewed
        self._open_lock = threading.Lock()
        # The open batch: link batches and completions/acknowledgements waiting for the one
        # queued job that sends them all (None: none open); any other call closes it
        self._batch: _Batch | None = None
        self._batch_lock = threading.Lock()
        self._closed = False
        self._control_seen = 0  # the inner frontier's control_epoch last acted on
        self.snapshot = Snapshot(clock(), None, 0, 0)
        self._take_snapshot()  # a first answer before the crawl asks anything
        self._worker = _FrontierThread(self)
        self._unwatch = self.inner.watch(self._worker.wake) if opener is None else None
        if opener is not None:
            self._worker.submit(self._open_shared)  # first: what the caller queues runs after it
        self._worker.start()

    # -- the worker thread -----------------------------------------------------------------------

    def _submit(self, job: Callable[[], Any], *, change: bool = True) -> None:
        """Queue one call; it closes the open segments (nothing queued after it may join a
        batch sent before it). ``change``: it may change what the shared frontier holds (a
        question does not: see ``AskedReports``)."""
        with self._batch_lock:
            self._batch = None
            if change:
                self._changes += 1
            self._worker.submit(job)

    @property
    def _pending(self) -> int:
        """Calls queued or running on the worker."""
        return self._worker.pending

    def _open_shared(self) -> None:
        """The first job when the shared frontier is opened here (``opener``): a transient
        failure is retried by the guard like any call; any other is a refusal (another
        layout, other settings): said in ``refused``, and the crawl ends on it."""
        assert self._opener is not None
        try:
            inner = self._opener()
        except Exception as exc:
            if not self.transient(exc):
                self.refused = str(exc) or type(exc).__name__
            raise
        self.inner = inner
        if not self._closed:
            self._unwatch = inner.watch(self._worker.wake)
        self._take_snapshot()
        if self.notify is not None:
            self.notify()  # the caller may be waiting for its first leases

    def _timeout(self) -> float:
        """How long the worker may sleep: until a buffered lease goes stale, the earliest host
        comes due, or (no news otherwise) ``refresh``; polling at ``refresh`` only when the
        shared frontier cannot tell of changes."""
        wait = self.refresh
        if self._poll_more:
            wait = min(wait, POLL_AGAIN)
        if self._buffer:
            wait = min(wait, self.max_wait)
        if self._unwatch is not None:
            snap = self.snapshot
            if snap.due_in is not None and (self._starved or not self._buffer):
                wait = min(wait, max(0.005, snap.due_in - (self.clock() - snap.taken)))
        return wait

    def _guard(self, fn: Callable[[], Any]) -> None:
        """Run one call on the shared frontier. A transient failure (the server went away) is
        retried with backoff until it goes through, so nothing queued is lost and the calls
        stay in order; meanwhile the caller goes on with the leases it holds and its adds
        wait here. One line when the server goes away, one when it is back."""
        backoff, done = 0.05, False
        while True:
            if self._closed and self._away_since is not None:
                # its leases expire, and their URLs come back to other workers; nothing more
                # is tried (each try could wait out a socket timeout)
                self._give_up()
                return
            try:
                if not done:
                    fn()
                done = True  # (a call may go through without the server: a frontier that
                if self._away_since is not None:  # keeps partitions in memory; back once
                    self.inner.ping()  # the server answers)
            except Exception as exc:  # the worker must survive a failed call
                if self.transient(exc):
                    if self._away_since is None:
                        self._away_since = self.clock()
                        logger.warning("Shared frontier unreachable (%s): retrying, the work "
                                       "in hand is kept", exc)
                    self._last_error = exc
                    self._stopping.wait(backoff)  # close ends the wait
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
                if self.on_error is not None:
                    self.on_error(exc)
                else:
                    logger.exception("Call on the shared frontier failed")
            if self._away_since is not None:
                logger.warning("Shared frontier back after %.1fs", self.clock() - self._away_since)
                self._away_since = None
            return

    def _give_up(self) -> None:
        if not self._gave_up:
            self._gave_up = True
            logger.warning(
                "Shared frontier still away at close (%s): what is still queued here is not "
                "sent; this worker's leases expire, and their URLs go to the other workers",
                self._last_error,
            )

    def _housekeeping(self) -> None:
        if self._closed:
            return
        now = self.clock()
        # while more waits outside (a long <site>:start_urls), the next batch comes soon
        every = POLL_AGAIN if self._poll_more else self.refresh
        if self.poll is not None and now - self._last_poll >= every:
            self._last_poll = now
            self._poll_more = self.poll()
        self._renew_old_leases()
        self._return_stale()
        self._obey_operator()
        if not self._leasing and self._wants_leases():
            self._lease()
        else:
            self._take_snapshot()
            if not self._leasing and self._wants_leases():
                self._lease()

    def _wants_leases(self) -> bool:
        """Lease now when work is due and the caller is taking leases (fill the read-ahead) or
        waits for one (``notify`` wakes it)."""
        snap = self.snapshot
        if snap.due_in is None or snap.due_in - (self.clock() - snap.taken) > 0:
            return False
        if len(self._buffer) >= self._target:
            return False
        return self._starved or self._asked

    def _take_snapshot(self) -> None:
        due, in_flight, queued = self.inner.status()
        self.snapshot = Snapshot(self.clock(), due, in_flight, queued)

    def _lease(self) -> None:
        if self._closed:
            self._leasing = False
            return
        if self._missed:  # the caller found nothing buffered while work was due
            self._missed = False
            self._target = min(self.read_ahead, self._target * 2)
        n = self._target - len(self._buffer)
        try:
            if n <= 0:
                return
            self._asked = False
            lease_with_status = getattr(self.inner, "lease_with_status", None)
            if lease_with_status is not None:
                leases, (due, in_flight, queued) = lease_with_status(n)
                self.snapshot = Snapshot(self.clock(), due, in_flight, queued)
            else:
                leases = self.inner.next_many(n)
        finally:
            self._leasing = False
        if leases:
            now = self.clock()
            with self._buffer_lock:
                self._buffer.extend((lease, now) for lease in leases)
            self._starved = False
            if self.notify is not None:
                self.notify()

    def _return_stale(self) -> None:
        """Hand back leases the caller left in the buffer ``max_wait`` seconds: its engine is
        busy (full, or its CPU parsing), and another worker may be idle. The read-ahead
        halves; the next lease waits until the caller asks again."""
        cutoff = self.clock() - self.max_wait
        stale = []
        with self._buffer_lock:
            while self._buffer and self._buffer[0][1] <= cutoff:
                stale.append(self._buffer.popleft()[0])
        if stale:
            self._target = max(1, self._target // 2)
            self._asked = False
            self.returned += len(stale)
            self.inner.release([lease.token for lease in stale])

    def _obey_operator(self) -> None:
        """An operator acted (a block, a pause: ``control_epoch`` moved) or the crawl is
        halted: the leases read ahead go back, so none of a host blocked a moment ago goes
        out and a paused crawl sends nothing; what is still allowed is leased again."""
        epoch = getattr(self.inner, "control_epoch", 0)
        if epoch != self._control_seen or self.inner.halted():
            self._control_seen = epoch
            self._release_buffer()

    def _release_buffer(self) -> None:
        with self._buffer_lock:
            unstarted = [lease.token for lease, _ in self._buffer]
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
        if old:
            self.inner.renew(old)  # buffered leases never get that old (max_wait)

    # -- the caller's side -----------------------------------------------------------------------

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        def job() -> None:
            result = self.inner.add(entry, force=force, first=first)
            if self.on_added is not None:
                self.on_added([entry], [result])

        self._submit(job)
        return AddResult(True, PENDING)

    def add_many(self, entries: Sequence[Entry]) -> list[AddResult]:
        """Queued: see :meth:`_join`."""
        batch = list(entries)
        if batch:
            self._join(links=batch)
        return [AddResult(True, PENDING)] * len(batch)

    def credit(self, links: Sequence[tuple[Any, ...]]) -> None:
        """Queued with the links (OPIC cash goes in the script call of the page's links)."""
        if links:
            self._join(credits=list(links))

    def _join(
        self,
        *,
        links: list[Entry] | None = None,
        settle: Settlement | None = None,
        credits: list[tuple[Any, ...]] | None = None,
    ) -> None:
        """Queue a page's links or a completion/acknowledgement in the open batch: what
        arrives before the worker sends it goes in one call (``Frontier.apply``: links first,
        then the completions, one pipeline per Redis node), so a busy worker makes fewer,
        fuller calls. An acknowledgement is never sent before the links queued before it:
        they are in its batch (sent first) or in an earlier one."""
        with self._batch_lock:
            batch = self._batch
            self._changes += 1
            if batch is None:
                batch = self._batch = _Batch()
                self._worker.submit(lambda: self._send(batch))
            if links is not None:
                batch.links.append(links)
            if settle is not None:
                batch.settles.append(settle)
            if credits is not None:
                batch.credits += credits

    def _send(self, batch: _Batch) -> None:
        wait = self.linger - (time.monotonic() - batch.opened)
        if wait > 0 and not self._closed:
            time.sleep(wait)  # more pages' links and acknowledgements join meanwhile
        with self._batch_lock:
            if self._batch is batch:
                self._batch = None  # nothing joins it once it is being sent
        entries = [e for links in batch.links for e in links]
        if batch.credits:
            results, rests = self.inner.apply(entries, batch.settles, batch.credits)
        else:
            results, rests = self.inner.apply(entries, batch.settles)
        if self.on_added is not None:
            at = 0
            for links in batch.links:
                self.on_added(links, results[at : at + len(links)])
                at += len(links)
        if self.on_completed is not None:
            for settlement, rest in zip(batch.settles, rests, strict=True):
                if settlement.kind != "ack":
                    self.on_completed(settlement.token, rest)

    def next(self) -> Lease | None:
        with self._buffer_lock:
            item = self._buffer.popleft() if self._buffer else None
        due = self._snapshot_due()
        if item is not None:
            lease = item[0]
            with self._open_lock:
                self._open[lease.token] = self.clock()
            self._asked = True
        else:
            lease = None
            self._starved = True
            if due == 0:
                self._missed = True
        if (
            len(self._buffer) <= self._target // 2
            and not self._leasing
            and not self._closed
            and due == 0
        ):  # else the worker's housekeeping leases when the snapshot says work is due
            self._leasing = True
            self._submit(self._lease)
        return lease

    def _snapshot_due(self) -> float | None:
        snap = self.snapshot
        if snap.due_in is None:
            return None
        return max(0.0, snap.due_in - (self.clock() - snap.taken))

    def complete(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        self._join(settle=Settlement("complete", token, duration, outcome, size))
        return None  # completes_later: the rest goes to on_completed

    def ack(self, token: str) -> None:
        with self._open_lock:
            self._open.pop(token, None)
        self._join(settle=Settlement("ack", token))

    def finish(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        with self._open_lock:
            self._open.pop(token, None)
        self._join(settle=Settlement("finish", token, duration, outcome, size))
        return None

    def renew(self, tokens: Iterable[str]) -> int:
        batch = list(tokens)
        self._submit(lambda: self.inner.renew(batch), change=False)
        return len(batch)

    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        batch = list(tokens)
        with self._open_lock:
            for token in batch:
                self._open.pop(token, None)
        self._submit(lambda: self.inner.release(batch, rest=rest))
        return len(batch)

    def expire(self) -> int:
        self._submit(lambda: self.inner.expire())
        return 0

    def due_in(self) -> float | None:
        if self._buffer:
            return 0.0
        return self._snapshot_due()

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        self._submit(lambda: self.inner.set_crawl_delay(host, seconds))
        return True

    def hold_host(self, host: str, seconds: float) -> None:
        self._submit(lambda: self.inner.hold_host(host, seconds))

    def halted(self) -> str:
        return self.inner.halted()

    def has_work(self, horizon: float) -> bool:
        if self._buffer or self._poll_more or self.halted() == "paused":
            return True
        with self._open_lock:
            if self._open:
                return True
        snap = self.snapshot
        if snap.in_flight:
            return True
        due = self.due_in()
        if due is not None and due <= horizon:
            return True
        # The snapshot can be older than the shared frontier (at start, before the first
        # refresh; or just after another worker leased a host's first request): before the
        # crawl is declared over, the shared frontier itself is asked, and until its answer
        # comes (``notify`` then) the crawl has work. While it is away, the crawl keeps
        # waiting for it; once refused, it has none. Calls still queued (links on their way)
        # are answered for: the question is queued after them, and an answer holds only
        # while nothing that may add work was queued after its question.
        if self.refused:
            return False
        if self._away_since is not None and not self._closed:
            return True
        return self._report("has_work", lambda: self.inner.has_work(horizon), True, fresh=True)

    def in_flight(self) -> int:
        with self._open_lock:
            return len(self._open)

    def __len__(self) -> int:
        return self.snapshot.queued + len(self._buffer)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far has been sent; False on timeout."""
        return self._worker.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Hand the buffered leases back, send what is queued, close the shared frontier and
        stop the worker, waiting ``timeout`` seconds at most; while the shared frontier is
        away, nothing more is tried (see :meth:`_guard`)."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        if self._unwatch is not None:
            self._unwatch()
        self._submit(self._release_buffer)  # on the worker: after any lease call under way
        self._submit(lambda: self.inner.close())  # ... and its round trips too
        if not self._worker.close(timeout):
            logger.warning("The frontier worker did not finish within %.0fs", timeout)


@dataclass
class _Batch:
    """Link batches and completions queued for one call (:meth:`BufferedFrontier._join`)."""

    links: list[list[Entry]] = field(default_factory=list)
    settles: list[Settlement] = field(default_factory=list)
    credits: list[tuple[Any, ...]] = field(default_factory=list)  # OPIC cash, sent with links
    opened: float = field(default_factory=time.monotonic)


class _FrontierThread(JobThread):
    """The worker thread (``crawler.threads``): every call on the shared frontier, guarded
    (:meth:`BufferedFrontier._guard`), then the housekeeping after each batch of them; an idle
    worker sleeps :meth:`BufferedFrontier._timeout`."""

    def __init__(self, frontier: BufferedFrontier) -> None:
        self.frontier = frontier
        super().__init__("frontier-worker", start=False)

    def _execute(self, job: Callable[[], Any]) -> None:
        self.frontier._guard(job)

    def _between_batches(self) -> None:
        self.frontier._guard(self.frontier._housekeeping)

    def _idle_wait(self) -> float:
        return self.frontier._timeout()
