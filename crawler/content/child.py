"""The loop of the crawl's parse processes (``crawler.offload.components.ParseProcess``): run as
``python -m crawler.content.child FD [MEMORY CPU]``, it answers calls over the connection on file
descriptor FD, one at a time, until the crawl closes it.

With limits (the document child): the process's address space is capped at MEMORY bytes (an
allocation past it fails: ``MemoryError`` in Python, a crash in a C library), and each call
may use CPU SECONDS (``RLIMIT_CPU`` moved forward before every call: the kernel ends the
process with ``SIGXCPU`` when a call goes past it). The crawl reads either as the call's
verdict and starts a fresh child for the next one.

A module of its own, free of Scrapy and Twisted, so the child imports only what it runs (lxml
and the content code: ~0.1 s, not the ~0.5 s and ~40 MB of the crawl's imports).
"""

from __future__ import annotations

import math
import resource
import signal
import sys
from multiprocessing.connection import Connection


class ChildFailed(Exception):
    """A call the child could not answer: ``reason`` is ``cpu_time`` (past its CPU limit, or
    no answer in time) or ``parser_lost`` (the child died: a crash, or memory exhausted in C
    code). Raised by ``ParseProcess.call`` in the crawl, never in the child."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def serve(conn: Connection, cpu_seconds: int = 0) -> None:
    """Answer ``(fn, args, kwargs)`` with ``(True, result)`` or ``(False, exception)``."""
    while True:
        try:
            fn, args, kwargs = conn.recv()
        except (EOFError, OSError):  # the crawl closed the connection, or is gone
            return
        if cpu_seconds:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            used = math.ceil(usage.ru_utime + usage.ru_stime)
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            resource.setrlimit(resource.RLIMIT_CPU, (used + cpu_seconds, hard))
        try:
            answer = (True, fn(*args, **kwargs))
        except Exception as exc:  # the caller's to handle, as if the call had been local
            answer = (False, exc)
        conn.send(answer)


def limit_memory(max_bytes: int) -> None:
    """Cap the address space (the soft limit: a call may not raise it back)."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, hard))


if __name__ == "__main__":
    # The child runs in a session of its own (no Ctrl-C from the terminal); should one arrive
    # anyway, the crawl decides when its child stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    memory, cpu = (int(a) for a in sys.argv[2:4]) if len(sys.argv) >= 4 else (0, 0)
    if memory or cpu:
        # a child ended by its limits dumps no core: 1 GiB written out per hostile file
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory:
        limit_memory(memory)
    serve(Connection(int(sys.argv[1])), cpu)
