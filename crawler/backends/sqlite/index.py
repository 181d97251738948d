"""The embedded index: one SQLite file, FTS5 full-text tables ranked with BM25.

:class:`SQLiteIndex` writes pages, aliases and the anchor texts of their links; its file's
tables are in :mod:`crawler.backends.sqlite.index_schema`, its searches in
:mod:`crawler.backends.sqlite.index_search`. :class:`MergedIndex` reads several workers' files
as one.

Writes go through one connection in WAL mode, grouped in explicit transactions by the caller
(:meth:`SQLiteIndex.commit`): a crawl killed mid-way loses at most the open transaction and
leaves a consistent file that ``scrapy search`` can read even while the crawl writes.
"""

from __future__ import annotations

import array
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from crawler.backends.sqlite.index_schema import SCHEMA_VERSION, open_index_file
from crawler.backends.sqlite.index_search import search_index, to_fts_query
from crawler.backends.sqlite.worker_files import claim_worker_file, worker_siblings
from crawler.index.base import (
    MAX_BODY,
    Index,
    IndexAccessError,
    PageDocument,
    SearchResult,
    indexed_links,
)
from crawler.index.config import IndexConfig

__all__ = ["SCHEMA_VERSION", "MergedIndex", "SQLiteIndex", "default_index_path", "to_fts_query"]

DEFAULT_FILENAME = "crawl-index.sqlite"
_ID_CACHE = 200_000  # URL -> page id entries kept in memory


def default_index_path(settings: Any) -> str:
    """``INDEX_PATH`` if set, else ``crawl-index.sqlite`` under ``JOBDIR``, else in the CWD.

    Under ``JOBDIR`` the index travels with the job's other state (a resumed job keeps adding
    to it); without one the CWD is where ``scrapy search`` run from the project finds it.
    """
    path = IndexConfig.from_settings(settings).path
    if path:
        return str(path)
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return str(Path(jobdir) / DEFAULT_FILENAME)
    return DEFAULT_FILENAME


