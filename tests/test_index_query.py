"""The search query language: one parser (``crawler/index/query.py``), two renderings.

Tables of queries with the tree the parser makes, the FTS5 and ``to_tsquery`` texts the two
backends write from it, and the messages of malformed queries; hostile input (unbalanced
quotes, lone operators, huge and deeply nested queries, non-ASCII, NUL) is refused with a
:class:`QuerySyntaxError` or answered, never a crash. Random queries then go to the real
engines (an FTS5 table, PostgreSQL's ``to_tsquery``), which must accept every rendering and
find the same rows with it; and both index backends answer alike the queries on which they
used to disagree."""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path

import psycopg
import pytest

from crawler.backends.postgres.index import PostgresIndex
from crawler.backends.postgres.index_search import render_tsquery, to_tsquery_text
from crawler.backends.sqlite.index import SQLiteIndex
from crawler.backends.sqlite.index_search import render_fts5, to_fts_query
from crawler.index import PageDocument, QuerySyntaxError
from crawler.index.query import (
    MAX_NESTING,
    MAX_WORDS,
    QUERY_HELP,
    And,
    Group,
    Not,
    Or,
    Phrase,
    Term,
    parse_query,
)
from tests.pg_support import pg_url  # noqa: F401

a, b, c = Term("a"), Term("b"), Term("c")

PARSED = [
    ("e-mail", Term("e-mail")),
    ("it's", Term("it's")),
    ("crawl*", Term("crawl", prefix=True)),
    ("robo**", Term("robo", prefix=True)),
    ('"seed pages"', Phrase("seed pages")),
    ('"seed pages"*', Phrase("seed pages")),  # no prefix phrases: the * is lone punctuation
    ("title:foo", Term("foo", "title")),
    ("Title:Foo", Term("Foo", "title")),
    ("title: foo", Term("foo", "title")),
    ("title: body: foo", Term("foo", "body")),  # the last field written wins
    ("title: - foo", Term("foo", "title")),  # lone punctuation is as if absent
    ("foo:bar", Term("foo:bar")),  # not a field: a word
    ("title:body:seed", Term("body:seed", "title")),
    ('title:"a b" c', And((Phrase("a b", "title"), c))),
    ("a b c", And((a, b, c))),
    ("a AND b c", And((a, b, c))),
    ("a and b", And((a, Term("and"), b))),  # operators only in capitals
    ("a OR b c", Or((a, And((b, c))))),
    ("a b OR c", Or((And((a, b)), c))),
    ("a NOT b c", And((Not(a, (b,)), c))),  # NOT binds tighter than AND
    ("a NOT b NOT c", Not(a, (b, c))),
    ("a NOT (b c)", Not(a, (Group(And((b, c))),))),
    ("(a OR b) c", And((Group(Or((a, b))), c))),
    ("((a))", Group(Group(a))),
    ("anchor:(x OR y) z",
     And((Group(Or((Term("x", "anchor"), Term("y", "anchor")))), Term("z")))),
    ("title:(a body:b)", Group(And((Term("a", "title"), Term("b", "body"))))),
    ("title:(a (b))", Group(And((Term("a", "title"), Group(Term("b", "title")))))),
    ("- & it's", Term("it's")),
    ('seed "-" ""', Term("seed")),  # a phrase without a word matches like nothing there
    ('title:"-" seed', Term("seed")),  # ... and takes its field with it
    ('"seed"pages', And((Phrase("seed"), Term("pages")))),
    ("seed\tpages\n", And((Term("seed"), Term("pages")))),
    ("über 日本語 naïve", And((Term("über"), Term("日本語"), Term("naïve")))),
    ("emoji 🕷", Term("emoji")),  # no letter in it: dropped
    ("NEAR (a b)", And((Term("NEAR"), Group(And((a, b)))))),  # FTS5's NEAR is just a word
    ("+a ^b", And((Term("+a"), Term("^b")))),
    ("", None),
    ("   ", None),
    ("- & !!", None),
    ('"" "-"', None),
    ("**", None),
]


@pytest.mark.parametrize(("query", "tree"), PARSED)
def test_parse(query: str, tree: object) -> None:
    assert parse_query(query) == tree


