"""The shared index: PostgreSQL full text (``tsvector`` + GIN), for several workers at once.

Chosen by ``DATABASE_URL=postgresql://...`` (``crawler/backends/registry.py``); the same guarantees
as
the embedded SQLite index (``crawler/index/base.py``), and the same layout:

* ``pages``: one row per URL known, fetched or only linked to (``alias_of``, ``has_doc``);
* ``docs``: the document of a page, its ``tsv`` generated from the title (weight A) and the
  text (weight B), under a GIN index;
* ``anchors``: one row per distinct (target page, anchor text) with the number of links using
  it, ``tsv`` of the text at weight C; ``outlinks``: per source page, the anchor ids it
  contributed (a ``bigint[]``), so a refetched page's old links are taken back.

Weights play FTS5's columns: ``title:word`` searches weight A, ``body:`` B, ``anchor:`` C, so
one query string means the same on both backends; the query language is FTS5's
(:func:`to_tsquery_text` parses it, so both backends refuse the same malformed queries).
Words are stemmed with the English Snowball stemmer and, as in FTS5, no word is a stop word
(``crawler_english``, created with the schema), so ``"the default value"`` is a phrase of three.
Ranking: ``ts_rank`` of a page's document plus 0.7 x that of the anchor texts of links to it
(and to its aliases), where SQLite adds BM25 scores the same way.

Writes: every write call only queues an operation; :meth:`PostgresIndex.commit` hands the
batch to a :class:`crawler.backends.postgres.connection.BackgroundWriter` (its own thread and
connection, one
transaction per batch) and returns at once, so the reactor never waits for PostgreSQL. Pages
added one after another are written together, a few set-based statements (arrays through
``unnest``) for up to :data:`_RUN` pages instead of ~10 round trips per page.
:meth:`flush` waits for it (``close`` and the reads do, so a writer sees its own pages).
Several workers write at once: rows are created with ``ON CONFLICT DO NOTHING``, link counts
are added (``n = n + d``) rather than overwritten, and an anchor no link uses any more keeps
its row with ``n = 0`` (deleting it could race with another worker that just counted it), which
searches and :meth:`stats` skip.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.rows import dict_row

from crawler.backends.postgres.connection import BackgroundWriter, DatabaseError, connect, safe_dsn
from crawler.backends.sqlite.index import _COLUMNS, _MAX_ANCHOR, _OPERATORS, _QUERY_HELP, _TOKEN
from crawler.index.base import (
    Index,
    IndexAccessError,
    PageDocument,
    QuerySyntaxError,
    SearchResult,
)

__all__ = ["SCHEMA_VERSION", "PostgresIndex", "to_tsquery_text"]

SCHEMA_VERSION = 1
CONFIG = "crawler_english"
_MAX_BODY = 1_000_000  # characters of text kept per page (as SQLite)
_MAX_TSV_BODY = 300_000  # characters of it in the tsvector (whose size is limited to 1 MB)
_ID_CACHE = 200_000
_RUN = 100  # pages written by one set of statements at most
_RUN_CHARS = 8_000_000  # ... and characters of their text
_WEIGHT = {"title": "A", "body": "B", "anchor": "C"}
_ANCHOR_WEIGHT = 0.7
_LOCK = 0x63726177  # advisory lock held while a writer creates the schema ("craw")

_SCHEMA = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = 'crawler_stem') THEN
        CREATE TEXT SEARCH DICTIONARY crawler_stem (TEMPLATE = snowball, Language = english);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = '{CONFIG}') THEN
        CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = english);
        ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING
            FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
            WITH crawler_stem;
    END IF;
END $$;
CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
    id BIGSERIAL PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    site TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    status INTEGER,
    fetched_at TEXT,
    visited_at TEXT,
    fingerprint TEXT,
    alias_of BIGINT,
    has_doc BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS pages_site ON pages(site);
CREATE INDEX IF NOT EXISTS pages_alias ON pages(alias_of) WHERE alias_of IS NOT NULL;
CREATE TABLE IF NOT EXISTS docs (
    page BIGINT PRIMARY KEY,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    tsv TSVECTOR GENERATED ALWAYS AS (
        setweight(to_tsvector('{CONFIG}', title), 'A')
        || setweight(to_tsvector('{CONFIG}', left(body, {_MAX_TSV_BODY})), 'B')
    ) STORED
);
CREATE INDEX IF NOT EXISTS docs_tsv ON docs USING GIN (tsv);
CREATE TABLE IF NOT EXISTS anchors (
    id BIGSERIAL PRIMARY KEY,
    target BIGINT NOT NULL,
    anchor TEXT NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    tsv TSVECTOR GENERATED ALWAYS AS (setweight(to_tsvector('{CONFIG}', anchor), 'C')) STORED,
    UNIQUE (target, anchor)
);
CREATE INDEX IF NOT EXISTS anchors_tsv ON anchors USING GIN (tsv);
CREATE TABLE IF NOT EXISTS outlinks (source BIGINT PRIMARY KEY, anchor_ids BIGINT[] NOT NULL);
"""


