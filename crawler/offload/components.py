"""A thread of the crawl's own for heavy page work, so the reactor stays free for due hosts.

Parsing a page, extracting its main text and checking it for near-duplicates takes 1-3 ms on a
typical documentation page but hundreds of milliseconds on a big one (a 4 MB single-page book, a
rustdoc page of 20,000 links); on the reactor thread every host that came due waits that long
(``bench/realcrawl.py`` measured stalls of seconds). Here that work runs on one dedicated
thread:

* the reactor thread only hands the work over and takes the result back, so what it waits for
  is the GIL, which Python hands over every ``sys.getswitchinterval()`` (5 ms) at the latest,
  not the page's whole cost; libxml2's parsing releases the GIL altogether;
* one thread of the crawl's own (:class:`crawler.threads.jobs.JobThread`), not Twisted's
  shared pool (Scrapy's DNS resolver uses that one: a queue of big pages there would delay
  name lookups), and one thread, not several: the work is CPU-bound Python, so more threads
  add no throughput under the GIL, and a single worker keeps pages in the order they arrived
  (the first URL seen with a content stays its original);
* not a process pool for every page: shipping a small page's text and links back costs about
  what parsing it does, and the near-duplicate detector's state would have to live in the
  child.

A thread still shares the GIL: a big page's parse is a few long C calls that hold it for tens of
milliseconds each (libxml2 building the tree, XSLT text, regular expressions over megabytes),
and its hundreds of thousands of objects set off garbage collections. So pages of at least
``process_min_bytes`` (a ``TUNING`` knob) are parsed in a child process (:class:`ParseProcess`),
called from the content thread, which waits without the GIL; what comes back is already cut to
what the crawl keeps (:func:`crawler.content.html.parse_page`). The near-duplicate check stays
here, on the content thread, with the detector.

The full-text index gets a thread of its own (:func:`index_worker`): a SQLite connection
belongs to the thread that opened it, so the index pipeline opens it there and writes only from
there. The crawl database is read on the reactor thread (the scheduler and the conditional-GET
middleware read it synchronously) and written from a thread of its own
(:class:`crawler.backends.sqlite.crawldb.SqliteWriter`).

Threads add no CPU: ``bench/realcrawl.py`` measures CPU per page and the longest stall with and
without (``content_thread``).

The threads and the parse process belong to one component, :class:`OffloadWorkers` (an
extension in the project's ``EXTENSIONS``): it starts each on first use and closes them all when
the engine stops. Components reach them through :func:`content_worker`, :func:`index_worker`,
:func:`feed_worker` and :func:`parse_process`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from scrapy import signals
from scrapy.crawler import Crawler
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from crawler.config.typed import FeatureConfig, knob
from crawler.content.child import ChildFailed
from crawler.content.documents import CHILD_CPU_SECONDS, CHILD_MEMORY
from crawler.threads.jobs import JobThread

__all__ = [
    "ContentWorker",
    "OffloadWorkers",
    "ParseProcess",
    "content_worker",
    "document_process",
    "feed_worker",
    "index_worker",
    "parse_process",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: With the content threads busy, the reactor thread waits for the GIL after every system call
#: (select, send, recv, SQLite): up to ``sys.getswitchinterval()`` each time, Python's default
#: 5 ms. 1 ms (process-wide, set when the threads start) cuts that convoy (bench/realcrawl.py).
SWITCH_INTERVAL = 0.001


class OffloadConfig(FeatureConfig):
    """Which work leaves the reactor: the content thread, the index's thread, the parse
    process's threshold (``TUNING`` knobs, measured with bench/realcrawl.py)."""

    content_thread: bool = knob("content_thread")
    index_thread: str = knob("index_thread")
    process_min_bytes: int = knob("process_min_bytes")