RENDERED = [
    # query, FTS5 MATCH text, to_tsquery text
    ("e-mail", '"e-mail"', "'e-mail'"),
    ("it's", '"it\'s"', "'it''s'"),
    ('title:foo bar* "a b" OR x',
     'title:"foo" "bar"* "a b" OR "x"', "((('foo':A & 'bar':*) & 'a b') | 'x')"),
    ("body:robot*", 'body:"robot"*', "'robot':*B"),
    ("anchor:spider", 'anchor:"spider"', "'spider':C"),
    ("a NOT b c", '"a" NOT "b" AND "c"', "(('a' & !'b') & 'c')"),
    ("a NOT b NOT c", '"a" NOT "b" NOT "c"', "(('a' & !'b') & !'c')"),
    ("a OR b c", '"a" OR "b" "c"', "('a' | ('b' & 'c'))"),
    ("a AND b OR c", '"a" "b" OR "c"', "(('a' & 'b') | 'c')"),
    ("anchor:(x OR y) z",
     '(anchor:"x" OR anchor:"y") AND "z"', "((('x':C | 'y':C)) & 'z')"),
    ("seed NOT (robot OR frontier)",
     '"seed" NOT ("robot" OR "frontier")', "('seed' & !(('robot' | 'frontier')))"),
    ("(seed) (pages)", '("seed") AND ("pages")', "(('seed') & ('pages'))"),
    ("NEAR (a b)", '"NEAR" AND ("a" "b")', "('NEAR' & (('a' & 'b')))"),
    ("seed\\", '"seed\\"', "'seed\\\\'"),
    ("'seed'", '"\'seed\'"', "'''seed'''"),
    ("über straße", '"über" "straße"', "('über' & 'straße')"),
    ("- &", "", ""),
]


@pytest.mark.parametrize(("query", "fts", "tsq"), RENDERED)
def test_render(query: str, fts: str, tsq: str) -> None:
    assert to_fts_query(query) == fts
    assert to_tsquery_text(query) == tsq


def _cannot(query: str, reason: str) -> str:
    return f"cannot parse the query {query!r} ({reason}): {QUERY_HELP}"


REFUSED = [
    ('say "hi', f"unbalanced quote in the query 'say \"hi': {QUERY_HELP}"),
    ('"', f"unbalanced quote in the query '\"': {QUERY_HELP}"),
    ('a "b" "c', f"unbalanced quote in the query 'a \"b\" \"c': {QUERY_HELP}"),
    ("body:", f"body: needs a word, a phrase or a group after it: {QUERY_HELP}"),
    ("seed title: -", f"title: needs a word, a phrase or a group after it: {QUERY_HELP}"),
    ("a AND", _cannot("a AND", "it ends where a word was expected")),
    ("a OR", _cannot("a OR", "it ends where a word was expected")),
    ("a NOT", _cannot("a NOT", "it ends where a word was expected")),
    ("(", _cannot("(", "it ends where a word was expected")),
    ("(a", _cannot("(a", "a ( is never closed")),
    ("((a)", _cannot("((a)", "a ( is never closed")),
    ("a)", _cannot("a)", "unexpected ')'")),
    ("a)(", _cannot("a)(", "unexpected ')'")),
    (")", _cannot(")", "')' where a word was expected")),
    ("()", _cannot("()", "')' where a word was expected")),
    ("(a OR)", _cannot("(a OR)", "')' where a word was expected")),
    ("NOT a", _cannot("NOT a", "'NOT' where a word was expected")),
    ("AND", _cannot("AND", "'AND' where a word was expected")),
    ("OR", _cannot("OR", "'OR' where a word was expected")),
    ("a OR OR b", _cannot("a OR OR b", "'OR' where a word was expected")),
    ("a AND AND b", _cannot("a AND AND b", "'AND' where a word was expected")),
    ("x NOT NOT y", _cannot("x NOT NOT y", "'NOT' where a word was expected")),
    ("title: OR seed", _cannot("title: OR seed", "'OR' where a word was expected")),
    ("seed\x00pages", _cannot("seed\x00pages", "it holds a NUL character")),
    ("seed \udcff", _cannot("seed \udcff", "it is not valid Unicode text")),
]


@pytest.mark.parametrize(("query", "message"), REFUSED)
def test_refused_with_the_same_message_everywhere(query: str, message: str) -> None:
    for parse in (parse_query, to_fts_query, to_tsquery_text):
        with pytest.raises(QuerySyntaxError) as info:
            parse(query)
        assert str(info.value) == message