# --- the query language -----------------------------------------------------------------------


def _lexeme(text: str, field: str, star: bool = False) -> str:
    """One quoted ``to_tsquery`` operand (a word or a phrase, which it splits and stems)."""
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    suffix = ("*" if star else "") + _WEIGHT.get(field, "")
    return quoted + (":" + suffix if suffix else "")


class _Parser:
    """FTS5's query grammar (NOT binds tighter than AND, AND than OR; a bare space is AND),
    written out as ``to_tsquery`` text with every word quoted."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.items: list[tuple[str, str, str, bool]] = []  # (kind, text, field, prefix*)
        field = ""
        for token in _TOKEN.findall(query):
            if token.startswith('"'):
                if len(token) < 2 or not token.endswith('"'):
                    raise QuerySyntaxError(
                        f"unbalanced quote in the query {query!r}: {_QUERY_HELP}"
                    )
                if re.search(r"\w", token[1:-1]):
                    self.items.append(("term", token[1:-1], field, False))
            elif token in ("(", ")"):
                self.items.append((token, token, field, False))
            elif token in _OPERATORS:
                self.items.append(("op", token, "", False))
            elif token.endswith(":") and token[:-1].lower() in _COLUMNS:
                field = token[:-1].lower()
                continue
            else:
                column, sep, rest = token.partition(":")
                own = field
                if sep and column.lower() in _COLUMNS and rest:
                    own, token = column.lower(), rest
                star = token.endswith("*")
                word = token.rstrip("*")
                if re.search(r"\w", word):
                    self.items.append(("term", word, own, star))
            field = ""
        if field:
            raise QuerySyntaxError(
                f"{field}: needs a word, a phrase or a group after it: {_QUERY_HELP}"
            )
        self.pos = 0

    def parse(self) -> str:
        if not self.items:
            return ""
        out = self._or("")
        if self.pos < len(self.items):
            self._fail(f"unexpected {self.items[self.pos][1]!r}")
        return out

    def _fail(self, reason: str) -> None:
        raise QuerySyntaxError(f"cannot parse the query {self.query!r} ({reason}): {_QUERY_HELP}")

    def _peek(self) -> tuple[str, str, str, bool] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def _or(self, field: str) -> str:
        left = self._and(field)
        while (item := self._peek()) is not None and item[:2] == ("op", "OR"):
            self.pos += 1
            left = f"({left} | {self._and(field)})"
        return left

    def _and(self, field: str) -> str:
        left = self._not(field)
        while (item := self._peek()) is not None and item[0] != ")" and item[:2] != ("op", "OR"):
            if item[:2] == ("op", "AND"):
                self.pos += 1
            left = f"({left} & {self._not(field)})"
        return left

    def _not(self, field: str) -> str:
        left = self._primary(field)
        while (item := self._peek()) is not None and item[:2] == ("op", "NOT"):
            self.pos += 1
            left = f"({left} & !{self._primary(field)})"
        return left

    def _primary(self, field: str) -> str:
        item = self._peek()
        if item is None:
            self._fail("it ends where a word was expected")
        assert item is not None
        kind, text, own, star = item
        self.pos += 1
        if kind == "term":
            return _lexeme(text, own or field, star)
        if kind == "(":
            inner = self._or(own or field)
            closing = self._peek()
            if closing is None or closing[0] != ")":
                self._fail("a ( is never closed")
            self.pos += 1
            return f"({inner})"
        self._fail(f"{text!r} where a word was expected")
        raise AssertionError  # unreachable: _fail raises


def to_tsquery_text(query: str) -> str:
    """A user's query (FTS5 syntax, see ``crawler.backends.sqlite.index.to_fts_query``) as the text
    of
    a ``to_tsquery`` call; raises :class:`QuerySyntaxError` as SQLite would."""
    return _Parser(query).parse()


# --- the index --------------------------------------------------------------------------------


def _links(source_url: str, outlinks: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (target URL, anchor text) pairs of a page that the index keeps: text with its white
    space collapsed and cut, no empty text or target, no link to the page itself."""
    links = []
    for target_url, text in outlinks:
        anchor = " ".join((text or "").split())[:_MAX_ANCHOR]
        if anchor and target_url and target_url != source_url:
            links.append((target_url, anchor))
    return links


