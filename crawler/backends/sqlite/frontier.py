"""The frontier's queues and seen-set on disk: one SQLite file in WAL mode, bounded memory.

Durability contract (what a rerun with the same file sees):

* A URL's row is deleted only when its lease is acknowledged (the page's item and links have
  left the spider and the pipelines), and that deletion is committed at once together with
  the links the page brought (WAL with ``synchronous=NORMAL``: a commit costs no fsync and
  survives a killed process). So after ``kill -9`` every URL whose page was not fully
  processed (in flight, or fetched and not yet acknowledged) is fetched again, and the links
  it had brought are found again.
* New URLs and seen keys are committed with the next acknowledgement or after
  ``commit_interval`` seconds, whichever comes first: a killed crawl loses at most the URLs
  discovered since then by pages that are not fetched again.
* On open, every row goes back to the front queues; the Mercator structure (which host has a
  back queue) is rebuilt as the crawl goes.

Memory: the front queues are read through a window of ``read_ahead`` rows per priority; a
host's back queue keeps at most ``back_buffer`` entries in memory and the rest stays on disk.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crawler.frontier.api import Entry
from crawler.frontier.store import QueueStore, SavedHost
from crawler.frontier.urlcode import pack_referrer, unpack_referrer

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY,
    prio INTEGER NOT NULL,
    host TEXT NOT NULL,
    url TEXT NOT NULL,
    depth INTEGER NOT NULL,
    payload BLOB,
    routed INTEGER NOT NULL DEFAULT 0,
    cash REAL NOT NULL DEFAULT 0,
    policy TEXT NOT NULL DEFAULT '',
    referrer BLOB,  -- where the URL was found: urlcode.pack_referrer's delta; NULL: a seed
    key INTEGER NOT NULL DEFAULT 0  -- the seen key when the URL is not its canonical form
);
CREATE INDEX IF NOT EXISTS queue_front ON queue (prio, id) WHERE routed = 0;
-- routed > 0: in its host's back queue, at that place (the order the refill routed it in)
CREATE INDEX IF NOT EXISTS queue_routed ON queue (host, routed) WHERE routed > 0;
CREATE TABLE IF NOT EXISTS seen (key INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,
    admitted INTEGER NOT NULL,
    crawl_delay REAL,
    dead INTEGER NOT NULL,
    skipped INTEGER NOT NULL
);
"""

_COLUMNS = "id, prio, host, url, depth, payload, cash, policy, referrer, key"
# The file's layout (PRAGMA user_version): a file of another layout is refused, not read. 2:
# referrers coded with layout 7's URL code (crawler.frontier.urlcode).
LAYOUT = 2


class FrontierFileError(RuntimeError):
    """The frontier file was written by another version of the crawler."""


# Seconds between commits of new URLs at least (and with every completed fetch): a killed crawl
# loses at most the URLs discovered in the last this-many seconds.
COMMIT_INTERVAL = 2.0