class ContentWorker(JobThread):
    """One worker thread (:class:`~crawler.threads.jobs.JobThread`); :meth:`run` calls a
    function there and fires a Deferred with its result on the reactor thread."""

    def __init__(self, name: str = "content") -> None:
        # the pages queued behind one another finish together: their links and acknowledgements
        # go to the frontier in one call, not one a page
        self.answers_together = name == "content"
        super().__init__(f"crawler-{name}")

    def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> Deferred[_T]:
        # imported here: importing the reactor at module level would install Twisted's default
        # one before Scrapy installs the asyncio reactor
        from twisted.internet import reactor

        d: Deferred[_T] = Deferred()

        def answered(future: Future[_T]) -> None:  # on the worker thread
            exc = future.exception()
            if exc is None:
                reactor.callFromThread(d.callback, future.result())  # type: ignore[attr-defined]
            else:
                reactor.callFromThread(d.errback, Failure(exc))  # type: ignore[attr-defined]

        self.future(lambda: fn(*args, **kwargs)).add_done_callback(answered)
        return d


class OffloadWorkers:
    """The crawl's threads for heavy page work and its parse process: each started on first use
    (a crawl that never needs one never starts it), all closed when the engine stops (the
    queued work done first, the child reaped). With ``content_thread`` off there is none:
    the work runs on the reactor thread."""

    def __init__(self, settings: Any) -> None:
        tuned = OffloadConfig.from_settings(settings)
        self.enabled = tuned.content_thread
        self.switch_interval = SWITCH_INTERVAL
        self.index_thread = tuned.index_thread or "content"
        self.process_min_bytes = tuned.process_min_bytes
        self._workers: dict[str, ContentWorker] = {}
        self._process: ParseProcess | None = None
        self._documents: ParseProcess | None = None
        self._closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OffloadWorkers:
        workers = cls(crawler.settings)
        crawler.signals.connect(workers.close, signals.engine_stopped)
        return workers

    def worker(self, name: str) -> ContentWorker | None:
        """The thread called ``name``, started now if it is the first call; None when
        ``content_thread`` is off or the workers are closed."""
        if not self.enabled or self._closed:
            return None
        worker = self._workers.get(name)
        if worker is None:
            if not self._workers and self.switch_interval > 0:
                sys.setswitchinterval(self.switch_interval)
            worker = self._workers[name] = ContentWorker(name)
        return worker

    def parse_process(self) -> ParseProcess | None:
        """The parse process (started with the first big page); None with
        ``process_min_bytes`` 0 or without a content thread (the reactor would wait
        for the child)."""
        if self.process_min_bytes <= 0 or self.worker("content") is None:
            return None
        if self._process is None:
            self._process = ParseProcess(self.process_min_bytes)
        return self._process

    def document_process(self) -> ParseProcess | None:
        """The document child (started with the first document): every PDF, DOCX and ODT is
        read there, under its memory and per-document CPU limits, never made again in this
        process (``crawler.content.documents``). Even with ``content_thread`` off: the reactor
        then waits for the child, but a hostile file cannot take the crawl down."""
        if self._closed:
            return None
        if self._documents is None:
            self._documents = ParseProcess(
                0,
                timeout=3.0 * CHILD_CPU_SECONDS,  # wall time: a loaded machine, a blocked child
                memory_limit=CHILD_MEMORY,
                cpu_seconds=CHILD_CPU_SECONDS,
                fallback=False,
                stats="documents/process",  # documents/process_calls, _restarts
            )
        return self._documents

    def close(self) -> None:
        """Finish the queued work, end the threads, stop and reap the parse processes."""
        self._closed = True
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()
        for process in (self._process, self._documents):
            if process is not None:
                process.stop()


def _workers(crawler: Crawler | None) -> OffloadWorkers | None:
    """The crawl's :class:`OffloadWorkers`, or None outside a running crawl (a test calling a
    spider or pipeline directly gets the plain synchronous path) or in a project whose
    ``EXTENSIONS`` lacks it."""
    if crawler is None or not getattr(crawler, "crawling", False):
        return None
    try:
        return crawler.get_extension(OffloadWorkers)
    except RuntimeError:  # the extensions are not built yet
        return None


