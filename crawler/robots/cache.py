"""Where robots.txt records live between uses: one small interface, so a Redis backend shared by
all workers can replace the embedded ones without touching the middleware.

The robots.txt fetcher builds the class named by ``robots_cache`` with Scrapy's
``build_from_crawler``, passing the file the crawl's settings point at (``path``, None when the
crawl keeps nothing on disk); a backend reads any other settings in ``from_crawler``.
"""

from __future__ import annotations

import abc
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawler.net.freshness import Freshness
from crawler.robots.rules import DISALLOW_ALL, RobotsRecord

# RFC 9309 2.4: a cached robots.txt should not be used for more than 24 hours (unless the file
# is unreachable: then the book keeps the last good copy in force while it retries).
MAX_LIFETIME = 86400.0
# The shortest lifetime a server can ask for: no-store, no-cache, max-age=0 or an Expires in
# the past would otherwise mean a robots.txt request before every page. A minute keeps a busy
# host's robots.txt at most one request a minute, and a rule change is seen within a minute.
MIN_LIFETIME = 60.0


def robots_lifetime(hint: Freshness, default: float, status: int = 200) -> float:
    """Seconds a fetched robots.txt stays in force: what its caching headers say (a private
    cache's reading, :mod:`crawler.net.freshness`) within ``[MIN_LIFETIME, MAX_LIFETIME]``, or
    ``default`` (``ROBOTSTXT_CACHE_EXPIRY``) when they say nothing.

    Only a ``2xx`` answer's headers count: a 404's ``no-cache`` (what many servers and CDNs
    put on every error page) is about that error page, not about how often the site's rules
    change, and would otherwise mean a robots.txt request every minute for the crawl."""
    if not 200 <= status < 300:
        return default
    if hint.stale_at_once:
        return MIN_LIFETIME
    if hint.lifetime is None:
        return default
    return min(max(hint.lifetime, MIN_LIFETIME), MAX_LIFETIME)


@dataclass(frozen=True, slots=True)
class SharedOrigin:
    """An origin's robots.txt state as the workers of one crawl share it (see
    :meth:`RobotsCache.claim`). Times are relative (seconds from now), so workers' clocks
    never meet."""

    claimed: bool  # the caller may fetch robots.txt now, and no other worker will meanwhile
    fetching_for: float = 0.0  # another worker fetches it; its claim lapses in this many s
    retry_in: float | None = None  # unreachable: the next try is due in this many s (0: due)
    failures: int = 0  # consecutive failed fetches, crawl-wide
    gave_up: bool = False  # out of retries for this crawl


CLAIMED = SharedOrigin(True)

_LAYOUT = 1  # the SQLite file's layout (PRAGMA user_version); a file of another is dropped


class RobotsCache(abc.ABC):
    """Records by origin. Only usable outcomes are stored: "unreachable" is a state of the
    current crawl (retried soon), not something to remember for a day.

    A cache shared by several workers (Redis) also shares each origin's *fetch state*, so that
    robots.txt is fetched once per host (and once per retry period while it fails) for the
    whole crawl: :meth:`claim` before a fetch, :meth:`failed` after a failed one, :meth:`put`
    (which clears the state) after a good one. The embedded caches serve one process, whose
    :class:`~crawler.robots.book.RobotsBook` already knows all of it: every claim succeeds.
    """

    @abc.abstractmethod
    def get(self, origin: str) -> RobotsRecord | None: ...

    @abc.abstractmethod
    def put(self, record: RobotsRecord) -> None: ...

    def get_many(self, origins: list[str]) -> dict[str, RobotsRecord | None]:
        """The records of ``origins`` at once (each None when there is none): a batch of seeds
        brings thousands of new hosts, and a shared cache answers them in one round trip
        rather than one each."""
        return {origin: self.get(origin) for origin in origins}

    def claim(self, origin: str, seconds: float) -> SharedOrigin:
        """Take the fetch of ``origin``'s robots.txt for up to ``seconds``, unless another
        worker holds it or a failed fetch is waiting out its retry delay (then say which)."""
        return CLAIMED

    def peek(self, origin: str) -> SharedOrigin | None:
        """The shared fetch state, without claiming (None: nothing recorded)."""
        return None

    def failed(  # noqa: B027 - optional hook: nothing to share in one process
        self, origin: str, retry_in: float | None, failures: int
    ) -> None:
        """A fetch failed: unreachable for ``retry_in`` seconds (None: given up for the
        crawl). Ends the caller's claim."""

    def unclaim(self, origin: str) -> None:  # noqa: B027 - optional hook, as failed
        """The caller's fetch ended without an outcome to share (refused, abandoned)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files or connections."""


class MemoryRobotsCache(RobotsCache):
    """The default: lives as long as the crawl."""

    def __init__(self) -> None:
        self._records: dict[str, RobotsRecord] = {}

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> MemoryRobotsCache:
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
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        if self._db.execute("PRAGMA user_version").fetchone()[0] != _LAYOUT:
            # a cache another version wrote: dropped, not read (robots.txt is fetched again)
            self._db.execute("DROP TABLE IF EXISTS robots")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS robots (origin TEXT PRIMARY KEY, kind TEXT NOT NULL,"
            " status INTEGER NOT NULL, fetched_at REAL NOT NULL, expires_at REAL NOT NULL,"
            " body TEXT NOT NULL, etag TEXT NOT NULL, last_modified TEXT NOT NULL)"
        )
        self._db.execute(f"PRAGMA user_version = {_LAYOUT}")

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> SqliteRobotsCache:
        """At ``path``; without one, an SQLite database in memory that lives as long as the
        crawl."""
        return cls(path or ":memory:")

    def get(self, origin: str) -> RobotsRecord | None:
        row = self._db.execute(
            "SELECT origin, kind, status, fetched_at, expires_at, body, etag, last_modified"
            " FROM robots WHERE origin = ?",
            (origin,),
        ).fetchone()
        return RobotsRecord(*row) if row else None

    def put(self, record: RobotsRecord) -> None:
        if record.kind == DISALLOW_ALL:
            return
        self._db.execute(
            "INSERT OR REPLACE INTO robots VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.origin,
                record.kind,
                record.status,
                record.fetched_at,
                record.expires_at,
                record.body,
                record.etag,
                record.last_modified,
            ),
        )

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM robots").fetchone()[0]

    def close(self) -> None:
        self._db.close()