class SqliteQueueStore(QueueStore):
    def __init__(
        self,
        path: str | Path,
        front_queues: int,
        *,
        commit_interval: float = COMMIT_INTERVAL,
        read_ahead: int = 256,
        back_buffer: int = 64,
    ) -> None:
        self.path = str(path)
        self.commit_interval = commit_interval
        self.read_ahead = read_ahead
        self.back_buffer = back_buffer
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA temp_store=MEMORY")
        layout = self.db.execute("PRAGMA user_version").fetchone()[0]
        tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables and layout != LAYOUT:
            self.db.close()
            raise FrontierFileError(
                f"{self.path} was written by another version of the crawler (layout {layout}, "
                f"this one reads {LAYOUT}): remove it, or give the crawl another JOBDIR"
            )
        self.db.executescript(_SCHEMA)
        self.db.execute(f"PRAGMA user_version = {LAYOUT}")
        # an OPIC raise queues a URL again and leaves its older row to be skipped: on open,
        # the newest row of a URL is its live one
        self.db.execute(
            "DELETE FROM queue WHERE id NOT IN (SELECT max(id) FROM queue GROUP BY url)"
        )
        last = front_queues - 1
        self.db.execute("UPDATE queue SET routed = 0 WHERE routed > 0")
        self.db.execute("UPDATE queue SET prio = ? WHERE prio > ?", (last, last))
        self.front_sizes = [0] * front_queues
        for prio, n in self.db.execute("SELECT prio, count(*) FROM queue GROUP BY prio"):
            self.front_sizes[prio] = n
        self._next_id = (self.db.execute("SELECT max(id) FROM queue").fetchone()[0] or 0) + 1
        self._seen = self.db.execute("SELECT count(*) FROM seen").fetchone()[0]
        self._head: list[deque[Entry]] = [deque() for _ in range(front_queues)]
        self._cursor = [0] * front_queues
        self._back: dict[str, deque[Entry]] = {}
        self._overflow: dict[str, int] = {}
        self._back_cursor: dict[str, int] = {}
        self._inserts: list[tuple[Any, ...]] = []
        self._routes: list[tuple[int, int]] = []  # (place in its back queue, id)
        self._route_seq = 0
        self._deletes: list[tuple[int]] = []
        self._hosts: dict[str, tuple[Any, ...]] = {}
        self._last_commit = time.monotonic()
        self.db.execute("BEGIN")

    # -- front queues -------------------------------------------------------------------------

    def front_push(self, entry: Entry) -> None:
        entry.id = self._next_id
        self._next_id += 1
        self._inserts.append(
            (
                entry.id, entry.priority, entry.host, entry.url, entry.depth, entry.payload,
                entry.cash, entry.policy,
                pack_referrer(entry.referrer, entry.url) if entry.referrer else None,
                entry.key,
            )
        )
        self.front_sizes[entry.priority] += 1
        if len(self._inserts) >= 4096:
            self._flush()  # bounded memory even while nothing completes

    def front_pop(self, priority: int) -> Entry:
        head = self._head[priority]
        if not head:
            self._flush()
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM queue WHERE routed = 0 AND prio = ? AND id > ? "
                "ORDER BY id LIMIT ?",
                (priority, self._cursor[priority], self.read_ahead),
            ).fetchall()
            head.extend(_entry(row) for row in rows)
            self._cursor[priority] = rows[-1][0]
        self.front_sizes[priority] -= 1
        return head.popleft()

    # -- back queues --------------------------------------------------------------------------

    def back_push(self, host: str, entry: Entry) -> None:
        queue = self._back.get(host)
        if queue is None:
            queue = self._back[host] = deque()
        if len(queue) < self.back_buffer and not self._overflow.get(host):
            queue.append(entry)
        else:
            self._route_seq += 1
            self._routes.append((self._route_seq, entry.id))
            self._overflow[host] = self._overflow.get(host, 0) + 1

    def back_pop(self, host: str) -> Entry:
        queue = self._back[host]
        if not queue:
            self._load_back(host, self.back_buffer)
        entry = queue.popleft()
        if not queue and not self._overflow.get(host):
            del self._back[host]
        return entry

    def _load_back(self, host: str, limit: int | None) -> None:
        self._flush()
        rows = self.db.execute(
            f"SELECT routed, {_COLUMNS} FROM queue WHERE routed > ? AND host = ? "
            "ORDER BY routed LIMIT ?",
            (self._back_cursor.get(host, 0), host, -1 if limit is None else limit),
        ).fetchall()
        if rows:
            self._back.setdefault(host, deque()).extend(_entry(row[1:]) for row in rows)
            self._back_cursor[host] = rows[-1][0]
            self._overflow[host] -= len(rows)

    def back_len(self, host: str) -> int:
        queue = self._back.get(host)
        return (len(queue) if queue is not None else 0) + self._overflow.get(host, 0)

    def back_drop(self, host: str) -> list[Entry]:
        if host not in self._back:
            return []
        if self._overflow.get(host):
            self._load_back(host, None)
        return list(self._back.pop(host))

    # -- seen-set, hosts, deletions -----------------------------------------------------------

    def seen_add(self, key: int) -> bool:
        added = self.db.execute("INSERT OR IGNORE INTO seen (key) VALUES (?)", (key,)).rowcount
        self._seen += added
        return added == 1

    def seen_count(self) -> int:
        return self._seen

    def save_host(self, host: Any) -> None:
        self._hosts[host.name] = (
            host.name, host.admitted, host.crawl_delay, int(host.dead), int(host.skipped)
        )

    def load_hosts(self) -> list[SavedHost]:
        return [
            SavedHost(name, admitted, delay, bool(dead), bool(skipped))
            for name, admitted, delay, dead, skipped in self.db.execute(
                "SELECT name, admitted, crawl_delay, dead, skipped FROM hosts"
            )
        ]

    def forget(self, entry: Entry) -> None:
        if entry.id:
            self._deletes.append((entry.id,))

    # -- writing out --------------------------------------------------------------------------

    def _flush(self) -> None:
        db = self.db
        if self._inserts:
            db.executemany(
                "INSERT INTO queue (id, prio, host, url, depth, payload, cash, policy, referrer, "
                "key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self._inserts,
            )
            self._inserts.clear()
        if self._routes:
            db.executemany("UPDATE queue SET routed = ? WHERE id = ?", self._routes)
            self._routes.clear()
        if self._deletes:
            db.executemany("DELETE FROM queue WHERE id = ?", self._deletes)
            self._deletes.clear()
        if self._hosts:
            db.executemany(
                "INSERT OR REPLACE INTO hosts (name, admitted, crawl_delay, dead, skipped) "
                "VALUES (?, ?, ?, ?, ?)",
                list(self._hosts.values()),
            )
            self._hosts.clear()

    def tick(self, now: float, *, durable: bool = False) -> None:
        if durable or time.monotonic() - self._last_commit >= self.commit_interval:
            self.commit()

    def commit(self) -> None:
        self._flush()
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")
        self._last_commit = time.monotonic()

    def close(self) -> None:
        if self.db is None:
            return
        self._flush()
        self.db.execute("COMMIT")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.close()
        self.db = None  # type: ignore[assignment]

    def iter_queued(self) -> Iterator[Entry]:
        self._flush()
        for row in self.db.execute(f"SELECT {_COLUMNS} FROM queue"):
            yield _entry(row)


def _entry(row: tuple[Any, ...]) -> Entry:
    id_, prio, host, url, depth, payload, cash, policy, referrer, key = row
    return Entry(
        url, sys.intern(host), prio, depth, payload, id_, cash, policy,
        unpack_referrer(referrer, 0, url)[0] if referrer else "", key,
    )
