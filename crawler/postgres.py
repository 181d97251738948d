"""PostgreSQL plumbing shared by the crawl database and the index (``DATABASE_URL``).

Free of Scrapy (the cores use it). Two things live here:

* :func:`connect` and :func:`safe_dsn`: a connection from ``DATABASE_URL`` and the same URL
  without its password, for messages (a password never reaches a log or a stat);
* :class:`BackgroundWriter`: one thread with its own connection that runs batches of writes,
  each batch one transaction, in the order they were handed over. A crawl hands a batch over
  and goes on at once: the reactor never waits for PostgreSQL to write, only the rare reads
  that need an answer (``flush`` first, where read-your-writes matters) do.

Several workers write one database at once, so two transactions may wait on each other's rows
(a link target both insert, an anchor count both raise). PostgreSQL then aborts one of them
with a deadlock or serialization error; the writer runs that batch again from its start
(``RETRIES`` times), which is why a batch is a replayable list of calls and not SQL already
sent.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import errors as pg_errors

from crawler.credentials import without_password

__all__ = ["BackgroundWriter", "DatabaseError", "connect", "safe_dsn"]

logger = logging.getLogger(__name__)

RETRIES = 5  # a batch aborted by a deadlock or a serialization failure is run again this often


class DatabaseError(Exception):
    """PostgreSQL cannot be reached or used; the message names it without the password."""


def safe_dsn(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``)."""
    return without_password(url)


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection to ``url``; :class:`DatabaseError` (password masked) when it fails."""
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=10)
    except psycopg.Error as exc:
        # psycopg's message may quote the DSN: say it again in our words, without the secret
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if (password := urlsplit(url).password) is not None:
            reason = reason.replace(password, "***")
        raise DatabaseError(f"cannot connect to PostgreSQL at {safe_dsn(url)}: {reason}") from None


Batch = Sequence[Callable[[psycopg.Connection[Any]], None]]
_STOP = object()


class BackgroundWriter:
    """Runs batches of write calls on its own thread and connection, one transaction each.

    ``submit`` queues a batch and returns at once; ``flush`` waits until every batch submitted
    so far is committed (or failed). ``on_reset`` is called on the writer thread before a
    batch is run again or after it failed, so the owner can drop caches of ids that the
    rolled-back transaction created. A batch that still fails after the retries is dropped,
    logged and counted in ``failed`` (the process goes on, like a killed batch would).
    """

    def __init__(
        self,
        url: str,
        name: str,
        on_reset: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.on_reset = on_reset
        self.conn = connect(url)
        self.failed = 0  # batches given up
        self.committed = 0  # batches committed
        self.last_error: str | None = None
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, batch: Batch, after: Callable[[], None] | None = None) -> None:
        """Queue ``batch``; ``after`` runs on the writer thread once it is committed or given
        up (the owner stops answering reads from its copy of what the batch wrote)."""
        if batch:
            self._queue.put((list(batch), after))

    def flush(self) -> None:
        """Wait until every batch submitted so far has been committed or given up."""
        self._queue.join()

    def close(self) -> None:
        """Write what is queued, then stop the thread and close the connection."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self.conn.close()

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is _STOP:
                    return
                calls, after = batch
                try:
                    self._write(calls)
                finally:
                    if after is not None:
                        after()
            finally:
                self._queue.task_done()

    def _write(self, batch: Batch) -> None:
        for attempt in range(RETRIES + 1):
            try:
                with self.conn.transaction():
                    for call in batch:
                        call(self.conn)
                self.committed += 1
                return
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as exc:
                if self.on_reset is not None:
                    self.on_reset()
                if attempt == RETRIES:
                    self._give_up(batch, exc)
                    return
                logger.debug("PostgreSQL batch aborted (%s); running it again", exc)
            except Exception as exc:
                if self.on_reset is not None:
                    self.on_reset()
                self._give_up(batch, exc)
                if self.conn.closed or self.conn.broken:
                    try:
                        self.conn = connect(self.url)
                    except DatabaseError as again:
                        logger.error("%s", again)
                return

    def _give_up(self, batch: Batch, exc: BaseException) -> None:
        self.failed += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        logger.error(
            "PostgreSQL write of a batch of %d operations failed, batch dropped: %s",
            len(batch),
            self.last_error,
        )
