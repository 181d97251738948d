"""The shared index's batched writer: writes queued on the caller's thread, written together
on a thread of their own.

Every write call of :class:`crawler.backends.postgres.index.PostgresIndex` only queues an
operation; :meth:`IndexWriter.commit` hands the batch to a
:class:`crawler.backends.postgres.connection.BackgroundWriter` (its own thread and connection,
one transaction per batch) and returns at once, so the reactor never waits for PostgreSQL.
Pages added one after another are written together, a few set-based statements (arrays through
``unnest``) for up to :data:`_RUN` pages instead of ~10 round trips per page.

Several workers write at once: rows are created with ``ON CONFLICT DO NOTHING``, link counts
are added (``n = n + d``) rather than overwritten, and an anchor no link uses any more keeps
its row with ``n = 0`` (deleting it could race with another worker that just counted it),
which searches and statistics skip. Rows are created in key order, so two workers lock them
in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import psycopg

from crawler.backends.postgres.connection import BackgroundWriter
from crawler.index.base import MAX_BODY, PageDocument, indexed_links

__all__ = ["IndexWriter"]

_ID_CACHE = 200_000
_RUN = 100  # pages written by one set of statements at most
_RUN_CHARS = 8_000_000  # ... and characters of their text

_Op = Callable[[psycopg.Connection[Any]], None]


class _AddPage:
    """A queued :meth:`IndexWriter.add_page` (``commit`` writes consecutive ones together)."""

    def __init__(self, writer: IndexWriter, doc: PageDocument) -> None:
        self.writer, self.doc = writer, doc

    def __call__(self, c: psycopg.Connection[Any]) -> None:
        self.writer._write_pages(c, [self.doc])


class IndexWriter:
    """The write side of one :class:`~crawler.backends.postgres.index.PostgresIndex`: the
    queue of operations on the caller's thread, the statements and their caches on the
    writer thread."""

    def __init__(self, url: str) -> None:
        self._ops: list[_Op] = []
        self._thread = BackgroundWriter(url, "index-writer", on_reset=self._reset)
        # writer-thread state: URL -> page id and (target, text) -> anchor id (rows are never
        # deleted, so an id once read stays right; a rolled-back batch drops both caches),
        # and per transaction the pending changes of link counts
        self._ids: dict[str, int] = {}
        self._anchor_ids: dict[tuple[int, str], int] = {}
        self._count_delta: dict[int, int] = {}

    # --- batches ----------------------------------------------------------------------------

    def _queue(self, op: _Op) -> None:
        self._ops.append(op)

    def commit(self) -> None:
        """Hand the batch to the writer thread (one transaction) and return at once."""
        if self._ops:
            ops, self._ops = self._ops, []
            self._thread.submit([*self._runs(ops), self._flush_counts])

    def _runs(self, ops: list[_Op]) -> list[_Op]:
        """``ops`` with each run of consecutive :class:`_AddPage` made one call (a run ends
        before a URL it already holds, so a page added twice is written twice, in order)."""
        out: list[_Op] = []
        run: list[PageDocument] = []
        urls: set[str] = set()
        chars = 0

        def close() -> None:
            if run:
                docs = list(run)
                out.append(lambda c: self._write_pages(c, docs))
                run.clear()
                urls.clear()

        for op in ops:
            if not isinstance(op, _AddPage):
                close()
                out.append(op)
                continue
            doc = op.doc
            if doc.url in urls or len(run) >= _RUN or chars + len(doc.text) > _RUN_CHARS:
                close()
                chars = 0
            run.append(doc)
            urls.add(doc.url)
            chars += len(doc.text)
        close()
        return out

    def flush(self) -> None:
        """Commit, and wait until every batch is written."""
        self.commit()
        self._thread.flush()

    def rollback(self) -> None:
        """Drop the operations not handed over yet."""
        self._ops.clear()

    def close(self) -> None:
        """Commit, write everything and stop the writer thread."""
        self.commit()
        self._thread.close()

    @property
    def failed_batches(self) -> int:
        return self._thread.failed

    def _reset(self) -> None:
        """A transaction was rolled back: ids it created are gone."""
        self._ids.clear()
        self._anchor_ids.clear()
        self._count_delta.clear()

    # --- writes (queued) --------------------------------------------------------------------

    def add_page(self, doc: PageDocument) -> None:
        doc = PageDocument(
            doc.url, site=doc.site, title=doc.title or "", text=(doc.text or "")[:MAX_BODY],
            status=doc.status, fetched_at=doc.fetched_at, fingerprint=doc.fingerprint,
            outlinks=list(doc.outlinks),
        )
        self._queue(_AddPage(self, doc))

    def add_alias(
        self,
        url: str,
        original: str,
        *,
        site: str = "",
        status: int | None = None,
        fetched_at: str | None = None,
    ) -> None:
        self._queue(lambda c: self._write_alias(c, url, original, site, status, fetched_at))

    def record_visit(self, url: str, fetched_at: str | None, status: int | None) -> None:
        def op(c: psycopg.Connection[Any]) -> None:
            c.execute(
                "UPDATE pages SET visited_at = %s, status = coalesce(%s, status) WHERE id = %s",
                (fetched_at, status, self._page_id(c, url)),
            )

        self._queue(op)

    def remove_page(
        self, url: str, *, status: int | None = None, fetched_at: str | None = None
    ) -> None:
        def op(c: psycopg.Connection[Any]) -> None:
            pid = self._page_id(c, url)
            c.execute("DELETE FROM docs WHERE page = %s", (pid,))
            c.execute(
                "UPDATE pages SET has_doc = FALSE, status = coalesce(%s, status),"
                " visited_at = coalesce(%s, visited_at) WHERE id = %s",
                (status, fetched_at, pid),
            )

        self._queue(op)

    def set_links(self, url: str, outlinks: Iterable[tuple[str, str]], site: str = "") -> None:
        links = list(outlinks)
        self._queue(lambda c: self._set_links(c, self._page_id(c, url, site), url, links, site))

    # --- the writer thread ------------------------------------------------------------------

    def _page_ids(self, c: psycopg.Connection[Any], wanted: dict[str, str]) -> None:
        """Make sure every URL in ``wanted`` (URL -> site for a new row) has a row and its id
        is in the cache: two statements for all of them, in URL order (so two workers lock
        new rows in the same order)."""
        missing = sorted(u for u in wanted if u not in self._ids)
        if not missing:
            return
        if len(self._ids) + len(missing) > _ID_CACHE:
            self._ids.clear()
        c.execute(
            "INSERT INTO pages(url, site) SELECT * FROM unnest(%s::text[], %s::text[])"
            " ON CONFLICT (url) DO NOTHING",
            (missing, [wanted[u] for u in missing]),
        )
        for url, pid in c.execute("SELECT url, id FROM pages WHERE url = ANY(%s)", (missing,)):
            self._ids[url] = pid

    def _page_id(self, c: psycopg.Connection[Any], url: str, site: str = "") -> int:
        self._page_ids(c, {url: site})
        return self._ids[url]

    def _write_pages(self, c: psycopg.Connection[Any], docs: list[PageDocument]) -> None:
        """Write pages of distinct URLs as :meth:`add_page` one after another would, in a
        fixed number of statements: the rows of the pages and their link targets (each created
        with the site its first mention gives it), the documents, the pages' facts, the
        outlinks they replace, the anchors, the new outlinks."""
        wanted: dict[str, str] = {}
        links_of: list[list[tuple[str, str]]] = []
        for doc in docs:
            wanted.setdefault(doc.url, doc.site)
            links = indexed_links(doc.url, doc.outlinks)
            host = urlsplit(doc.url).hostname
            for target_url, _ in links:
                if target_url not in wanted:
                    same = urlsplit(target_url).hostname == host
                    wanted[target_url] = doc.site if same else ""
            links_of.append(links)
        self._page_ids(c, wanted)
        pids = [self._ids[doc.url] for doc in docs]
        c.execute(
            "INSERT INTO docs(page, title, body)"
            " SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[]) ON CONFLICT (page)"
            " DO UPDATE SET title = excluded.title, body = excluded.body",
            (pids, [d.title for d in docs], [d.text for d in docs]),
        )
        c.execute(
            "UPDATE pages SET site = k.site, title = k.title, status = k.status,"
            " fetched_at = k.fetched_at, visited_at = k.fetched_at, fingerprint = k.fingerprint,"
            " alias_of = NULL, has_doc = TRUE"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::int[], %s::text[],"
            " %s::text[]) AS k(id, site, title, status, fetched_at, fingerprint)"
            " WHERE pages.id = k.id",
            (pids, [d.site for d in docs], [d.title for d in docs], [d.status for d in docs],
             [d.fetched_at for d in docs], [d.fingerprint for d in docs]),
        )
        self._replace_links(c, pids, links_of)

    def _replace_links(
        self, c: psycopg.Connection[Any], sources: list[int],
        links_of: list[list[tuple[str, str]]],
    ) -> None:
        """Take back the anchors each of ``sources`` (distinct pages) contributed before, then
        add its new ones (``links_of``: (target URL, anchor text), targets already in the id
        cache): one statement each for the old outlinks, the anchors, the new outlinks."""
        delta = self._count_delta
        old = set()
        for source, anchor_ids in c.execute(
            "SELECT source, anchor_ids FROM outlinks WHERE source = ANY(%s)", (sources,)
        ):
            old.add(source)
            for anchor_id in anchor_ids:
                delta[anchor_id] = delta.get(anchor_id, 0) - 1
        keys_of = [list(dict.fromkeys((self._ids[u], a) for u, a in links))  # once per page
                   for links in links_of]
        self._anchor_ids_for(c, [k for keys in keys_of for k in keys])
        rows: tuple[list[int], list[int], list[int]] = ([], [], [])
        gone = []
        for source, keys in zip(sources, keys_of, strict=True):
            for n, key in enumerate(keys):
                anchor_id = self._anchor_ids[key]
                delta[anchor_id] = delta.get(anchor_id, 0) + 1
                rows[0].append(source)
                rows[1].append(anchor_id)
                rows[2].append(n)
            if not keys and source in old:
                gone.append(source)
        if rows[0]:
            c.execute(
                "INSERT INTO outlinks(source, anchor_ids)"
                " SELECT k.s, array_agg(k.a ORDER BY k.n)"
                " FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS k(s, a, n) GROUP BY k.s"
                " ON CONFLICT (source) DO UPDATE SET anchor_ids = excluded.anchor_ids",
                rows,
            )
        if gone:
            c.execute("DELETE FROM outlinks WHERE source = ANY(%s)", (gone,))

    def _write_alias(
        self,
        c: psycopg.Connection[Any],
        url: str,
        original: str,
        site: str,
        status: int | None,
        fetched_at: str | None,
    ) -> None:
        if url == original:
            return
        target = self._page_id(c, original, site)
        row = c.execute("SELECT alias_of FROM pages WHERE id = %s", (target,)).fetchone()
        if row and row[0] is not None:
            target = row[0]  # the original became an alias since: point at its root
        pid = self._page_id(c, url, site)
        if pid == target:
            return
        c.execute("DELETE FROM docs WHERE page = %s", (pid,))
        c.execute(
            "UPDATE pages SET site = %s, status = %s, fetched_at = %s, visited_at = %s,"
            " alias_of = %s, has_doc = FALSE WHERE id = %s",
            (site, status, fetched_at, fetched_at, target, pid),
        )
        c.execute("UPDATE pages SET alias_of = %s WHERE alias_of = %s", (target, pid))
        self._set_links(c, pid, url, (), site)

    def _set_links(
        self,
        c: psycopg.Connection[Any],
        source: int,
        source_url: str,
        outlinks: Iterable[tuple[str, str]],
        site: str,
    ) -> None:
        """Take back the anchors ``source`` contributed before, then add the new ones."""
        links = indexed_links(source_url, outlinks)
        host = urlsplit(source_url).hostname
        targets: dict[str, str] = {}
        for target_url, _ in links:
            if target_url not in targets:
                targets[target_url] = site if urlsplit(target_url).hostname == host else ""
        self._page_ids(c, targets)
        self._replace_links(c, [source], [links])

    def _anchor_ids_for(self, c: psycopg.Connection[Any], keys: list[tuple[int, str]]) -> None:
        missing = sorted({k for k in keys if k not in self._anchor_ids})
        if not missing:
            return
        if len(self._anchor_ids) + len(missing) > _ID_CACHE:
            self._anchor_ids.clear()
        targets = [t for t, _ in missing]
        texts = [a for _, a in missing]
        c.execute(
            "INSERT INTO anchors(target, anchor) SELECT * FROM unnest(%s::bigint[], %s::text[])"
            " ON CONFLICT (target, anchor) DO NOTHING",
            (targets, texts),
        )
        rows = c.execute(
            "SELECT a.id, a.target, a.anchor FROM anchors a"
            " JOIN unnest(%s::bigint[], %s::text[]) AS k(target, anchor)"
            " ON a.target = k.target AND a.anchor = k.anchor",
            (targets, texts),
        )
        for anchor_id, target, anchor in rows:
            self._anchor_ids[(target, anchor)] = anchor_id

    def _flush_counts(self, c: psycopg.Connection[Any]) -> None:
        """Last call of every batch: add the link counts (in id order, so two workers lock
        anchors in the same order)."""
        changed = sorted((i, d) for i, d in self._count_delta.items() if d)
        if changed:
            c.execute(
                "UPDATE anchors SET n = anchors.n + k.d"
                " FROM unnest(%s::bigint[], %s::int[]) AS k(id, d) WHERE anchors.id = k.id",
                ([i for i, _ in changed], [d for _, d in changed]),
            )
        self._count_delta.clear()
