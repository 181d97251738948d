"""The shared index: PostgreSQL full text (``tsvector`` + GIN), for several workers at once.

Chosen by ``DATABASE_URL=postgresql://...`` (``crawler/backends/registry.py``); the same guarantees
as the embedded SQLite index (``crawler/index/base.py``) and the same query language
(``crawler/index/query.py``), so one query string means the same on both backends. Its jobs
are in three modules: the tables (:mod:`crawler.backends.postgres.index_schema`), the batched
writer (:mod:`crawler.backends.postgres.index_writer`: every write call only queues an
operation, :meth:`PostgresIndex.commit` hands the batch to a thread of its own and returns at
once) and the search (:mod:`crawler.backends.postgres.index_search`). :meth:`flush` waits for
the writer (``close`` and the reads do, so a writer sees its own pages).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg.rows import dict_row

from crawler.backends.postgres.connection import DatabaseError, connect, safe_dsn
from crawler.backends.postgres.index_schema import (
    SCHEMA_VERSION,
    check_version,
    create_schema,
    stored_version,
)
from crawler.backends.postgres.index_search import search_index, to_tsquery_text
from crawler.backends.postgres.index_writer import IndexWriter
from crawler.config import defaults
from crawler.index.base import Index, IndexAccessError, PageDocument, SearchResult

__all__ = ["SCHEMA_VERSION", "PostgresIndex", "to_tsquery_text"]


class PostgresIndex(Index):
    """PostgreSQL backend: any number of writer processes and readers on one database."""

    def __init__(self, url: str, *, readonly: bool = False, partitions: int = 0) -> None:
        """``partitions``: hash partitions of the big tables when this writer creates them
        (``DATABASE_PARTITIONS``, :func:`~crawler.backends.postgres.index_schema.schema`)."""
        if not url:
            raise IndexAccessError("the PostgreSQL index needs DATABASE_URL")
        self.url = url
        self.path = safe_dsn(url)  # what logs say the index is
        self.readonly = readonly
        self._writer: IndexWriter | None = None
        try:
            self._reader = connect(url, autocommit=True)
            if readonly:
                found = stored_version(self._reader)
                if found is None:
                    self._reader.close()
                    raise IndexAccessError(
                        f"no index in PostgreSQL at {self.path} (crawl first, or set "
                        "DATABASE_URL)"
                    )
                check_version(found, self.path)
            else:
                create_schema(self._reader, self.path, partitions)
                self._writer = IndexWriter(url)
        except DatabaseError as exc:
            raise IndexAccessError(str(exc)) from None

    @classmethod
    def from_settings(cls, settings: Any, *, readonly: bool = False) -> PostgresIndex:
        return cls(
            settings.get("DATABASE_URL") or "",
            readonly=readonly,
            partitions=int(settings.get("DATABASE_PARTITIONS") or defaults.DATABASE_PARTITIONS),
        )

    # --- writes (queued, see crawler.backends.postgres.index_writer) ------------------------

    def _write(self) -> IndexWriter:
        if self._writer is None:
            raise IndexAccessError(f"{self.path} is open read-only")
        return self._writer

    def add_page(self, doc: PageDocument) -> None:
        self._write().add_page(doc)

    def add_alias(
        self,
        url: str,
        original: str,
        *,
        site: str = "",
        status: int | None = None,
        fetched_at: str | None = None,
    ) -> None:
        self._write().add_alias(url, original, site=site, status=status, fetched_at=fetched_at)

    def record_visit(self, url: str, fetched_at: str | None, status: int | None) -> None:
        self._write().record_visit(url, fetched_at, status)

    def remove_page(
        self, url: str, *, status: int | None = None, fetched_at: str | None = None
    ) -> None:
        self._write().remove_page(url, status=status, fetched_at=fetched_at)

    def set_links(self, url: str, outlinks: Iterable[tuple[str, str]], site: str = "") -> None:
        self._write().set_links(url, outlinks, site)

    def commit(self) -> None:
        """Hand the batch to the writer thread (one transaction) and return at once."""
        if self._writer is not None:
            self._writer.commit()

    def flush(self) -> None:
        """Commit, and wait until every batch is written."""
        if self._writer is not None:
            self._writer.flush()

    def rollback(self) -> None:
        """Drop the operations not handed over yet."""
        if self._writer is not None:
            self._writer.rollback()

    def close(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            self._reader.close()

    @property
    def failed_batches(self) -> int:
        return self._writer.failed_batches if self._writer is not None else 0

    # --- reads ------------------------------------------------------------------------------

    def search(self, query: str, *, site: str | None = None, limit: int = 10) -> list[SearchResult]:
        self.flush()  # a writer searching its own pages
        return search_index(self._reader, query, site=site, limit=limit)

    def page(self, url: str) -> dict[str, Any] | None:
        """The stored facts about ``url`` (tests, debugging)."""
        self.flush()
        with self._reader.cursor(row_factory=dict_row) as cur:
            return cur.execute("SELECT * FROM pages WHERE url = %s", (url,)).fetchone()

    def stats(self) -> dict[str, int]:
        self.flush()
        row = self._reader.execute(
            "SELECT (SELECT count(*) FROM pages WHERE has_doc),"
            " (SELECT count(*) FROM pages),"
            " (SELECT count(*) FROM pages WHERE alias_of IS NOT NULL),"
            " (SELECT count(*) FROM anchors WHERE n > 0)"
        ).fetchone()
        assert row is not None
        return dict(zip(("documents", "urls", "aliases", "anchors"), row, strict=True))

    def integrity_check(self) -> list[str]:
        """The layout's own invariants (PostgreSQL keeps its files consistent itself)."""
        self.flush()
        checks = {
            "documents of pages without has_doc":
                "SELECT count(*) FROM docs d JOIN pages p ON p.id = d.page WHERE NOT p.has_doc",
            "pages with has_doc and no document":
                "SELECT count(*) FROM pages p WHERE has_doc"
                " AND NOT EXISTS (SELECT 1 FROM docs d WHERE d.page = p.id)",
            "anchors with a negative link count": "SELECT count(*) FROM anchors WHERE n < 0",
            "outlinks naming missing anchors":
                "SELECT count(*) FROM outlinks o, unnest(o.anchor_ids) AS i(id)"
                " WHERE NOT EXISTS (SELECT 1 FROM anchors a WHERE a.id = i.id)",
        }
        problems = []
        for what, sql in checks.items():
            row = self._reader.execute(sql).fetchone()
            if row and row[0]:
                problems.append(f"{row[0]} {what}")
        return problems