class SQLiteIndex(Index):
    """SQLite FTS5 backend; one writer process at a time, any number of readers.

    ``runs_in_thread``: the index pipeline may open it on a thread of its own and write from
    there only (a connection belongs to the thread that opened it).
    """

    runs_in_thread: ClassVar[bool] = True

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = str(path)
        self.readonly = readonly
        self._db = open_index_file(self.path, readonly=readonly)
        self._in_tx = False
        self._ids: dict[str, int] = {}  # URL -> page id (rows are never deleted)
        # Within one transaction (which holds SQLite's write lock, so no other writer can delete
        # an anchor meanwhile): (target, text) -> anchor id, and pending changes of link counts.
        # A site's menu links recur on every page of a batch; their counts are written once per
        # commit instead of once per page.
        self._anchor_ids: dict[tuple[int, str], int] = {}
        self._count_delta: dict[int, int] = {}

    @classmethod
    def from_settings(cls, settings: Any, *, readonly: bool = False) -> Index:
        """A writer gets its own file
        (:func:`crawler.backends.sqlite.worker_files.claim_worker_file`: the
        index path, or a ``.wN`` sibling while another process writes that); a reader reads
        the file and its siblings together (:class:`MergedIndex`)."""
        path = default_index_path(settings)
        if not readonly:
            return cls(claim_worker_file(path))
        files = worker_siblings(path)
        if len(files) > 1:
            return MergedIndex([cls(f, readonly=True) for f in files])
        return cls(path, readonly=True)

    # --- transactions -----------------------------------------------------------------------

    def _begin(self) -> None:
        if self.readonly:
            raise IndexAccessError(f"{self.path} is open read-only")
        if not self._in_tx:
            self._db.execute("BEGIN IMMEDIATE")
            self._in_tx = True

    def commit(self) -> None:
        if self._in_tx:
            self._flush_counts()
            self._db.execute("COMMIT")
            self._in_tx = False
            self._anchor_ids.clear()

    def rollback(self) -> None:
        """Drop the open transaction (what a killed process gets for free)."""
        if self._in_tx:
            self._db.execute("ROLLBACK")
            self._in_tx = False
            self._ids.clear()
            self._anchor_ids.clear()
            self._count_delta.clear()

    def _flush_counts(self) -> None:
        """Write the pending link counts; an anchor no link uses any more is deleted."""
        if not self._count_delta:
            return
        changed = [(d, i) for i, d in self._count_delta.items() if d]
        self._db.executemany("UPDATE anchors SET n = n + ? WHERE id = ?", changed)
        # d == 0 too: an anchor created and taken back within this transaction
        self._db.executemany(
            "DELETE FROM anchors WHERE id = ? AND n <= 0",
            [(i,) for i, d in self._count_delta.items() if d <= 0],
        )
        self._count_delta.clear()
        self._anchor_ids.clear()  # some of them may have been deleted

    def close(self) -> None:
        try:
            self.commit()
        finally:
            self._db.close()

    # --- writes -----------------------------------------------------------------------------

    def _page_id(self, url: str, site: str = "") -> int:
        """The id of ``url``'s row, created (unfetched) if missing."""
        pid = self._ids.get(url)
        if pid is not None:
            return pid
        row = self._db.execute("SELECT id FROM pages WHERE url = ?", (url,)).fetchone()
        if row is None:
            pid = self._db.execute(
                "INSERT INTO pages(url, site) VALUES (?, ?)", (url, site)
            ).lastrowid
            assert pid is not None
        else:
            pid = row[0]
        if len(self._ids) >= _ID_CACHE:
            self._ids.clear()
        self._ids[url] = pid
        return pid

    def _drop_doc(self, pid: int) -> None:
        self._db.execute("DELETE FROM docs WHERE rowid = ?", (pid,))

    def add_page(self, doc: PageDocument) -> None:
        self._begin()
        pid = self._page_id(doc.url, doc.site)
        self._drop_doc(pid)
        self._db.execute(
            "INSERT INTO docs(rowid, title, body, anchor) VALUES (?, ?, ?, '')",
            (pid, doc.title or "", (doc.text or "")[:MAX_BODY]),
        )
        self._db.execute(
            "UPDATE pages SET site = ?, title = ?, status = ?, fetched_at = ?, visited_at = ?,"
            " fingerprint = ?, alias_of = NULL, has_doc = 1 WHERE id = ?",
            (doc.site, doc.title or "", doc.status, doc.fetched_at, doc.fetched_at,
             doc.fingerprint, pid),
        )
        self._set_links(pid, doc.url, doc.outlinks, doc.site)

    def add_alias(
        self,
        url: str,
        original: str,
        *,
        site: str = "",
        status: int | None = None,
        fetched_at: str | None = None,
    ) -> None:
        self._begin()
        if url == original:
            return
        target = self._page_id(original, site)
        # the original may itself have become an alias since: point at its root
        row = self._db.execute("SELECT alias_of FROM pages WHERE id = ?", (target,)).fetchone()
        if row and row[0] is not None:
            target = row[0]
        pid = self._page_id(url, site)
        if pid == target:
            return
        self._drop_doc(pid)
        self._db.execute(
            "UPDATE pages SET site = ?, status = ?, fetched_at = ?, visited_at = ?,"
            " alias_of = ?, has_doc = 0 WHERE id = ?",
            (site, status, fetched_at, fetched_at, target, pid),
        )
        # no chains: whatever pointed at the new alias now points at its original
        self._db.execute("UPDATE pages SET alias_of = ? WHERE alias_of = ?", (target, pid))
        self._set_links(pid, url, (), site)

    def record_visit(self, url: str, fetched_at: str | None, status: int | None) -> None:
        self._begin()
        pid = self._page_id(url)
        self._db.execute(
            "UPDATE pages SET visited_at = ?, status = coalesce(?, status) WHERE id = ?",
            (fetched_at, status, pid),
        )

    def remove_page(
        self, url: str, *, status: int | None = None, fetched_at: str | None = None
    ) -> None:
        self._begin()
        pid = self._page_id(url)
        self._drop_doc(pid)
        self._db.execute(
            "UPDATE pages SET has_doc = 0, status = coalesce(?, status),"
            " visited_at = coalesce(?, visited_at) WHERE id = ?",
            (status, fetched_at, pid),
        )

    def set_links(self, url: str, outlinks: Iterable[tuple[str, str]], site: str = "") -> None:
        self._begin()
        self._set_links(self._page_id(url, site), url, outlinks, site)

    def _set_links(
        self, source: int, source_url: str, outlinks: Iterable[tuple[str, str]], site: str
    ) -> None:
        """Take back the anchors ``source`` contributed before, then add the new ones."""
        row = self._db.execute(
            "SELECT anchor_ids FROM outlinks WHERE source = ?", (source,)
        ).fetchone()
        delta = self._count_delta
        if row is not None:
            old = array.array("q")
            old.frombytes(row[0])
            for anchor_id in old:
                delta[anchor_id] = delta.get(anchor_id, 0) - 1
        host = urlsplit(source_url).hostname
        ids = array.array("q")
        seen: set[tuple[int, str]] = set()
        for target_url, anchor in indexed_links(source_url, outlinks):
            target = self._ids.get(target_url)
            if target is None:
                target_site = site if urlsplit(target_url).hostname == host else ""
                target = self._page_id(target_url, target_site)
            key = (target, anchor)
            if key in seen:  # one page saying the same thing twice counts once
                continue
            seen.add(key)
            anchor_id = self._anchor_ids.get(key)
            if anchor_id is None:
                anchor_id = self._anchor_id(target, anchor)
                self._anchor_ids[key] = anchor_id
            delta[anchor_id] = delta.get(anchor_id, 0) + 1
            ids.append(anchor_id)
        if ids:
            self._db.execute(
                "INSERT OR REPLACE INTO outlinks(source, anchor_ids) VALUES (?, ?)",
                (source, ids.tobytes()),
            )
        elif row is not None:
            self._db.execute("DELETE FROM outlinks WHERE source = ?", (source,))

    def _anchor_id(self, target: int, anchor: str) -> int:
        row = self._db.execute(
            "SELECT id FROM anchors WHERE target = ? AND anchor = ?", (target, anchor)
        ).fetchone()
        if row is not None:
            return int(row[0])
        # n = 0 until the pending counts are written at commit
        anchor_id = self._db.execute(
            "INSERT INTO anchors(target, anchor, n) VALUES (?, ?, 0)", (target, anchor)
        ).lastrowid
        assert anchor_id is not None
        return anchor_id

    # --- reads ------------------------------------------------------------------------------

    def search(self, query: str, *, site: str | None = None, limit: int = 10) -> list[SearchResult]:
        if self._in_tx:
            self._flush_counts()  # a writer searching its own uncommitted pages
        return search_index(self._db, query, site=site, limit=limit)

    def page(self, url: str) -> dict[str, Any] | None:
        """The stored facts about ``url`` (tests, debugging)."""
        self._db.row_factory = sqlite3.Row
        try:
            row = self._db.execute("SELECT * FROM pages WHERE url = ?", (url,)).fetchone()
        finally:
            self._db.row_factory = None
        return dict(row) if row else None

    def stats(self) -> dict[str, int]:
        one = self._db.execute
        return {
            "documents": one("SELECT count(*) FROM pages WHERE has_doc = 1").fetchone()[0],
            "urls": one("SELECT count(*) FROM pages").fetchone()[0],
            "aliases": one("SELECT count(*) FROM pages WHERE alias_of IS NOT NULL").fetchone()[0],
            "anchors": one("SELECT count(*) FROM anchors").fetchone()[0],
        }

    def integrity_check(self) -> list[str]:
        """SQLite's and FTS5's own consistency checks; ``[]`` when all is well."""
        problems = [r[0] for r in self._db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        for table in ("docs", "anchor_fts"):
            try:
                self._db.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table}: {exc}")
        return problems