def test_huge_queries() -> None:
    words = " ".join(f"w{i}" for i in range(MAX_WORDS))
    tree = parse_query(words)
    assert isinstance(tree, And) and len(tree.parts) == MAX_WORDS
    assert render_tsquery(tree).startswith("(" * (MAX_WORDS - 1) + "'w0' & 'w1')")
    assert render_fts5(tree).count('"') == 2 * MAX_WORDS
    with pytest.raises(QuerySyntaxError, match=f"more than {MAX_WORDS} words"):
        parse_query(words + " one-more")
    with pytest.raises(QuerySyntaxError, match=f"more than {MAX_WORDS} words"):
        parse_query('"' + "w " * (MAX_WORDS + 1) + '"')  # words of phrases count too
    nested = "(" * MAX_NESTING + "a" + ")" * MAX_NESTING
    assert to_tsquery_text(nested) == "(" * MAX_NESTING + "'a'" + ")" * MAX_NESTING
    for deeper in ("(" + nested + ")", "a NOT (" * (MAX_NESTING + 1), "(" * 100_000):
        with pytest.raises(QuerySyntaxError, match=f"more than {MAX_NESTING} nested"):
            parse_query(deeper)
    # a huge query is quoted back cut, not whole
    huge = "x" * 1_000_000 + ")"
    with pytest.raises(QuerySyntaxError, match="unexpected") as info:
        parse_query(huge)
    assert len(str(info.value)) < 1000 and "1000001 characters" in str(info.value)
    # one huge word or phrase is one word: the engines cut it themselves
    assert parse_query("y" * 1_000_000) == Term("y" * 1_000_000)
    assert parse_query("- " * 100_000) is None


# --- the real engines -----------------------------------------------------------------------

VOCABULARY = ["red", "fox", "dog", "cat", "owl", "sun"]
FIELD_GAP = 100  # positions between fields, so no phrase runs from one field into the next


def _rows(rng: random.Random) -> list[tuple[str, str, str]]:
    def text() -> str:
        return " ".join(rng.choices(VOCABULARY, k=rng.randrange(0, 5)))

    return [(text(), text(), text()) for _ in range(60)]


def _random_query(rng: random.Random) -> str:
    pieces = []
    for _ in range(rng.randrange(1, 9)):
        kind = rng.random()
        word = rng.choice(VOCABULARY)
        if kind < 0.35:
            pieces.append(word)
        elif kind < 0.42:
            pieces.append(word[:2] + "*")
        elif kind < 0.5:
            pieces.append(f'"{word} {rng.choice(VOCABULARY)}"')
        elif kind < 0.6:
            pieces.append(rng.choice(["title:", "body:", "anchor:", "TITLE:"]) + word)
        elif kind < 0.65:
            pieces.append(rng.choice(["title:", "anchor:"]))
        elif kind < 0.8:
            pieces.append(rng.choice(["AND", "OR", "NOT", "OR", "NOT"]))
        elif kind < 0.9:
            pieces.append(rng.choice(["(", ")"]))
        else:
            pieces.append(rng.choice(["-", "&", '"', '""', "*", "é", "日本"]))
    return " ".join(pieces)


def _tsvector(row: tuple[str, str, str]) -> str:
    """The row as a ``tsvector`` literal: weights A, B, C for the fields, positions apart."""
    lexemes: dict[str, list[str]] = {}
    for n, (text, weight) in enumerate(zip(row, "ABC", strict=True)):
        for pos, word in enumerate(text.split(), start=1 + n * FIELD_GAP):
            lexemes.setdefault(word, []).append(f"{pos}{weight}")
    return " ".join(f"'{w}':{','.join(p)}" for w, p in lexemes.items())


