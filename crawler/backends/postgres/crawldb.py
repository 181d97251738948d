"""The shared crawl database: PostgreSQL, for several workers of one crawl (``DATABASE_URL``).

One table for every crawl of the database, keyed by (crawl, URL), where the crawl is the site
name: ``crawldb-<site>.sqlite`` becomes the rows of ``crawl = <site>``. Every worker of a crawl
reads and writes the same rows, so the due/known test at the start of a crawl and
``mark_seen`` see what every worker learnt, and one worker's knowledge never hides another's
due page; :meth:`PostgresCrawlDb.claim_due` hands each due URL to one worker only
(``FOR UPDATE SKIP LOCKED``).

Writes never stall the reactor: :meth:`record` computes the new record from the stored one
(a read, or the copy of a record not yet written) and queues it; :meth:`commit` hands the
queue to a :class:`crawler.backends.postgres.connection.BackgroundWriter` (its own thread and
connection, one
transaction per batch), also every ``batch`` records. Reads that list or count rows
(``due``, ``claim_due``, ``urls``, ``next_due``, ``len``: the start of a crawl, continuous
mode's timer) first wait for the writer, so they see this worker's own records.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg

from crawler.backends.postgres.connection import BackgroundWriter, DatabaseError, connect, safe_dsn
from crawler.config import defaults
from crawler.crawldb.api import CrawlDb, CrawlDbError, DueUrl, PageRecord, RecordResult, Visit
from crawler.crawldb.handover import HandedOverRecords
from crawler.crawldb.outlinks import pack_outlinks, unpack_outlinks
from crawler.crawldb.schedule import AdaptiveSchedule

__all__ = ["PostgresCrawlDb", "partition_count", "schema"]

SCHEMA_VERSION = 2  # 2: request_url (the URL requested, when it is not the key)
BATCH = 500  # records queued before they are handed to the writer without waiting for commit()
_LOCK = 0x63726462  # advisory lock held while a worker creates the schema ("crdb")
_COLUMNS = (
    "url, depth, status, fetched_at, last_modified, etag, fingerprint, fetch_count,"
    " change_count, changed_at, interval, next_fetch, priority, outlinks, request_url"
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS crawldb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS crawldb (
    crawl TEXT NOT NULL,
    url TEXT NOT NULL,
    depth INTEGER NOT NULL DEFAULT 0,
    status INTEGER,
    fetched_at DOUBLE PRECISION,
    last_modified TEXT,
    etag TEXT,
    fingerprint TEXT,
    fetch_count INTEGER NOT NULL DEFAULT 0,
    change_count INTEGER NOT NULL DEFAULT 0,
    changed_at DOUBLE PRECISION,
    interval DOUBLE PRECISION NOT NULL,
    next_fetch DOUBLE PRECISION NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    outlinks BYTEA,
    request_url TEXT,
    PRIMARY KEY (crawl, url)
){partitioned};{partitions}
CREATE INDEX IF NOT EXISTS crawldb_due ON crawldb (crawl, next_fetch);
"""


def schema(partitions: int = 0) -> str:
    """The tables; with ``partitions`` > 0 (``DATABASE_PARTITIONS``) the page table is split
    into that many hash partitions of the URL (``crawldb_p<i>``), so a billion-row crawl is
    spread over tables that vacuum, index and move one at a time. PostgreSQL wants the
    partition key inside the primary key (crawl, url): the URL's hash, not the host's (that
    would need a host column). Applies when the table is created; a stored one keeps its
    shape (:func:`partition_count` reads it)."""
    if partitions <= 0:
        return _SCHEMA.format(partitioned="", partitions="")
    return _SCHEMA.format(
        partitioned=" PARTITION BY HASH (url)",
        partitions="".join(
            f"\nCREATE TABLE IF NOT EXISTS crawldb_p{i} PARTITION OF crawldb"
            f" FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i});"
            for i in range(partitions)
        ),
    )


