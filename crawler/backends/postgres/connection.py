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
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import errors as pg_errors

from crawler.net.credentials import without_password
from crawler.threads.jobs import JobThread

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


class BackgroundWriter(JobThread):
    """Runs batches of write calls on its own thread and connection, one transaction each
    (:class:`~crawler.threads.jobs.JobThread`).

    ``on_reset`` is called on the writer thread before a batch is run again or after it
    failed, so the owner can drop caches of ids that the rolled-back transaction created. A
    batch that still fails after the retries is dropped, logged and counted in ``failed`` (the
    process goes on, like a killed batch would).
    """

    def __init__(
        self,
        url: str,
        name: str,
        on_reset: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.on_reset = on_reset
        self.conn: psycopg.Connection[Any] | None = None
        super().__init__(name)

    def submit(self, batch: Batch, after: Callable[[], None] | None = None) -> None:
        """Queue ``batch``; ``after`` runs on the writer thread once it is committed or given
        up (the owner stops answering reads from its copy of what the batch wrote)."""
        if batch:
            super().submit(list(batch), after)

    def _connect(self) -> None:
        self.conn = connect(self.url)

    def _disconnect(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def _execute(self, batch: Batch) -> None:
        for attempt in range(RETRIES + 1):
            conn = self.conn
            assert conn is not None
            try:
                with conn.transaction():
                    for call in batch:
                        call(conn)
                return
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as exc:
                if self.on_reset is not None:
                    self.on_reset()
                if attempt == RETRIES:
                    raise
                logger.debug("PostgreSQL batch aborted (%s); running it again", exc)
            except Exception:
                if self.on_reset is not None:
                    self.on_reset()
                if conn.closed or conn.broken:
                    try:
                        self.conn = connect(self.url)
                    except DatabaseError as again:
                        logger.error("%s", again)
                raise

    def _dropped(self, job: Any, exc: Exception) -> None:
        logger.error(
            "PostgreSQL write of a batch of %d operations failed, batch dropped: %s",
            len(job),
            self.last_error,
        )