_Op = Callable[[psycopg.Connection[Any]], None]


class _AddPage:
    """A queued :meth:`PostgresIndex.add_page` (``commit`` writes consecutive ones together)."""

    def __init__(self, index: PostgresIndex, doc: PageDocument) -> None:
        self.index, self.doc = index, doc

    def __call__(self, c: psycopg.Connection[Any]) -> None:
        self.index._w_add_pages(c, [self.doc])


class PostgresIndex(Index):
    """PostgreSQL backend: any number of writer processes and readers on one database."""

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        if not url:
            raise IndexAccessError("the PostgreSQL index needs DATABASE_URL")
        self.url = url
        self.path = safe_dsn(url)  # what logs say the index is
        self.readonly = readonly
        try:
            self._reader = connect(url, autocommit=True)
            if readonly:
                found = (
                    self._reader.execute(
                        "SELECT value FROM index_meta WHERE key = 'schema_version'"
                    ).fetchone()
                    if self._has_schema()
                    else None
                )
                if found is None:
                    self._reader.close()
                    raise IndexAccessError(
                        f"no index in PostgreSQL at {self.path} (crawl first, or set "
                        "DATABASE_URL)"
                    )
                self._check_version(found[0])
                self._writer: BackgroundWriter | None = None
            else:
                self._create_schema()
                self._writer = BackgroundWriter(url, "index-writer", on_reset=self._reset)
        except DatabaseError as exc:
            raise IndexAccessError(str(exc)) from None
        self._ops: list[_Op] = []
        self._lock = threading.Lock()
        # writer-thread state: URL -> page id and (target, text) -> anchor id (rows are never
        # deleted, so an id once read stays right; a rolled-back batch drops both caches),
        # and per transaction the pending changes of link counts
        self._ids: dict[str, int] = {}
        self._anchor_ids: dict[tuple[int, str], int] = {}
        self._count_delta: dict[int, int] = {}

    @classmethod
    def from_settings(cls, settings: Any, *, readonly: bool = False) -> PostgresIndex:
        return cls(settings.get("DATABASE_URL") or "", readonly=readonly)

    def _has_schema(self) -> bool:
        row = self._reader.execute("SELECT to_regclass('index_meta') IS NOT NULL").fetchone()
        return bool(row and row[0])

    def _check_version(self, found: str) -> None:
        if int(found) != SCHEMA_VERSION:
            raise IndexAccessError(
                f"{self.path} has index schema {found}, this version reads {SCHEMA_VERSION}"
            )

    def _create_schema(self) -> None:
        with psycopg.ClientCursor(self._reader) as cur, self._reader.transaction():
            # two workers starting together: one creates, the other waits and finds it all
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            cur.execute(_SCHEMA)
            cur.execute(
                "INSERT INTO index_meta(key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
            row = cur.execute(
                "SELECT value FROM index_meta WHERE key = 'schema_version'"
            ).fetchone()
        assert row is not None
        self._check_version(row[0])

    # --- batches ----------------------------------------------------------------------------

    def _queue(self, op: _Op) -> None:
        if self._writer is None:
            raise IndexAccessError(f"{self.path} is open read-only")
        self._ops.append(op)

    def commit(self) -> None:
        """Hand the batch to the writer thread (one transaction) and return at once."""
        if self._writer is not None and self._ops:
            ops, self._ops = self._ops, []
            self._writer.submit([*self._runs(ops), self._flush_counts])

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
                out.append(lambda c: self._w_add_pages(c, docs))
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
        if self._writer is not None:
            self.commit()
            self._writer.flush()

    def rollback(self) -> None:
        """Drop the operations not handed over yet."""
        self._ops.clear()

    def close(self) -> None:
        try:
            if self._writer is not None:
                self.commit()
                self._writer.close()
        finally:
            self._reader.close()

    @property
    def failed_batches(self) -> int:
        return self._writer.failed if self._writer is not None else 0

    def _reset(self) -> None:
        """A transaction was rolled back: ids it created are gone."""
        self._ids.clear()
        self._anchor_ids.clear()
        self._count_delta.clear()

    # --- writes (queued) --------------------------------------------------------------------

    def add_page(self, doc: PageDocument) -> None:
        doc = PageDocument(
            doc.url, site=doc.site, title=doc.title or "", text=(doc.text or "")[:_MAX_BODY],
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
        self._queue(lambda c: self._w_add_alias(c, url, original, site, status, fetched_at))

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

    def _w_add_pages(self, c: psycopg.Connection[Any], docs: list[PageDocument]) -> None:
        """Write pages of distinct URLs as :meth:`add_page` one after another would, in a
        fixed number of statements: the rows of the pages and their link targets (each created
        with the site its first mention gives it), the documents, the pages' facts, the
        outlinks they replace, the anchors, the new outlinks."""
        wanted: dict[str, str] = {}
        links_of: list[list[tuple[str, str]]] = []
        for doc in docs:
            wanted.setdefault(doc.url, doc.site)
            links = _links(doc.url, doc.outlinks)
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

    def _w_add_alias(
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
        links = _links(source_url, outlinks)
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

    # --- reads ------------------------------------------------------------------------------

    def search(self, query: str, *, site: str | None = None, limit: int = 10) -> list[SearchResult]:
        self.flush()  # a writer searching its own pages
        tsq = to_tsquery_text(query)
        if not tsq:
            raise QuerySyntaxError(f"the query {query!r} has no words to search for")
        sql = f"""
            WITH q AS (SELECT to_tsquery('{CONFIG}', %(q)s) AS q),
            hits AS (
                SELECT d.page AS pid, ts_rank('{{0, 0, 0.2, 1.0}}', d.tsv, q.q) AS score,
                       1 AS by_text, 0 AS by_anchor
                FROM docs d, q WHERE d.tsv @@ q.q
                UNION ALL
                SELECT a.target, %(aw)s * ts_rank('{{0, 1.0, 0, 0}}', a.tsv, q.q), 0, 1
                FROM anchors a, q WHERE a.tsv @@ q.q AND a.n > 0
            ),
            ranked AS (
                SELECT coalesce(p.alias_of, p.id) AS doc, sum(h.score) AS score,
                       max(h.by_text) AS by_text, max(h.by_anchor) AS by_anchor
                FROM hits h JOIN pages p ON p.id = h.pid
                GROUP BY 1
            )
            SELECT d.id, d.url, d.title, d.site, d.has_doc, d.status, r.score, r.by_text,
                   r.by_anchor
            FROM ranked r JOIN pages d ON d.id = r.doc
            WHERE %(site)s::text IS NULL OR d.site = %(site)s
            ORDER BY r.score DESC, d.id
            LIMIT %(limit)s
        """
        params = {"q": tsq, "site": site, "limit": limit, "aw": _ANCHOR_WEIGHT}
        try:
            rows = self._reader.execute(sql, params).fetchall()
        except psycopg.errors.SyntaxError as exc:
            raise QuerySyntaxError(
                f"cannot parse the query {query!r} ({exc}): {_QUERY_HELP}"
            ) from exc
        results = []
        for pid, url, title, psite, has_doc, status, score, by_text, by_anchor in rows:
            results.append(
                SearchResult(
                    url=url,
                    title=title,
                    snippet=self._snippet(pid, tsq) if by_text else "",
                    score=float(score),
                    site=psite,
                    fetched=bool(has_doc),
                    matched_text=bool(by_text),
                    matched_anchor=bool(by_anchor),
                    anchors=self._matching_anchors(pid, tsq) if by_anchor else [],
                    aliases=[
                        u
                        for (u,) in self._reader.execute(
                            "SELECT url FROM pages WHERE alias_of = %s ORDER BY id LIMIT 5",
                            (pid,),
                        )
                    ],
                    status=status,
                )
            )
        return results

    def _snippet(self, pid: int, tsq: str) -> str:
        row = self._reader.execute(
            f"SELECT ts_headline('{CONFIG}', left(body, {_MAX_TSV_BODY}),"
            f" to_tsquery('{CONFIG}', %s), 'StartSel=[, StopSel=], MaxWords=24, MinWords=8,"
            " MaxFragments=1, FragmentDelimiter=...') FROM docs WHERE page = %s",
            (tsq, pid),
        ).fetchone()
        return " ".join(row[0].split()) if row else ""

    def _matching_anchors(self, pid: int, tsq: str) -> list[str]:
        rows = self._reader.execute(
            f"SELECT a.anchor FROM anchors a JOIN pages p ON p.id = a.target"
            f" WHERE a.tsv @@ to_tsquery('{CONFIG}', %s) AND a.n > 0"
            " AND (p.id = %s OR p.alias_of = %s) ORDER BY a.n DESC, a.id LIMIT 3",
            (tsq, pid, pid),
        )
        return [r[0] for r in rows]

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