def partition_count(conn: psycopg.Connection[Any], table: str) -> int:
    """How many partitions ``table`` has (0: a plain table, or none)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_inherits i JOIN pg_partitioned_table p"
        " ON p.partrelid = i.inhparent WHERE i.inhparent = to_regclass(%s)",
        (table,),
    ).fetchone()
    return int(row[0]) if row else 0
_UPSERT = f"""
INSERT INTO crawldb (crawl, {_COLUMNS})
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (crawl, url) DO UPDATE SET
    depth = excluded.depth, status = excluded.status, fetched_at = excluded.fetched_at,
    last_modified = excluded.last_modified, etag = excluded.etag,
    fingerprint = excluded.fingerprint, fetch_count = excluded.fetch_count,
    change_count = excluded.change_count, changed_at = excluded.changed_at,
    interval = excluded.interval, next_fetch = excluded.next_fetch,
    priority = excluded.priority, outlinks = excluded.outlinks,
    request_url = excluded.request_url
"""


class PostgresCrawlDb(HandedOverRecords, CrawlDb):
    """``crawldb`` when ``DATABASE_URL`` is a ``postgresql://`` URL."""

    def __init__(
        self,
        url: str,
        crawl: str,
        schedule: AdaptiveSchedule | None = None,
        *,
        batch: int = BATCH,
        partitions: int = 0,
    ) -> None:
        """``partitions``: hash partitions of the page table when this worker creates it
        (``DATABASE_PARTITIONS``; see :func:`schema`)."""
        self.url = url
        self.crawl = crawl
        self.path = f"{safe_dsn(url)} (crawl {crawl!r})"  # what logs say the database is
        self.schedule = schedule or AdaptiveSchedule()
        self.batch = max(1, batch)
        self.partitions = partitions
        try:
            self._db = connect(url, autocommit=True)
            self._create_schema()
            self._writer = BackgroundWriter(url, "crawldb-writer")
        except DatabaseError as exc:
            raise CrawlDbError(str(exc)) from None
        self._pending: dict[str, PageRecord] = {}  # recorded, not handed to the writer yet
        self._written: dict[str, PageRecord] = {}  # handed over, maybe not committed yet
        self._lock = threading.Lock()

    @classmethod
    def from_crawler(cls, crawler: Any) -> PostgresCrawlDb:
        """The crawl database of the crawl's site in ``DATABASE_URL``."""
        name = getattr(crawler.spidercls, "name", None) or "crawl"
        return cls(
            crawler.settings.get("DATABASE_URL") or "",
            name,
            AdaptiveSchedule.from_settings(crawler.settings),
            partitions=crawler.settings.getint(
                "DATABASE_PARTITIONS", defaults.DATABASE_PARTITIONS
            ),
        )

    def _create_schema(self) -> None:
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            for statement in filter(str.strip, schema(self.partitions).split(";")):
                self._db.execute(statement)
            self._db.execute(
                "INSERT INTO crawldb_meta(key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
            row = self._db.execute(
                "SELECT value FROM crawldb_meta WHERE key = 'schema_version'"
            ).fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise CrawlDbError(
                f"crawl database {self.path} has schema version {row and row[0]}, expected "
                f"{SCHEMA_VERSION}"
            )

    # -- reads ---------------------------------------------------------------------------------

    def _unwritten(self, url: str) -> PageRecord | None:
        rec = self._pending.get(url)
        if rec is None:
            with self._lock:
                rec = self._written.get(url)
        return rec

    def get(self, url: str) -> PageRecord | None:
        rec = self._unwritten(url)
        if rec is not None:
            return rec
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM crawldb WHERE crawl = %s AND url = %s", (self.crawl, url)
        ).fetchone()
        if row is None:
            return None
        *head, outlinks, request_url = row
        return PageRecord(*head, outlinks=unpack_outlinks(outlinks), request_url=request_url)

    def validators(self, url: str) -> tuple[str | None, str | None]:
        rec = self._unwritten(url)
        if rec is not None:
            return (rec.etag, rec.last_modified) if rec.status is not None else (None, None)
        row = self._db.execute(
            "SELECT etag, last_modified FROM crawldb WHERE crawl = %s AND url = %s"
            " AND status IS NOT NULL",
            (self.crawl, url),
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def urls(self) -> Iterator[str]:
        self.flush()
        last = ""
        while True:  # keyset pages: no cursor held open across the caller's work
            rows = self._db.execute(
                "SELECT url FROM crawldb WHERE crawl = %s AND url > %s ORDER BY url LIMIT 10000",
                (self.crawl, last),
            ).fetchall()
            if not rows:
                return
            for (url,) in rows:
                yield url
            last = rows[-1][0]

    def due(self, now: float, limit: int | None = None) -> list[DueUrl]:
        self.flush()
        rows = self._db.execute(
            "SELECT url, depth, priority, next_fetch, request_url FROM crawldb"
            " WHERE crawl = %s AND next_fetch <= %s ORDER BY priority DESC, next_fetch, url"
            " LIMIT %s",
            (self.crawl, now, limit),
        )
        return [DueUrl(*row) for row in rows]

    def claim_due(self, now: float, lease: float, limit: int) -> list[DueUrl]:
        """One statement: rows another worker is claiming at the same moment are skipped, so
        each due URL goes to one worker."""
        self.flush()
        rows = self._db.execute(
            """
            WITH due AS (
                SELECT url FROM crawldb WHERE crawl = %(crawl)s AND next_fetch <= %(now)s
                ORDER BY priority DESC, next_fetch, url LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED
            ),
            claimed AS (
                SELECT c.url, c.depth, c.priority, c.next_fetch, c.request_url FROM crawldb c
                JOIN due USING (url) WHERE c.crawl = %(crawl)s
            ),
            pushed AS (
                UPDATE crawldb c SET next_fetch = %(until)s FROM due
                WHERE c.crawl = %(crawl)s AND c.url = due.url
            )
            SELECT url, depth, priority, next_fetch, request_url FROM claimed
            ORDER BY priority DESC, next_fetch, url
            """,
            {"crawl": self.crawl, "now": now, "limit": limit, "until": now + lease},
        )
        return [DueUrl(*row) for row in rows]

    def next_due(self) -> float | None:
        self.flush()
        row = self._db.execute(
            "SELECT min(next_fetch) FROM crawldb WHERE crawl = %s", (self.crawl,)
        ).fetchone()
        return row[0] if row else None

    def __len__(self) -> int:
        self.flush()
        row = self._db.execute(
            "SELECT count(*) FROM crawldb WHERE crawl = %s", (self.crawl,)
        ).fetchone()
        return int(row[0]) if row else 0

    def totals(self) -> dict[str, int]:
        """Counts for reports: pages known, fetched at least once, changed at least once."""
        self.flush()
        row = self._db.execute(
            "SELECT count(*), count(*) FILTER (WHERE fetch_count > 0),"
            " count(*) FILTER (WHERE change_count > 0) FROM crawldb WHERE crawl = %s",
            (self.crawl,),
        ).fetchone()
        assert row is not None
        return {"pages": row[0], "fetched": row[1], "changed": row[2]}

    # -- writes --------------------------------------------------------------------------------

    def record(self, visit: Visit) -> RecordResult:
        previous = self.get(visit.url)
        new = previous is None or previous.fetch_count == 0
        rec, changed = self.schedule.apply(previous, visit)
        self._pending[rec.url] = rec
        if len(self._pending) >= self.batch:
            self.commit()
        return RecordResult(rec, changed, new)

    def add_unfetched(self, urls: Iterable[tuple[str, int, str | None]], due: float) -> int:
        """Rare (URLs left at the end of a crawl): written at once, to count what was new."""
        self.flush()
        rows = [
            (self.crawl, url, depth, self.schedule.interval, due, sent)
            for url, depth, sent in urls
        ]
        if not rows:
            return 0
        added = 0
        with self._db.transaction(), self._db.cursor() as cur:
            for row in rows:
                cur.execute(
                    "INSERT INTO crawldb (crawl, url, depth, interval, next_fetch, request_url)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (crawl, url) DO NOTHING",
                    row,
                )
                added += cur.rowcount
        return added

    def commit(self) -> None:
        """Hand the queued records to the writer thread and return at once."""
        if not self._pending:
            return
        batch, self._pending = self._pending, {}
        landed = self._hand_over(batch)

        def write(conn: psycopg.Connection[Any]) -> None:
            # packed here, on the writer thread: JSON + zlib of thousands of outlinks
            rows = [
                (self.crawl, r.url, r.depth, r.status, r.fetched_at, r.last_modified, r.etag,
                 r.fingerprint, r.fetch_count, r.change_count, r.changed_at, r.interval,
                 r.next_fetch, r.priority, pack_outlinks(r.outlinks), r.request_url)
                for r in batch.values()
            ]
            with conn.cursor() as cur:
                cur.executemany(_UPSERT, rows)

        self._writer.submit([write], after=landed)
