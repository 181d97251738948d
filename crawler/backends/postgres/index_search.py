"""Searching the shared index: the query as ``to_tsquery`` text, ranking, snippets.

The query language is parsed once in the core (:mod:`crawler.index.query`); this module only
writes its tree as ``to_tsquery`` text, every word quoted (``to_tsquery`` splits and stems a
quoted operand as it does the text, a phrase becoming ``<->``) and weighted by its field.
Ranking: ``ts_rank`` of a page's document plus 0.7 x that of the anchor texts of links to it
(and to its aliases), where SQLite adds BM25 scores the same way.
"""

from __future__ import annotations

from typing import Any

import psycopg

from crawler.backends.postgres.index_schema import CONFIG, MAX_TSV_BODY
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

__all__ = ["render_tsquery", "search_index", "to_tsquery_text"]

_WEIGHT = {"title": "A", "body": "B", "anchor": "C"}
_ANCHOR_WEIGHT = 0.7


def to_tsquery_text(query: str) -> str:
    """A user's query as the text of a ``to_tsquery`` call; ``""`` when it has no word to
    search for. Raises :class:`QuerySyntaxError` for a malformed query."""
    node = parse_query(query)
    return "" if node is None else render_tsquery(node)


def _lexeme(text: str, field: str, star: bool = False) -> str:
    """One quoted ``to_tsquery`` operand (a word or a phrase, which it splits and stems)."""
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    suffix = ("*" if star else "") + _WEIGHT.get(field, "")
    return quoted + (":" + suffix if suffix else "")


def _fold(first: str, op: str, rest: list[str]) -> str:
    """``((first op r1) op r2)...``: left-nested, built in one pass (a query of many words
    would take quadratic time one pair of parentheses after the other)."""
    return "(" * len(rest) + first + "".join(f" {op} {r})" for r in rest)


def render_tsquery(node: Node) -> str:
    """``node`` as ``to_tsquery`` text, each operator in parentheses."""
    if isinstance(node, Term):
        return _lexeme(node.text, node.field, node.prefix)
    if isinstance(node, Phrase):
        return _lexeme(node.text, node.field)
    if isinstance(node, Group):
        return "(" + render_tsquery(node.inner) + ")"
    if isinstance(node, Or | And):
        first, *rest = (render_tsquery(part) for part in node.parts)
        return _fold(first, "|" if isinstance(node, Or) else "&", rest)
    assert isinstance(node, Not)
    return _fold(render_tsquery(node.positive), "&", ["!" + render_tsquery(part)
                                                      for part in node.excluded])


_SEARCH = f"""
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


def search_index(
    conn: psycopg.Connection[Any], query: str, *, site: str | None = None, limit: int = 10
) -> list[SearchResult]:
    """The best ``limit`` pages for ``query`` (see :meth:`crawler.index.base.Index.search`)."""
    tsq = render_tsquery(searchable(query))
    params = {"q": tsq, "site": site, "limit": limit, "aw": _ANCHOR_WEIGHT}
    try:
        rows = conn.execute(_SEARCH, params).fetchall()
    except psycopg.errors.SyntaxError as exc:
        raise cannot_parse(query, exc) from exc
    return search_results(
        rows,
        snippet=lambda pid: _snippet(conn, pid, tsq),
        anchors=lambda pid: _matching_anchors(conn, pid, tsq),
        aliases=lambda pid: _aliases(conn, pid),
    )


def _snippet(conn: psycopg.Connection[Any], pid: int, tsq: str) -> str:
    row = conn.execute(
        f"SELECT ts_headline('{CONFIG}', left(body, {MAX_TSV_BODY}),"
        f" to_tsquery('{CONFIG}', %s), 'StartSel=[, StopSel=], MaxWords=24, MinWords=8,"
        " MaxFragments=1, FragmentDelimiter=...') FROM docs WHERE page = %s",
        (tsq, pid),
    ).fetchone()
    return " ".join(row[0].split()) if row else ""


def _matching_anchors(conn: psycopg.Connection[Any], pid: int, tsq: str) -> list[str]:
    rows = conn.execute(
        f"SELECT a.anchor FROM anchors a JOIN pages p ON p.id = a.target"
        f" WHERE a.tsv @@ to_tsquery('{CONFIG}', %s) AND a.n > 0"
        " AND (p.id = %s OR p.alias_of = %s) ORDER BY a.n DESC, a.id LIMIT 3",
        (tsq, pid, pid),
    )
    return [r[0] for r in rows]


def _aliases(conn: psycopg.Connection[Any], pid: int) -> list[str]:
    rows = conn.execute("SELECT url FROM pages WHERE alias_of = %s ORDER BY id LIMIT 5", (pid,))
    return [r[0] for r in rows]
