"""The embedded crawl database: one SQLite file (WAL), written from a thread of its own.

Recording a page used to cost the reactor a read, the JSON and zlib of the page's outlinks (a
rustdoc page has thousands) and the write: 20-80 ms on big pages, every host waiting
(``bench/realcrawl.py --spy``). Now, as in the PostgreSQL crawl database
(:mod:`crawler.backends.postgres.crawldb`): :meth:`SqliteCrawlDb.record` computes the new record
from
the stored one (a primary-key read, or the copy of a record not written yet) and queues it;
:meth:`SqliteCrawlDb.commit` (every few seconds, and every ``batch`` records
or ``batch_links`` outlinks) hands the queue to :class:`SqliteWriter`, a thread with its own
connection that packs the outlinks and writes the batch as one transaction. Point reads
(``get``, ``validators``) see the records not written yet; reads that list or count rows
(``due``, ``claim_due``, ``urls``, ``next_due``, ``len``: the start of a crawl, continuous
mode's timer) first wait for the writer. Durability is at least that of the reactor
committing every few seconds: a killed process loses the records of the last batch at most
(a batch is one transaction).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from crawler.backends.sqlite.worker_files import claim_worker_file
from crawler.crawldb.api import (
    CrawlDb,
    CrawlDbError,
    DueUrl,
    PageRecord,
    RecordResult,
    Visit,
    crawldb_path,
)
from crawler.crawldb.handover import HandedOverRecords
from crawler.crawldb.outlinks import pack_outlinks, unpack_outlinks
from crawler.crawldb.schedule import AdaptiveSchedule
from crawler.threads.jobs import JobThread

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: request_url (the URL requested, when it is not the key)
BATCH = 500  # records queued before they are handed to the writer without waiting for commit()
# outlinks queued before the same: the records waiting hold their outlinks as Python objects
# (~200 bytes a link; a rustdoc page has thousands), the database keeps them compressed
BATCH_LINKS = 10_000
_T = TypeVar("_T")

_COLUMNS = (
    "url, depth, status, fetched_at, last_modified, etag, fingerprint, fetch_count,"
    " change_count, changed_at, interval, next_fetch, priority, outlinks, request_url"
)
_REPLACE = (
    f"INSERT OR REPLACE INTO pages ({_COLUMNS})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_DUE = "url, depth, priority, next_fetch, request_url"


class SqliteWriter(JobThread):
    """The crawl database's writer thread (:class:`~crawler.threads.jobs.JobThread`) with
    its own SQLite connection (WAL: the reactor's connection reads while it writes); each job
    is a function of the connection, run in one transaction. A batch that fails (disk full, a
    broken file) is rolled back, logged and counted in ``failed``."""

    def __init__(self, path: str, name: str = "crawldb-writer") -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        try:
            super().__init__(name)
        except sqlite3.Error as exc:
            raise CrawlDbError(f"cannot open crawl database {path}: {exc}") from None

    def _connect(self) -> None:
        self._conn = sqlite3.connect(self.path, timeout=30)
        self._conn.execute("PRAGMA synchronous=NORMAL")

    def _execute(self, write: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self._conn
        assert conn is not None
        try:
            with conn:  # one transaction: committed, or rolled back on any error
                return write(conn)
        except Exception as exc:
            raise CrawlDbError(
                f"crawl database {self.path}: {type(exc).__name__}: {exc}"
            ) from exc

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _dropped(self, job: Any, exc: Exception) -> None:
        logger.error("%s; a batch of writes was dropped", exc)


class _InlineWriter:
    """:class:`SqliteWriter`'s interface for an in-memory database, which a second connection
    cannot see: every write runs at once, on the caller's connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.failed = 0

    def submit(
        self,
        write: Callable[[sqlite3.Connection], Any],
        after: Callable[[], None] | None = None,
    ) -> None:
        try:
            with self.conn:
                write(self.conn)
        finally:
            if after is not None:
                after()

    def call(self, write: Callable[[sqlite3.Connection], _T]) -> _T:
        with self.conn:
            return write(self.conn)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class SqliteCrawlDb(HandedOverRecords, CrawlDb):
    """Pages keyed by normalized URL; outlinks stored as zlib-compressed JSON (a page's links
    are only read back on a 304, so they are kept small rather than queryable). Reads run on
    the caller's thread (the reactor), writes on :class:`SqliteWriter`'s (module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        schedule: AdaptiveSchedule | None = None,
        *,
        batch: int = BATCH,
        batch_links: int = BATCH_LINKS,
    ) -> None:
        self.path = str(path)
        self.schedule = schedule or AdaptiveSchedule()
        self.batch = max(1, batch)
        self.batch_links = max(1, batch_links)
        self._pending_links = 0
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise CrawlDbError(f"cannot open crawl database {self.path}: {exc}") from None
        if version not in (0, SCHEMA_VERSION):
            raise CrawlDbError(
                f"crawl database {self.path} has schema version {version}, expected "
                f"{SCHEMA_VERSION}"
            )
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS pages (
                url TEXT PRIMARY KEY,
                depth INTEGER NOT NULL DEFAULT 0,
                status INTEGER,
                fetched_at REAL,
                last_modified TEXT,
                etag TEXT,
                fingerprint TEXT,
                fetch_count INTEGER NOT NULL DEFAULT 0,
                change_count INTEGER NOT NULL DEFAULT 0,
                changed_at REAL,
                interval REAL NOT NULL,
                next_fetch REAL NOT NULL,
                priority INTEGER NOT NULL DEFAULT 0,
                outlinks BLOB,
                request_url TEXT
            );
            CREATE INDEX IF NOT EXISTS pages_next_fetch ON pages (next_fetch);
            """
        )
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.commit()
        self._writer: SqliteWriter | _InlineWriter = (
            _InlineWriter(self._db) if self.path == ":memory:" else SqliteWriter(self.path)
        )
        self._pending: dict[str, PageRecord] = {}  # recorded, not handed to the writer yet
        self._written: dict[str, PageRecord] = {}  # handed over, maybe not committed yet
        self._lock = threading.Lock()

    @classmethod
    def from_crawler(cls, crawler: Any) -> SqliteCrawlDb:
        """``crawldb``'s constructor: the file and schedule the crawl's settings name.
        The file is this process's own
        (:func:`crawler.backends.sqlite.worker_files.claim_worker_file`): a
        second worker in the same directory writes a ``.w1`` sibling instead of waiting."""
        name = getattr(crawler.spidercls, "name", None) or "crawl"
        path = crawldb_path(crawler.settings, name) or f"crawldb-{name}.sqlite"
        return cls(claim_worker_file(path), AdaptiveSchedule.from_settings(crawler.settings))

    # -- reads ---------------------------------------------------------------------------------

    def _unwritten(self, url: str) -> PageRecord | None:
        rec = self._pending.get(url)
        if rec is None and self._written:
            with self._lock:
                rec = self._written.get(url)
        return rec

    def get(self, url: str) -> PageRecord | None:
        rec = self._unwritten(url)
        if rec is not None:
            return rec
        row = self._db.execute(f"SELECT {_COLUMNS} FROM pages WHERE url = ?", (url,)).fetchone()
        return _record(row) if row else None

    def validators(self, url: str) -> tuple[str | None, str | None]:
        rec = self._unwritten(url)
        if rec is not None:
            return (rec.etag, rec.last_modified) if rec.status is not None else (None, None)
        row = self._db.execute(
            "SELECT etag, last_modified FROM pages WHERE url = ? AND status IS NOT NULL", (url,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def urls(self) -> Iterator[str]:
        self.flush()
        cursor = self._db.execute("SELECT url FROM pages")
        while rows := cursor.fetchmany(10_000):
            for (url,) in rows:
                yield url

    def due(self, now: float, limit: int | None = None) -> list[DueUrl]:
        self.flush()
        return self._due(now, limit)

    def _due(self, now: float, limit: int | None) -> list[DueUrl]:
        sql = (
            f"SELECT {_DUE} FROM pages WHERE next_fetch <= ?"
            " ORDER BY priority DESC, next_fetch"
        )
        params: tuple[float, ...] = (now,)
        if limit is not None:
            sql += " LIMIT ?"
            params = (now, limit)
        return [DueUrl(*row) for row in self._db.execute(sql, params)]

    def claim_due(self, now: float, lease: float, limit: int) -> list[DueUrl]:
        self.flush()
        due = self._due(now, limit)
        if due:
            leased = [(now + lease, d.url) for d in due]
            # waited for: the next due() must not hand these out again
            self._writer.call(
                lambda conn: conn.executemany(
                    "UPDATE pages SET next_fetch = ? WHERE url = ?", leased
                )
            )
        return due

    def next_due(self) -> float | None:
        self.flush()
        return self._db.execute("SELECT min(next_fetch) FROM pages").fetchone()[0]

    def __len__(self) -> int:
        self.flush()
        return self._db.execute("SELECT count(*) FROM pages").fetchone()[0]

    def totals(self) -> dict[str, int]:
        """Counts for reports: pages known, fetched at least once, changed at least once."""
        self.flush()
        row = self._db.execute(
            "SELECT count(*), sum(fetch_count > 0), sum(change_count > 0) FROM pages"
        ).fetchone()
        return {"pages": row[0], "fetched": row[1] or 0, "changed": row[2] or 0}

    # -- writes --------------------------------------------------------------------------------

    def record(self, visit: Visit) -> RecordResult:
        previous = self._unwritten(visit.url)
        if previous is None:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM pages WHERE url = ?", (visit.url,)
            ).fetchone()
            # a 2xx with its outlinks replaces the stored ones: not unpacked on the reactor
            replaced = visit.outlinks is not None and 200 <= visit.status < 300
            previous = _record(row, unpack=not replaced) if row else None
        new = previous is None or previous.fetch_count == 0
        rec, changed = self.schedule.apply(previous, visit)
        self._pending[rec.url] = rec
        self._pending_links += len(visit.outlinks or ())
        if len(self._pending) >= self.batch or self._pending_links >= self.batch_links:
            self.commit()
        return RecordResult(rec, changed, new)

    def add_unfetched(self, urls: Iterable[tuple[str, int, str | None]], due: float) -> int:
        """Rare (URLs left at the end of a crawl): written at once, to count what was new."""
        self.commit()
        rows = [(url, depth, self.schedule.interval, due, sent) for url, depth, sent in urls]

        def insert(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO pages (url, depth, interval, next_fetch, request_url)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            return conn.total_changes - before

        return self._writer.call(insert) if rows else 0

    def commit(self) -> None:
        """Hand the queued records to the writer thread and return at once; the writer packs
        their outlinks and writes them in one transaction."""
        if not self._pending:
            return
        batch, self._pending = self._pending, {}
        self._pending_links = 0
        landed = self._hand_over(batch)

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany(_REPLACE, map(_row, batch.values()))

        self._writer.submit(write, after=landed)


def _row(rec: PageRecord) -> tuple[Any, ...]:
    return (
        rec.url,
        rec.depth,
        rec.status,
        rec.fetched_at,
        rec.last_modified,
        rec.etag,
        rec.fingerprint,
        rec.fetch_count,
        rec.change_count,
        rec.changed_at,
        rec.interval,
        rec.next_fetch,
        rec.priority,
        pack_outlinks(rec.outlinks),
        rec.request_url,
    )




def _record(row: tuple, unpack: bool = True) -> PageRecord:  # type: ignore[type-arg]
    *head, outlinks, request_url = row
    return PageRecord(
        *head, outlinks=unpack_outlinks(outlinks) if unpack else [], request_url=request_url
    )
