"""Where robots.txt records live between uses: one small interface, so a Redis backend shared by
all workers can replace the embedded ones without touching the middleware.

The fetcher builds the class named by ``ROBOTS_CACHE_CLASS`` with Scrapy's
``build_from_crawler``: a backend reads its own settings in ``from_crawler``.
"""

from __future__ import annotations

import abc
import os
import sqlite3
from pathlib import Path
from typing import Any

from .rules import DISALLOW_ALL, RobotsRecord

RECRAWL_EXTENSION = "crawler.extensions.recrawl.RecrawlExtension"


def robots_cache_path(crawler: Any) -> str | None:
    """``ROBOTSTXT_CACHE_PATH``; else in JOBDIR, or beside the crawl database, so a resumed crawl
    or a recrawl reuses fresh copies; None: nowhere on disk.

    The crawl database's path comes from the recrawl extension, looked up by class path (it
    must be built already: Scrapy builds extensions before the downloader)."""
    settings = crawler.settings
    path = settings.get("ROBOTSTXT_CACHE_PATH")
    if path:
        return str(path)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return os.path.join(jobdir, "robots.sqlite")
    from scrapy.utils.misc import load_object

    try:
        recrawl = crawler.get_extension(load_object(RECRAWL_EXTENSION))
    except RuntimeError:  # no extension manager yet (a crawler built by hand)
        return None
    db_path = getattr(recrawl, "path", None)
    if not db_path:
        return None
    stem = db_path[: -len(".sqlite")] if db_path.endswith(".sqlite") else db_path
    return f"{stem}-robots.sqlite"


class RobotsCache(abc.ABC):
    """Records by origin. Only usable outcomes are stored: "unreachable" is a state of the
    current crawl (retried soon), not something to remember for a day."""

    @abc.abstractmethod
    def get(self, origin: str) -> RobotsRecord | None: ...

    @abc.abstractmethod
    def put(self, record: RobotsRecord) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files or connections."""


class MemoryRobotsCache(RobotsCache):
    """The default: lives as long as the crawl."""

    def __init__(self) -> None:
        self._records: dict[str, RobotsRecord] = {}

    @classmethod
    def from_crawler(cls, crawler: Any) -> MemoryRobotsCache:
        return cls()

    def get(self, origin: str) -> RobotsRecord | None:
        return self._records.get(origin)

    def put(self, record: RobotsRecord) -> None:
        if record.kind != DISALLOW_ALL:
            self._records[record.origin] = record

    def __len__(self) -> int:
        return len(self._records)


class SqliteRobotsCache(RobotsCache):
    """One SQLite file, so a second ``scrapy crawl`` within the expiry does not fetch robots.txt
    again. Each put commits at once: a handful of writes per host, never on the hot path."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        parent = Path(self.path).parent
        parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS robots (origin TEXT PRIMARY KEY, kind TEXT NOT NULL,"
            " status INTEGER NOT NULL, fetched_at REAL NOT NULL, expires_at REAL NOT NULL,"
            " body TEXT NOT NULL)"
        )

    @classmethod
    def from_crawler(cls, crawler: Any) -> SqliteRobotsCache:
        """At :func:`robots_cache_path`; a crawl with no such path has nowhere to keep it."""
        path = robots_cache_path(crawler)
        if path is None:
            raise ValueError(
                "SqliteRobotsCache needs ROBOTSTXT_CACHE_PATH, a JOBDIR or a crawl database"
            )
        return cls(path)

    def get(self, origin: str) -> RobotsRecord | None:
        row = self._db.execute(
            "SELECT origin, kind, status, fetched_at, expires_at, body FROM robots"
            " WHERE origin = ?",
            (origin,),
        ).fetchone()
        return RobotsRecord(*row) if row else None

    def put(self, record: RobotsRecord) -> None:
        if record.kind == DISALLOW_ALL:
            return
        self._db.execute(
            "INSERT OR REPLACE INTO robots VALUES (?, ?, ?, ?, ?, ?)",
            (
                record.origin,
                record.kind,
                record.status,
                record.fetched_at,
                record.expires_at,
                record.body,
            ),
        )

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM robots").fetchone()[0]

    def close(self) -> None:
        self._db.close()
