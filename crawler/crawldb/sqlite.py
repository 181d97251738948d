"""The embedded crawl database: one SQLite file (WAL), writes batched until :meth:`commit`."""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from crawler import defaults
from crawler.worker_files import claim_worker_file

from .api import CrawlDb, DueUrl, Outlink, PageRecord, RecordResult, Visit
from .schedule import AdaptiveSchedule

SCHEMA_VERSION = 1

_COLUMNS = (
    "url, depth, status, fetched_at, last_modified, etag, fingerprint, fetch_count,"
    " change_count, changed_at, interval, next_fetch, priority, outlinks"
)


def crawldb_enabled(settings: Any) -> bool:
    """A crawl keeps a crawl database when given a path or asked to recrawl."""
    return bool(settings.get("CRAWLDB_PATH")) or (
        settings.getfloat("RECRAWL_INTERVAL", defaults.RECRAWL_INTERVAL) > 0
        or settings.getbool("RECRAWL_CONTINUOUS", defaults.RECRAWL_CONTINUOUS)
    )


def crawldb_path(settings: Any, spider_name: str) -> str | None:
    """The crawl database file of a crawl (``%(name)s`` in ``CRAWLDB_PATH`` is the site name;
    default: ``JOBDIR/crawldb.sqlite``, else ``crawldb-<site>.sqlite``), or None when the crawl
    keeps none."""
    if not crawldb_enabled(settings):
        return None
    path = settings.get("CRAWLDB_PATH")
    if not path:
        jobdir = settings.get("JOBDIR")
        path = os.path.join(jobdir, "crawldb.sqlite") if jobdir else f"crawldb-{spider_name}.sqlite"
    return str(path).replace("%(name)s", spider_name)


class CrawlDbError(Exception):
    pass


class SqliteCrawlDb(CrawlDb):
    """Pages keyed by normalized URL; outlinks stored as zlib-compressed JSON (a page's links
    are only read back on a 304, so they are kept small rather than queryable)."""

    def __init__(
        self, path: str | os.PathLike[str], schedule: AdaptiveSchedule | None = None
    ) -> None:
        self.path = str(path)
        self.schedule = schedule or AdaptiveSchedule()
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
                outlinks BLOB
            );
            CREATE INDEX IF NOT EXISTS pages_next_fetch ON pages (next_fetch);
            """
        )
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.commit()

    @classmethod
    def from_crawler(cls, crawler: Any) -> SqliteCrawlDb:
        """``CRAWLDB_CLASS``'s constructor: the file and schedule the crawl's settings name.
        The file is this process's own (:func:`crawler.worker_files.claim_worker_file`): a
        second worker in the same directory writes a ``.w1`` sibling instead of waiting."""
        name = getattr(crawler.spidercls, "name", None) or "crawl"
        path = crawldb_path(crawler.settings, name) or f"crawldb-{name}.sqlite"
        return cls(claim_worker_file(path), AdaptiveSchedule.from_settings(crawler.settings))

    # -- reads ---------------------------------------------------------------------------------

    def get(self, url: str) -> PageRecord | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM pages WHERE url = ?", (url,)).fetchone()
        return _record(row) if row else None

    def validators(self, url: str) -> tuple[str | None, str | None]:
        row = self._db.execute(
            "SELECT etag, last_modified FROM pages WHERE url = ? AND status IS NOT NULL", (url,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def urls(self) -> Iterator[str]:
        cursor = self._db.execute("SELECT url FROM pages")
        while rows := cursor.fetchmany(10_000):
            for (url,) in rows:
                yield url

    def due(self, now: float, limit: int | None = None) -> list[DueUrl]:
        sql = (
            "SELECT url, depth, priority, next_fetch FROM pages WHERE next_fetch <= ?"
            " ORDER BY priority DESC, next_fetch"
        )
        params: tuple[float, ...] = (now,)
        if limit is not None:
            sql += " LIMIT ?"
            params = (now, limit)
        return [DueUrl(*row) for row in self._db.execute(sql, params)]

    def claim_due(self, now: float, lease: float, limit: int) -> list[DueUrl]:
        due = self.due(now, limit)
        self._db.executemany(
            "UPDATE pages SET next_fetch = ? WHERE url = ?", [(now + lease, d.url) for d in due]
        )
        return due

    def next_due(self) -> float | None:
        return self._db.execute("SELECT min(next_fetch) FROM pages").fetchone()[0]

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM pages").fetchone()[0]

    def totals(self) -> dict[str, int]:
        """Counts for reports: pages known, fetched at least once, changed at least once."""
        row = self._db.execute(
            "SELECT count(*), sum(fetch_count > 0), sum(change_count > 0) FROM pages"
        ).fetchone()
        return {"pages": row[0], "fetched": row[1] or 0, "changed": row[2] or 0}

    # -- writes --------------------------------------------------------------------------------

    def record(self, visit: Visit) -> RecordResult:
        previous = self.get(visit.url)
        new = previous is None or previous.fetch_count == 0
        rec, changed = self.schedule.apply(previous, visit)
        self._db.execute(
            f"INSERT OR REPLACE INTO pages ({_COLUMNS}) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
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
                _pack(rec.outlinks),
            ),
        )
        return RecordResult(rec, changed, new)

    def add_unfetched(self, urls: Iterable[tuple[str, int]], due: float) -> int:
        before = self._db.total_changes
        self._db.executemany(
            "INSERT OR IGNORE INTO pages (url, depth, interval, next_fetch) VALUES (?, ?, ?, ?)",
            ((url, depth, self.schedule.interval, due) for url, depth in urls),
        )
        return self._db.total_changes - before

    def commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.commit()
        self._db.close()


def _pack(outlinks: list[Outlink]) -> bytes | None:
    if not outlinks:
        return None
    return zlib.compress(json.dumps(outlinks, separators=(",", ":")).encode("utf-8"))


def _unpack(blob: bytes | None) -> list[Outlink]:
    if not blob:
        return []
    return [(url, text) for url, text in json.loads(zlib.decompress(blob))]


def _record(row: tuple) -> PageRecord:  # type: ignore[type-arg]
    *head, outlinks = row
    return PageRecord(*head, outlinks=_unpack(outlinks))