def content_worker(crawler: Crawler | None) -> ContentWorker | None:
    """The crawl's content worker (parsing, main text, near-duplicates); ``None`` with
    ``content_thread`` off or outside a running crawl (:func:`_workers`)."""
    workers = _workers(crawler)
    return workers.worker("content") if workers is not None else None


def index_worker(crawler: Crawler | None) -> ContentWorker | None:
    """The index writer's thread (the index pipeline opens its SQLite connection there and
    makes every write from it), named by ``TUNING``'s ``index_thread``: by default the content
    thread itself. A thread of its own overlaps FTS5's tokenizing (C, GIL released) with the content
    thread's Python, but then the reactor competes with two Python threads for the GIL: its
    longest stalls were twice as long and the crawl used more CPU. Same rules as
    :func:`content_worker`."""
    workers = _workers(crawler)
    return workers.worker(workers.index_thread) if workers is not None else None


def feed_worker(crawler: Crawler | None) -> ContentWorker | None:
    """The thread that makes big items' feed bytes (:mod:`crawler.pipelines.feed`): JSON
    encoding in short pieces, so it hands the GIL back often. Same rules as
    :func:`content_worker`."""
    workers = _workers(crawler)
    return workers.worker("feed") if workers is not None else None


class ParseProcess:
    """A child process of the crawl's own that runs a function for the content thread: the
    parsing of big pages (``process_min_bytes``), see the module docstring.

    :meth:`call` blocks its caller (the content thread, which holds no GIL while it waits) until
    the child answers. A child that dies (killed, crashed) or does not answer within
    ``timeout`` seconds is killed and reaped, and the call made again in a fresh one; if that
    one fails too, the call is made in this process: no page is lost, the crawl never hangs.
    After three such calls the child is given up for the crawl (a warning says so).
    The child is a fresh interpreter (``python -m crawler.content.child``), not a fork (the
    crawl process has threads, and a fork copies their locks in whatever state they are) nor
    multiprocessing's spawn (which imports the crawl's main module again in the child).
    """

    def __init__(
        self,
        min_bytes: int,
        timeout: float = 120.0,
        *,
        memory_limit: int = 0,
        cpu_seconds: int = 0,
        fallback: bool = True,
        stats: str = "content/process",
    ) -> None:
        self.min_bytes = min_bytes
        self.stats = stats  # the prefix of the counts news() reports
        self.timeout = timeout
        self.memory_limit = memory_limit  # the child's address space (0: none)
        self.cpu_seconds = cpu_seconds  # CPU time of one call in the child (0: no limit)
        # False: a call the child fails is not made again, nor here (a hostile document would
        # fail again, and here it could take the crawl down): ChildFailed says why
        self.fallback = fallback
        self.restarts = 0  # children lost (died or hung) and replaced
        self.inline = 0  # calls made in this process after a fresh child failed too
        self.calls = 0
        self._told = (0, 0, 0)  # the counts :meth:`news` last reported
        self._child: subprocess.Popen[bytes] | None = None
        self._closed = False  # stopped for good: calls are made in this process
        self._conn: Connection | None = None

    def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)`` in the child (``fn`` and its arguments pickled: a function of
        a module the child can import); an exception ``fn`` raises is raised here."""
        self.calls += 1
        if not self.fallback:
            return self._call_once(fn, args, kwargs)
        if self._closed:
            return fn(*args, **kwargs)
        for _ in range(2):
            try:
                ok, value = self._ask((fn, args, kwargs))
            except _ChildLost:
                self._end(kill=True)
                self.restarts += 1
                continue
            if ok:
                return value  # type: ignore[no-any-return]
            raise value
        self.inline += 1
        if self.inline >= _GIVE_UP:
            # a child that cannot start (an import fails, no processes left) would cost two
            # process starts per big page for the rest of the crawl
            self._closed = True
            logger.warning(
                "The parse process was lost %d times (content/process_restarts); big pages are "
                "parsed on the content thread for the rest of the crawl", self.restarts,
            )
        return fn(*args, **kwargs)

    def _call_once(self, fn: Callable[..., _T], args: Any, kwargs: Any) -> _T:
        """One try in the child; a child that dies or overruns is replaced for the next call."""
        if self._closed:
            raise ChildFailed("parser_lost")
        try:
            ok, value = self._ask((fn, args, kwargs))
        except _ChildLost as lost:
            reason = "cpu_time" if lost.timeout else self._death()
            self._end(kill=True)
            self.restarts += 1
            raise ChildFailed(reason) from None
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def _death(self) -> str:
        """Why the child died: past its CPU limit (``SIGXCPU``), out of memory (it had
        grown to half its address-space limit: a C library that cannot allocate crashes
        instead of raising), or else lost."""
        child = self._child
        if child is None:
            return "parser_lost"
        deadline = time.monotonic() + 5.0  # the connection's end came first: it is exiting
        with contextlib.suppress(ChildProcessError, OSError):
            while time.monotonic() < deadline:
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)  # for its peak memory
                if pid == 0:
                    time.sleep(0.01)
                    continue
                child.returncode = os.waitstatus_to_exitcode(status)  # reaped here
                if child.returncode == -signal.SIGXCPU:
                    return "cpu_time"
                if self.memory_limit and usage.ru_maxrss * 1024 >= self.memory_limit // 2:
                    return "memory"
                break
        return "parser_lost"

    def news(self) -> dict[str, int]:
        """The counts since the last call, as stats (``content/process_calls``, ``_restarts``,
        ``_inline``), for the caller to hand to the reactor thread with its page."""
        now = (self.calls, self.restarts, self.inline)
        news = {
            f"{self.stats}_{name}": n - before
            for name, n, before in zip(("calls", "restarts", "inline"), now, self._told,
                                       strict=True)
            if n != before
        }
        self._told = now
        return news

    def _ask(self, message: tuple[Any, ...]) -> tuple[bool, Any]:
        if self._child is None:
            self._start()
        conn = self._conn
        assert conn is not None
        try:
            conn.send(message)
            if not conn.poll(self.timeout):
                raise _ChildLost(timeout=True)
            answer: tuple[bool, Any] = conn.recv()
        except (EOFError, OSError) as exc:
            raise _ChildLost from exc
        return answer

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.curdir for p in sys.path))
        limits = [str(self.memory_limit), str(self.cpu_seconds)]
        if not (self.memory_limit or self.cpu_seconds):
            limits = []
        with theirs:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "crawler.content.child", str(theirs.fileno()), *limits],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,  # Ctrl-C is the crawl's to handle
            )
        self._conn = Connection(ours.detach())

    def stop(self) -> None:
        """End the child and reap it (its CPU then counts in the crawl process's own); a call
        after this is made in this process."""
        self._closed = True
        self._end()

    def _end(self, kill: bool = False) -> None:
        child, conn = self._child, self._conn
        self._child = self._conn = None
        if child is None or conn is None:
            return
        if kill:
            child.kill()
        conn.close()  # a live child reads the end of its connection and exits
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


_GIVE_UP = 3  # calls that two children in a row failed, before the child is given up


class _ChildLost(Exception):
    """The child died or did not answer in time."""

    def __init__(self, timeout: bool = False) -> None:
        super().__init__("no answer in time" if timeout else "the child died")
        self.timeout = timeout


def document_process(crawler: Crawler | None) -> ParseProcess | None:
    """The crawl's document child (:meth:`OffloadWorkers.document_process`); ``None`` outside
    a crawl (the document is then read in this process)."""
    workers = _workers(crawler)
    return workers.document_process() if workers is not None else None


def parse_process(crawler: Crawler | None) -> ParseProcess | None:
    """The crawl's parse process, for pages of at least ``process_min_bytes`` (started
    with the first such page, stopped and reaped when the engine stops); ``None`` with it 0,
    with ``content_thread`` off (the reactor would wait for the child) or outside a crawl."""
    workers = _workers(crawler)
    return workers.parse_process() if workers is not None else None
