"""A thread of the crawl's own for heavy page work, so the reactor stays free for due hosts.

Parsing a page, extracting its main text and checking it for near-duplicates takes 1-3 ms on a
typical documentation page but hundreds of milliseconds on a big one (a 4 MB single-page book, a
rustdoc page of 20,000 links); on the reactor thread every host that came due waits that long
(``bench/realcrawl.py`` measured stalls of seconds). Here that work runs on one dedicated
thread:

* the reactor thread only hands the work over and takes the result back, so what it waits for
  is the GIL, which Python hands over every ``sys.getswitchinterval()`` (5 ms) at the latest,
  not the page's whole cost; libxml2's parsing releases the GIL altogether;
* one thread, not Twisted's shared pool (Scrapy's DNS resolver uses that one: a queue of big
  pages there would delay name lookups), and one thread, not several: the work is CPU-bound
  Python, so more threads add no throughput under the GIL, and a single worker keeps pages in
  the order they arrived (the first URL seen with a content stays its original);
* not a process pool: shipping a page's text and links back costs a copy per page, and the
  near-duplicate detector's state would have to live in the child.

The full-text index gets a thread of its own (:func:`index_worker`): a SQLite connection
belongs to the thread that opened it, so the index pipeline opens it there and writes only from
there. The crawl database stays on the reactor thread: the scheduler and the conditional-GET
middleware read it synchronously.

Threads add no CPU: ``bench/realcrawl.py`` measures CPU per page and the longest stall with and
without (``CONTENT_THREAD``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from scrapy import signals
from scrapy.crawler import Crawler
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from crawler import defaults

__all__ = ["ContentWorker", "content_worker", "index_worker"]

_T = TypeVar("_T")


class ContentWorker:
    """One worker thread; :meth:`run` calls a function there and fires a Deferred with its
    result on the reactor thread."""

    def __init__(self, name: str = "content") -> None:
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name=f"crawler-{name}")
        self._pool.start()

    def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> Deferred[_T]:
        # imported here: importing the reactor at module level would install Twisted's default
        # one before Scrapy installs the asyncio reactor
        from twisted.internet import reactor

        return deferToThreadPool(reactor, self._pool, fn, *args, **kwargs)

    def stop(self) -> None:
        """Finish the queued work and end the thread."""
        self._pool.stop()


def content_worker(crawler: Crawler | None) -> ContentWorker | None:
    """The crawl's content worker (parsing, main text, near-duplicates), started on first use
    and stopped when the engine stops; ``None`` with ``CONTENT_THREAD`` off or outside a running
    crawl (a test calling a spider or pipeline directly gets the plain synchronous path)."""
    return _worker(crawler, "content")


def index_worker(crawler: Crawler | None) -> ContentWorker | None:
    """The index writer's thread (the index pipeline opens its SQLite connection there and
    makes every write from it): FTS5 tokenizes a page's text in C with the GIL released, so it
    even overlaps the content thread's Python. Same rules as :func:`content_worker`."""
    return _worker(crawler, "index")


def _worker(crawler: Crawler | None, name: str) -> ContentWorker | None:
    if crawler is None or not getattr(crawler, "crawling", False):
        return None
    workers: dict[str, ContentWorker] | None = getattr(crawler, "_crawler_workers", None)
    if workers is None:
        if not crawler.settings.getbool("CONTENT_THREAD", defaults.CONTENT_THREAD):
            return None
        workers = crawler._crawler_workers = {}  # type: ignore[attr-defined]
        interval = crawler.settings.getfloat(
            "CONTENT_THREAD_SWITCH_INTERVAL", defaults.CONTENT_THREAD_SWITCH_INTERVAL
        )
        if interval > 0:
            sys.setswitchinterval(interval)

        def stopped() -> None:
            for worker in workers.values():
                worker.stop()
            workers.clear()

        crawler.signals.connect(stopped, signals.engine_stopped, weak=False)
    worker = workers.get(name)
    if worker is None:
        worker = workers[name] = ContentWorker(name)
    return worker