def test_both_engines_accept_every_rendering_and_find_the_same_rows(
    pg_url: str,  # noqa: F811
) -> None:
    rng = random.Random(22)
    rows = _rows(rng)
    fts = sqlite3.connect(":memory:")
    fts.execute("CREATE VIRTUAL TABLE t USING fts5(title, body, anchor, tokenize='unicode61')")
    fts.executemany("INSERT INTO t(rowid, title, body, anchor) VALUES (?, ?, ?, ?)",
                    [(i, *row) for i, row in enumerate(rows)])
    answered = refused = 0
    with psycopg.connect(pg_url, autocommit=True) as pg:
        pg.execute("CREATE TABLE t (id int, tsv tsvector)")
        with pg.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s::tsvector)",
                            [(i, _tsvector(row)) for i, row in enumerate(rows)])
        for _ in range(600):
            query = _random_query(rng)
            try:
                tree = parse_query(query)
            except QuerySyntaxError:
                refused += 1
                continue
            if tree is None:
                continue
            match = render_fts5(tree)
            in_fts = {r for (r,) in fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,))}
            tsq = render_tsquery(tree)
            in_pg = {r for (r,) in pg.execute(
                "SELECT id FROM t WHERE tsv @@ to_tsquery('simple', %s)", (tsq,))}
            assert in_fts == in_pg, (query, match, tsq)
            answered += 1
    assert answered > 150 and refused > 50  # the random queries tried both sides


def test_the_deepest_and_longest_queries_reach_both_engines(pg_url: str) -> None:  # noqa: F811
    fts = sqlite3.connect(":memory:")
    fts.execute("CREATE VIRTUAL TABLE t USING fts5(title, body, anchor)")
    fts.execute("INSERT INTO t VALUES ('a', 'b', 'c')")
    # each group inside operators that wait for it: the most an engine's parser holds
    nested = "x OR y z NOT (" * MAX_NESTING + "a OR b c NOT d" + ")" * MAX_NESTING
    longest = " OR ".join(f"w{i}" for i in range(MAX_WORDS - 1)) + " a"
    with psycopg.connect(pg_url, autocommit=True) as pg:
        for query in (nested, longest, " ".join(["a"] * MAX_WORDS)):
            tree = parse_query(query)
            assert tree is not None
            fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (render_fts5(tree),)).fetchall()
            pg.execute("SELECT to_tsquery('simple', %s)", (render_tsquery(tree),)).fetchone()


# --- the two index backends -----------------------------------------------------------------

# queries on which the backends disagreed before they shared a parser, with what both answer
AGREED: list[tuple[str, list[str] | str]] = [
    ("crawler pages", ["http://a.test/crawl"]),
    ("crawler NOT seed politeness", []),  # (crawler NOT seed) AND politeness; SQLite: a page
    ("crawler NOT politeness pages", ["http://a.test/crawl"]),
    ("(robots OR politeness) host", ["http://a.test/polite"]),  # SQLite refused it
    ("host (politeness OR nothing)", ["http://a.test/polite"]),
    ("title:(body:frontier)", ["http://a.test/crawl"]),  # inner field wins; SQLite: nothing
    ("title: - seed", []),  # the lone "-" is absent; PostgreSQL searched seed everywhere
    ("NEAR (crawler pages)", ["http://a.test/crawl"]),  # "NEAR" is a word; SQLite refused it
    ('"-"', "no words to search for"),  # SQLite: no results
    ('title:""', "no words to search for"),
    ("title: -", "title: needs a word"),  # PostgreSQL: no words
    ("seed AND", "(it ends where a word was expected)"),  # SQLite quoted FTS5's message
    ("seed\x00", "(it holds a NUL character)"),  # PostgreSQL: DataError
]


@pytest.fixture(params=["sqlite", "postgresql"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> SQLiteIndex | PostgresIndex:
    if request.param == "sqlite":
        return SQLiteIndex(tmp_path / "index.sqlite")
    return PostgresIndex(request.getfixturevalue("pg_url"))


def test_both_backends_answer_alike(index: SQLiteIndex | PostgresIndex) -> None:
    try:
        for url, title, text in (
            ("http://a.test/crawl", "Crawlers",
             "Near here a crawler fetches seed pages for its frontier."),
            ("http://a.test/polite", "Politeness", "Waiting between requests to one host."),
        ):
            index.add_page(PageDocument(url, site="a", title=title, text=text,
                                        outlinks=[("http://a.test/x", "robots")]))
        index.commit()
        for query, expected in AGREED:
            if isinstance(expected, list):
                assert sorted(r.url for r in index.search(query)) == expected, query
            else:
                with pytest.raises(QuerySyntaxError, match=re.escape(expected)):
                    index.search(query)
    finally:
        index.close()
