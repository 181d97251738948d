"""The loop of the crawl's parse process (``crawler.offload.components.ParseProcess``): run as
``python -m crawler.content.child FD``, it answers calls over the connection on file
descriptor FD, one at a time, until the crawl closes it.

A module of its own, free of Scrapy and Twisted, so the child imports only what it runs (lxml
and the content code: ~0.1 s, not the ~0.5 s and ~40 MB of the crawl's imports).
"""

from __future__ import annotations

import signal
import sys
from multiprocessing.connection import Connection


def serve(conn: Connection) -> None:
    """Answer ``(fn, args, kwargs)`` with ``(True, result)`` or ``(False, exception)``."""
    while True:
        try:
            fn, args, kwargs = conn.recv()
        except (EOFError, OSError):  # the crawl closed the connection, or is gone
            return
        try:
            answer = (True, fn(*args, **kwargs))
        except Exception as exc:  # the caller's to handle, as if the call had been local
            answer = (False, exc)
        conn.send(answer)


if __name__ == "__main__":
    # The child runs in a session of its own (no Ctrl-C from the terminal); should one arrive
    # anyway, the crawl decides when its child stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(Connection(int(sys.argv[1])))