class MergedIndex(Index):
    """Several workers' index files searched as one (read-only): each file answers, and a URL
    found in several (fetched by one worker, linked to in another's pages) is one result whose
    scores add up, as its document and anchor hits add up within one file."""

    def __init__(self, parts: list[SQLiteIndex]) -> None:
        self.parts = parts
        self.path = ", ".join(p.path for p in parts)

    @classmethod
    def from_settings(cls, settings: Any, *, readonly: bool = False) -> Index:
        return SQLiteIndex.from_settings(settings, readonly=True)

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise IndexAccessError(f"{self.path} is open read-only")

    add_page = add_alias = record_visit = remove_page = set_links = _refuse  # type: ignore[assignment]

    def search(self, query: str, *, site: str | None = None, limit: int = 10) -> list[SearchResult]:
        merged: dict[str, SearchResult] = {}
        for part in self.parts:
            for hit in part.search(query, site=site, limit=limit):
                seen = merged.get(hit.url)
                if seen is None:
                    merged[hit.url] = hit
                    continue
                if hit.fetched and not seen.fetched:
                    seen.title, seen.snippet, seen.fetched = hit.title, hit.snippet, True
                    seen.status, seen.site = hit.status, hit.site or seen.site
                seen.score += hit.score
                seen.matched_text |= hit.matched_text
                seen.matched_anchor |= hit.matched_anchor
                seen.anchors = list(dict.fromkeys(seen.anchors + hit.anchors))[:3]
                seen.aliases = list(dict.fromkeys(seen.aliases + hit.aliases))[:5]
        ranked = sorted(merged.values(), key=lambda r: -r.score)
        return ranked[:limit]

    def commit(self) -> None:
        """Nothing to write."""

    def close(self) -> None:
        for part in self.parts:
            part.close()

    def stats(self) -> dict[str, int]:
        """Summed over the files (a URL known to two workers counts twice)."""
        total: dict[str, int] = {}
        for part in self.parts:
            for key, value in part.stats().items():
                total[key] = total.get(key, 0) + value
        return total
