"""The WARC payload-digest index in SQLite: beside the crawl database (or in JOBDIR, or in the
WARC directory), so the next crawl of the same site writes revisit records for what this one
archived. Used from the archive thread alone (``crawler.archive.thread``); one row per payload,
~150 bytes; ``INSERT OR IGNORE`` then a read makes ``claim`` first-wins even when two
processes share the file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from crawler.archive.digests import DigestIndex, decode_capture, encode_capture
from crawler.archive.records import Capture


class SqliteDigestIndex(DigestIndex):
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # the archive thread opens nothing itself: built on the reactor, used on the thread
        self._db = sqlite3.connect(
            self.path, timeout=30, isolation_level=None, check_same_thread=False
        )
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS warc_digests (digest TEXT PRIMARY KEY,"
            " capture TEXT NOT NULL)"
        )

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> SqliteDigestIndex:
        return cls(path or ":memory:")

    def claim(self, digest: str, capture: Capture) -> Capture | None:
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO warc_digests VALUES (?, ?)", (digest, encode_capture(capture))
        )
        if cursor.rowcount == 1:
            return None
        row = self._db.execute(
            "SELECT capture FROM warc_digests WHERE digest = ?", (digest,)
        ).fetchone()
        return decode_capture(row[0]) if row else None

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM warc_digests").fetchone()[0])

    def close(self) -> None:
        self._db.close()
