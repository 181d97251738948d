"""The embedded index's file: its tables, and opening it (a writer creates it, a reader only reads).

Layout (``SCHEMA_VERSION`` 1):

* ``pages``: one row per URL the index knows, fetched or only linked to; ``alias_of`` points a
  duplicate at its original; ``has_doc`` says whether it has a document.
* ``docs``: FTS5 table of documents (``title``, ``body``), ``rowid`` = ``pages.id``.
* ``anchors``: one row per distinct (target page, anchor text) with the number of links that
  use it, indexed by the FTS5 table ``anchor_fts`` (external content, kept in sync by
  triggers). Nav links repeated on every page of a site are one row with a large count, not
  thousands.
* ``outlinks``: per source page, the packed ids of the anchors it contributed, so a refetched
  page's old links can be taken back (8 bytes per link instead of a row per link).

Both FTS tables have the same columns (``title``, ``body``, ``anchor``, the fields of the query
language, :data:`crawler.index.query.FIELDS`) so one query string works on both and
``title:``/``anchor:`` filters mean the same everywhere.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawler.index.base import IndexAccessError

__all__ = ["SCHEMA_VERSION", "open_index_file"]

SCHEMA_VERSION = 1
_TOKENIZER = "porter unicode61 remove_diacritics 2"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    site TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    status INTEGER,
    fetched_at TEXT,
    visited_at TEXT,
    fingerprint TEXT,
    alias_of INTEGER,
    has_doc INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS pages_site ON pages(site);
CREATE INDEX IF NOT EXISTS pages_alias ON pages(alias_of) WHERE alias_of IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(title, body, anchor, tokenize='{_TOKENIZER}');
CREATE TABLE IF NOT EXISTS anchors (
    id INTEGER PRIMARY KEY,
    target INTEGER NOT NULL,
    anchor TEXT NOT NULL,
    n INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '',
    UNIQUE (target, anchor)
);
CREATE VIRTUAL TABLE IF NOT EXISTS anchor_fts USING fts5(
    title, body, anchor, content='anchors', content_rowid='id', tokenize='{_TOKENIZER}'
);
CREATE TRIGGER IF NOT EXISTS anchors_ai AFTER INSERT ON anchors BEGIN
    INSERT INTO anchor_fts(rowid, title, body, anchor) VALUES (new.id, '', '', new.anchor);
END;
CREATE TRIGGER IF NOT EXISTS anchors_ad AFTER DELETE ON anchors BEGIN
    INSERT INTO anchor_fts(anchor_fts, rowid, title, body, anchor)
        VALUES ('delete', old.id, '', '', old.anchor);
END;
CREATE TABLE IF NOT EXISTS outlinks (source INTEGER PRIMARY KEY, anchor_ids BLOB NOT NULL);
"""


def open_index_file(path: str, *, readonly: bool) -> sqlite3.Connection:
    """A connection (autocommit: the caller opens transactions) to the index at ``path``.

    A writer creates the file, its folder and the tables when missing, in WAL mode so readers
    go on reading while it writes; a reader opens the file read-only and never creates it.
    Raises :class:`IndexAccessError` naming the file.
    """
    try:
        if readonly:
            if not Path(path).exists():
                raise IndexAccessError(f"no index at {path} (crawl first, or set INDEX_PATH)")
            uri = Path(path).resolve().as_uri() + "?mode=ro"
            return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a killed process never corrupts the file; only a power cut may
        # lose the last commits. FULL would fsync every commit.
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        try:
            _check_version(db, path)
        except IndexAccessError:
            db.close()
            raise
        return db
    except sqlite3.Error as exc:
        raise IndexAccessError(f"cannot open the index {path}: {exc}") from exc


def _check_version(db: sqlite3.Connection, path: str) -> None:
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        db.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
    elif int(row[0]) != SCHEMA_VERSION:
        raise IndexAccessError(
            f"{path} has index schema {row[0]}, this version reads {SCHEMA_VERSION}"
        )
