"""Searching the embedded index: the query as FTS5 ``MATCH`` text, ranking, snippets.

A search adds each page's BM25 scores from its own document and from the anchor texts of
links to it (and to its aliases, which count for their original). The query language is
parsed once in the core (:mod:`crawler.index.query`); this module only writes its tree in
FTS5's syntax.
"""

from __future__ import annotations

import sqlite3

from crawler.index.base import SearchResult, search_results
from crawler.index.query import (
    And,
    Group,
    Node,
    Not,
    Or,
    Phrase,
    Term,
    cannot_parse,
    parse_query,
    searchable,
)

__all__ = ["render_fts5", "search_index", "to_fts_query"]

_ANCHOR_WEIGHT = 0.7


def to_fts_query(query: str) -> str:
    """A user's query as FTS5 ``MATCH`` text; ``""`` when it has no word to search for.

    Every word becomes a quoted string (FTS5 refuses barewords holding punctuation, such as
    ``don't``, ``e-mail``, ``a.b``, which users type all the time), with its field filter
    and trailing ``*``; operators are written out where FTS5's own precedence would read the
    tree otherwise. Raises :class:`QuerySyntaxError` for a malformed query.
    """
    node = parse_query(query)
    return "" if node is None else render_fts5(node)


def render_fts5(node: Node) -> str:
    """``node`` in FTS5's syntax.

    FTS5 lets a bare space join phrases only, and there it binds tighter than ``NOT``: words
    side by side are written with spaces, anything else is joined by an explicit ``AND``.
    """
    if isinstance(node, Term | Phrase):
        column = f"{node.field}:" if node.field else ""
        star = "*" if isinstance(node, Term) and node.prefix else ""
        return column + '"' + node.text.replace('"', '""') + '"' + star
    if isinstance(node, Group):
        return "(" + render_fts5(node.inner) + ")"
    if isinstance(node, Or):
        return " OR ".join(render_fts5(part) for part in node.parts)
    if isinstance(node, And):
        words_only = all(isinstance(part, Term | Phrase) for part in node.parts)
        return (" " if words_only else " AND ").join(render_fts5(part) for part in node.parts)
    assert isinstance(node, Not)
    return " NOT ".join(render_fts5(part) for part in (node.positive, *node.excluded))


_SEARCH = """
    WITH hits AS (
        SELECT rowid AS pid, bm25(docs, 5.0, 1.0, 0.0) AS score, 1 AS by_text,
               0 AS by_anchor
        FROM docs WHERE docs MATCH :q
        UNION ALL
        SELECT a.target, bm25(anchor_fts, 0.0, 0.0, 1.0) * :anchor_weight, 0, 1
        FROM anchor_fts JOIN anchors a ON a.id = anchor_fts.rowid
        WHERE anchor_fts MATCH :q
    ),
    ranked AS (
        SELECT coalesce(p.alias_of, p.id) AS doc, sum(h.score) AS score,
               max(h.by_text) AS by_text, max(h.by_anchor) AS by_anchor
        FROM hits h JOIN pages p ON p.id = h.pid
        GROUP BY doc
    )
    SELECT d.id, d.url, d.title, d.site, d.has_doc, d.status, -r.score, r.by_text,
           r.by_anchor
    FROM ranked r JOIN pages d ON d.id = r.doc
    WHERE 1 {site_filter}
    ORDER BY r.score, d.id
    LIMIT :limit
"""


def search_index(
    db: sqlite3.Connection, query: str, *, site: str | None = None, limit: int = 10
) -> list[SearchResult]:
    """The best ``limit`` pages for ``query`` (see :meth:`crawler.index.base.Index.search`)."""
    fts = render_fts5(searchable(query))
    sql = _SEARCH.format(site_filter="AND d.site = :site" if site else "")
    params = {"q": fts, "site": site, "limit": limit, "anchor_weight": _ANCHOR_WEIGHT}
    try:
        rows = db.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if "fts5" in message or "column" in message or "string" in message:
            raise cannot_parse(query, message) from exc
        raise
    return search_results(
        rows,
        snippet=lambda pid: _snippet(db, pid, fts),
        anchors=lambda pid: _matching_anchors(db, pid, fts),
        aliases=lambda pid: _aliases(db, pid),
    )


def _snippet(db: sqlite3.Connection, pid: int, fts: str) -> str:
    row = db.execute(
        "SELECT snippet(docs, 1, '[', ']', '...', 24) FROM docs"
        " WHERE docs MATCH ? AND rowid = ?",
        (fts, pid),
    ).fetchone()
    return " ".join(row[0].split()) if row else ""


def _matching_anchors(db: sqlite3.Connection, pid: int, fts: str) -> list[str]:
    rows = db.execute(
        "SELECT a.anchor FROM anchor_fts JOIN anchors a ON a.id = anchor_fts.rowid"
        " JOIN pages p ON p.id = a.target"
        " WHERE anchor_fts MATCH ? AND (p.id = ? OR p.alias_of = ?)"
        " ORDER BY a.n DESC, a.id LIMIT 3",
        (fts, pid, pid),
    )
    return [r[0] for r in rows]


def _aliases(db: sqlite3.Connection, pid: int) -> list[str]:
    rows = db.execute("SELECT url FROM pages WHERE alias_of = ? ORDER BY id LIMIT 5", (pid,))
    return [r[0] for r in rows]
