"""The shared index's tables in PostgreSQL, created by the first writer, checked by everyone.

The layout is the embedded SQLite index's (``crawler/backends/sqlite/index_schema.py``):

* ``pages``: one row per URL known, fetched or only linked to (``alias_of``, ``has_doc``);
* ``docs``: the document of a page, its ``tsv`` generated from the title (weight A) and the
  text (weight B), under a GIN index;
* ``anchors``: one row per distinct (target page, anchor text) with the number of links using
  it, ``tsv`` of the text at weight C; ``outlinks``: per source page, the anchor ids it
  contributed (a ``bigint[]``), so a refetched page's old links are taken back.

Weights play FTS5's columns (``title:word`` searches weight A, ``body:`` B, ``anchor:`` C).
Words are stemmed with the English Snowball stemmer and, as in FTS5, no word is a stop word
(the text search configuration :data:`CONFIG`, created with the tables), so
``"the default value"`` is a phrase of three.
"""

from __future__ import annotations

from typing import Any

import psycopg

from crawler.index.base import IndexAccessError

__all__ = [
    "CONFIG",
    "MAX_TSV_BODY",
    "SCHEMA_VERSION",
    "check_version",
    "create_schema",
    "schema",
    "stored_version",
]

SCHEMA_VERSION = 1
CONFIG = "crawler_english"
MAX_TSV_BODY = 300_000  # characters of a page's text in its tsvector (limited to 1 MB)
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
        || setweight(to_tsvector('{CONFIG}', left(body, {MAX_TSV_BODY})), 'B')
    ) STORED
)@DOCS@;
CREATE INDEX IF NOT EXISTS docs_tsv ON docs USING GIN (tsv);
CREATE TABLE IF NOT EXISTS anchors (
    id BIGSERIAL@ANCHOR_ID@,
    target BIGINT NOT NULL,
    anchor TEXT NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    tsv TSVECTOR GENERATED ALWAYS AS (setweight(to_tsvector('{CONFIG}', anchor), 'C')) STORED,
    UNIQUE (target, anchor)@ANCHOR_KEY@
)@ANCHORS@;
CREATE INDEX IF NOT EXISTS anchors_tsv ON anchors USING GIN (tsv);
CREATE TABLE IF NOT EXISTS outlinks (
    source BIGINT PRIMARY KEY, anchor_ids BIGINT[] NOT NULL
)@OUTLINKS@;
"""

# the index's big tables and the column each is hash-partitioned on (DATABASE_PARTITIONS)
PARTITIONED = {"docs": "page", "anchors": "target", "outlinks": "source"}


def schema(partitions: int = 0) -> str:
    """The tables; with ``partitions`` > 0 (``DATABASE_PARTITIONS``) the big ones (documents,
    anchors, outlinks: all but a few bytes per page) are split into that many hash partitions
    of their page id (``<table>_p<i>``), so a billion-page index is spread over tables that
    vacuum, index and move one at a time. PostgreSQL wants the partition key in every unique
    key: an anchor's primary key becomes (id, target). ``pages`` (URL -> id, small rows)
    stays one table. Applies when the tables are created."""
    if partitions <= 0:
        text = _SCHEMA.replace("@ANCHOR_ID@", " PRIMARY KEY").replace("@ANCHOR_KEY@", "")
        for table in PARTITIONED:
            text = text.replace(f"@{table.upper()}@", "")
        return text
    text = _SCHEMA.replace("@ANCHOR_ID@", "")
    text = text.replace("@ANCHOR_KEY@", ",\n    PRIMARY KEY (id, target)")
    for table, column in PARTITIONED.items():
        parts = "".join(
            f";\nCREATE TABLE IF NOT EXISTS {table}_p{i} PARTITION OF {table}"
            f" FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
            for i in range(partitions)
        )
        text = text.replace(f"@{table.upper()}@", f" PARTITION BY HASH ({column}){parts}")
    return text


def stored_version(conn: psycopg.Connection[Any]) -> str | None:
    """The schema version the database holds; ``None`` when it holds no index."""
    row = conn.execute("SELECT to_regclass('index_meta') IS NOT NULL").fetchone()
    if not (row and row[0]):
        return None
    found = conn.execute("SELECT value FROM index_meta WHERE key = 'schema_version'").fetchone()
    return None if found is None else str(found[0])


def check_version(found: str, where: str) -> None:
    """Refuse an index written by another version of the layout."""
    if int(found) != SCHEMA_VERSION:
        raise IndexAccessError(
            f"{where} has index schema {found}, this version reads {SCHEMA_VERSION}"
        )


def create_schema(conn: psycopg.Connection[Any], where: str, partitions: int = 0) -> None:
    """Create what is missing (``conn`` in autocommit) and check the version found
    (``partitions``: see :func:`schema`)."""
    with psycopg.ClientCursor(conn) as cur, conn.transaction():
        # two workers starting together: one creates, the other waits and finds it all
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        cur.execute(schema(partitions))
        cur.execute(
            "INSERT INTO index_meta(key, value) VALUES ('schema_version', %s)"
            " ON CONFLICT (key) DO NOTHING",
            (str(SCHEMA_VERSION),),
        )
        row = cur.execute("SELECT value FROM index_meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    check_version(row[0], where)
