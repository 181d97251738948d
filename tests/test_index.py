"""The index on its own: documents, anchor text, aliases, replacement, crash safety.

Every behaviour test runs against both backends: SQLite FTS5 (embedded) and PostgreSQL (a fresh
database on the local server, see ``tests/pg_support.py``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from crawler.backends.postgres.index import PostgresIndex, to_tsquery_text
from crawler.backends.registry import BackendError, open_index
from crawler.backends.sqlite.index import SQLiteIndex, default_index_path, to_fts_query
from crawler.index import IndexAccessError, PageDocument, QuerySyntaxError
from tests.pg_support import pg_url  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]

CRAWLER = (
    "A web crawler starts from seed pages, fetches them, extracts their links and adds the new "
    "ones to its frontier, which decides what to fetch next and when."
)
POLITENESS = (
    "Politeness means waiting between two requests to the same host, honouring robots.txt and "
    "the crawl delay a server asks for."
)


AnyIndex = SQLiteIndex | PostgresIndex


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], AnyIndex]:
    """Opens (again) one index of the backend under test."""
    if request.param == "sqlite":
        path = tmp_path / "index.sqlite"
        return lambda: SQLiteIndex(path)
    url = request.getfixturevalue("pg_url")
    return lambda: PostgresIndex(url)


@pytest.fixture
def index(opener: Callable[[], AnyIndex]) -> Iterator[AnyIndex]:
    ix = opener()
    yield ix
    ix.close()


def _doc(
    url: str, title: str, text: str, links: Sequence[tuple[str, str]] = (), site: str = "a"
) -> PageDocument:
    return PageDocument(url=url, site=site, title=title, text=text, status=200,
                        fetched_at="2026-01-01T00:00:00Z", outlinks=links)


def test_finds_pages_by_their_text_with_snippets(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/crawler", "Crawlers", CRAWLER))
    index.add_page(_doc("http://a.test/polite", "Politeness", POLITENESS))
    index.commit()
    [hit] = index.search("frontier")
    assert hit.url == "http://a.test/crawler" and hit.title == "Crawlers"
    assert "[frontier]" in hit.snippet and hit.fetched and hit.matched_text
    assert not hit.matched_anchor
    # porter stemming: "requests" finds "request", "honour" finds "honouring"
    assert [r.url for r in index.search("honour request")] == ["http://a.test/polite"]
    assert index.search("nothing-like-this") == []


def test_title_weighs_more_than_body(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/1", "Notes", "Something about a frontier, once."))
    index.add_page(_doc("http://a.test/2", "The frontier", "Notes about it, once."))
    index.commit()
    assert index.search("frontier")[0].url == "http://a.test/2"


def test_anchor_text_finds_pages_never_fetched(index: AnyIndex) -> None:
    index.add_page(
        _doc("http://a.test/", "Home", CRAWLER,
             [("http://a.test/mercator", "the Mercator paper"), ("http://b.test/x", "Heritrix")])
    )
    index.commit()
    [hit] = index.search("mercator")
    assert hit.url == "http://a.test/mercator"
    assert not hit.fetched and hit.matched_anchor and not hit.matched_text
    assert hit.anchors == ["the Mercator paper"]
    assert hit.site == "a"  # same host as the linking page
    assert index.search("heritrix")[0].site == ""  # another host: site unknown until fetched
    # once fetched, it is a document that anchor text still helps to find
    index.add_page(_doc("http://a.test/mercator", "A scalable crawler", POLITENESS))
    index.commit()
    [hit] = index.search("mercator")
    assert hit.fetched and hit.matched_anchor and hit.title == "A scalable crawler"
    [hit] = index.search("politeness")
    assert hit.url == "http://a.test/mercator" and hit.matched_text


def test_many_links_with_the_same_text_are_one_anchor(index: AnyIndex) -> None:
    for i in range(20):
        index.add_page(_doc(f"http://a.test/{i}", f"Page {i}", CRAWLER,
                            [("http://a.test/about", "About us")]))
    index.commit()
    assert index.stats()["anchors"] == 1
    [hit] = index.search("about")
    assert hit.url == "http://a.test/about"


def test_refetch_replaces_document_and_links(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "Old title", CRAWLER, [("http://a.test/t", "alpha")]))
    index.commit()
    index.add_page(_doc("http://a.test/p", "New title", POLITENESS, [("http://a.test/t", "beta")]))
    index.commit()
    assert index.search("frontier") == []
    assert [r.title for r in index.search("politeness")] == ["New title"]
    assert index.search("alpha") == []  # the link's old anchor text was taken back
    assert [r.url for r in index.search("beta")] == ["http://a.test/t"]
    assert index.stats()["documents"] == 1


def test_link_counts_within_one_transaction(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "P", CRAWLER, [("http://a.test/t", "gamma")]))
    index.add_page(_doc("http://a.test/p", "P", CRAWLER, [("http://a.test/t", "delta")]))
    index.add_page(_doc("http://a.test/q", "Q", CRAWLER, [("http://a.test/t", "delta")]))
    assert [h.anchors for h in index.search("gamma OR delta")] == [["delta"]]  # before commit
    index.commit()
    assert index.stats()["anchors"] == 1
    assert index.search("gamma") == []


def test_not_modified_keeps_the_document(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "Crawlers", CRAWLER))
    index.commit()
    index.record_visit("http://a.test/p", "2026-02-02T00:00:00Z", 304)
    index.commit()
    [hit] = index.search("frontier")
    assert hit.url == "http://a.test/p"
    page = index.page("http://a.test/p")
    assert page is not None
    assert page["visited_at"] == "2026-02-02T00:00:00Z"
    assert page["fetched_at"] == "2026-01-01T00:00:00Z"


def test_gone_and_noindex_drop_the_document_but_keep_links_to_it(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "Crawlers", CRAWLER))
    index.add_page(_doc("http://a.test/q", "Links", POLITENESS, [("http://a.test/p", "spider")]))
    index.remove_page("http://a.test/p", status=404)
    index.commit()
    assert index.search("frontier") == []
    [hit] = index.search("spider")
    assert hit.url == "http://a.test/p" and not hit.fetched and hit.status == 404


def test_aliases_have_no_document_and_lend_their_anchors(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "Crawlers", CRAWLER))
    index.add_page(_doc("http://mirror.test/p", "Crawlers", CRAWLER))  # indexed, then found dup
    index.add_alias("http://mirror.test/p", "http://a.test/p", site="a", status=200)
    index.add_page(_doc("http://x.test/", "Elsewhere", POLITENESS,
                        [("http://mirror.test/p", "the spider book")]))
    index.commit()
    [hit] = index.search("frontier")
    assert hit.url == "http://a.test/p" and hit.aliases == ["http://mirror.test/p"]
    [hit] = index.search("spider book")  # a link to the mirror counts for the original
    assert hit.url == "http://a.test/p" and hit.matched_anchor
    assert index.stats()["documents"] == 2 and index.stats()["aliases"] == 1
    # an alias of an alias points at the root
    index.add_alias("http://mirror2.test/p", "http://mirror.test/p")
    index.commit()
    assert index.page("http://mirror2.test/p")["alias_of"] == index.page("http://a.test/p")["id"]
    # a page that stops being a duplicate gets its own document back
    index.add_page(_doc("http://mirror.test/p", "Changed", POLITENESS))
    index.commit()
    assert index.page("http://mirror.test/p")["alias_of"] is None
    assert [r.url for r in index.search("politeness")] == ["http://mirror.test/p", "http://x.test/"]


def test_site_filter(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "Crawlers", CRAWLER, site="a"))
    index.add_page(_doc("http://b.test/p", "Crawlers too", CRAWLER, site="b"))
    index.commit()
    assert {r.url for r in index.search("crawler")} == {"http://a.test/p", "http://b.test/p"}
    assert [r.url for r in index.search("crawler", site="b")] == ["http://b.test/p"]
    assert index.search("crawler", site="nope") == []


def test_query_syntax(index: AnyIndex) -> None:
    index.add_page(_doc("http://a.test/p", "Crawlers", CRAWLER + " It's an e-mail robot."))
    index.commit()
    for ok in ("e-mail", "it's", '"seed pages"', "crawl*", "title:crawlers", "seed OR nothing",
               "seed NOT nothing", "(seed OR x) AND pages", "anchor:nothing OR frontier"):
        index.search(ok)  # no error
    assert [r.url for r in index.search('"seed pages"')] == ["http://a.test/p"]
    assert index.search('"pages seed"') == []
    assert index.search("title:frontier") == []
    for bad, words in (("seed AND", "cannot parse"), ('"seed pages', "unbalanced quote"),
                       ("(seed", "cannot parse"), ("NOT seed", "cannot parse"), ("!!", "no words")):
        with pytest.raises(QuerySyntaxError, match=words) as info:
            index.search(bad)
        assert repr(bad) in str(info.value)


def test_to_fts_query_quotes_bare_words() -> None:
    assert to_fts_query("e-mail") == '"e-mail"'
    assert to_fts_query('title:foo bar* "a b" OR x') == 'title:"foo" "bar"* "a b" OR "x"'
    assert to_fts_query("foo:bar") == '"foo:bar"'  # not a column: a word
    # a field filter before a phrase or a group applies to all of it
    assert to_fts_query('title:"a b" c') == 'title:"a b" "c"'
    # FTS5 joins phrases only with a bare space: a group next to a word takes an AND
    assert to_fts_query("anchor:(x OR y) z") == '(anchor:"x" OR anchor:"y") AND "z"'
    with pytest.raises(QuerySyntaxError):
        to_fts_query("body:")
    assert to_fts_query("- & it's") == '"it\'s"'  # lone punctuation has nothing to match
    with pytest.raises(QuerySyntaxError, match="unbalanced quote"):
        to_fts_query('say "hi')


def test_paths_and_backends(tmp_path: Path) -> None:
    assert default_index_path({"INDEX_PATH": "x.sqlite"}) == "x.sqlite"
    assert default_index_path({"JOBDIR": "job"}) == str(Path("job") / "crawl-index.sqlite")
    assert default_index_path({}) == "crawl-index.sqlite"
    with pytest.raises(IndexAccessError, match="no index at"):
        open_index({"INDEX_PATH": str(tmp_path / "missing.sqlite")}, readonly=True)
    with pytest.raises(BackendError, match=r"BACKEND_CLASSES index: builtins\.dict is not an"):
        open_index({"BACKEND_CLASSES": {"index": "builtins.dict"}})
    with pytest.raises(BackendError, match="BACKEND_CLASSES index: cannot load"):
        open_index({"BACKEND_CLASSES": '{"index": "crawler.backends.sqlite.index.NoSuchIndex"}'})
    ix = open_index({"INDEX_PATH": str(tmp_path / "sub" / "ix.sqlite")})
    ix.close()
    ro = open_index({"INDEX_PATH": str(tmp_path / "sub" / "ix.sqlite")}, readonly=True)
    with pytest.raises(IndexAccessError, match="read-only"):
        ro.add_page(_doc("http://a.test/", "t", "x"))
    ro.close()


def test_a_killed_writer_leaves_a_consistent_index(
    opener: Callable[[], AnyIndex], tmp_path: Path
) -> None:
    """Commit one batch, write half of the next, die without cleanup: the first batch is there."""
    probe = opener()
    probe.close()
    if isinstance(probe, PostgresIndex):
        open_it = (
            "from crawler.backends.postgres.index import PostgresIndex as I;"
            f" ix = I({probe.url!r})"
        )
    else:
        open_it = (
            "from crawler.backends.sqlite.index import SQLiteIndex as I;"
            f" ix = I({probe.path!r})"
        )
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from crawler.index.base import PageDocument
        OPEN_IT
        for i in range(50):
            ix.add_page(PageDocument(f"http://a.test/{{i}}", title=f"Committed {{i}}",
                                     text="committed text " * 50,
                                     outlinks=[(f"http://a.test/{{i + 1}}", "next committed")]))
        ix.flush()  # committed and written (PostgreSQL writes on its own thread)
        for i in range(50, 100):
            ix.add_page(PageDocument(f"http://a.test/{{i}}", title=f"Lost {{i}}", text="lost text",
                                     outlinks=[(f"http://a.test/{{i + 1}}", "lost")]))
        os._exit(9)  # like SIGKILL: no commit, no close
    """).replace("OPEN_IT", open_it)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    ix = opener()
    try:
        assert ix.integrity_check() == []
        assert ix.stats()["documents"] == 50
        assert len(ix.search("committed", limit=100)) == 51  # 50 pages and one link target
        assert ix.search("lost") == []
    finally:
        ix.close()


def test_rollback_and_reopen(opener: Callable[[], AnyIndex]) -> None:
    ix = opener()
    ix.add_page(_doc("http://a.test/1", "One", CRAWLER))
    ix.commit()
    ix.add_page(_doc("http://a.test/2", "Two", POLITENESS, [("http://a.test/3", "three")]))
    ix.rollback()
    ix.add_page(_doc("http://a.test/4", "Four", POLITENESS))  # ids from the rollback not reused
    ix.close()
    again = opener()
    assert again.stats() == {"documents": 2, "urls": 2, "aliases": 0, "anchors": 0}
    assert again.integrity_check() == []
    again.close()


def test_to_tsquery_text_follows_the_fts5_grammar() -> None:
    assert to_tsquery_text("e-mail") == "'e-mail'"
    assert to_tsquery_text("it's") == "'it''s'"
    assert to_tsquery_text('title:foo bar* "a b" OR x') == "((('foo':A & 'bar':*) & 'a b') | 'x')"
    assert to_tsquery_text("a NOT b c") == "(('a' & !'b') & 'c')"
    assert to_tsquery_text("anchor:(x OR y) z") == "((('x':C | 'y':C)) & 'z')"
    assert to_tsquery_text("- &") == ""
    for bad in ("a AND", "(a", "a)", "NOT a", "OR", "a OR OR b"):
        with pytest.raises(QuerySyntaxError, match="cannot parse"):
            to_tsquery_text(bad)


def test_postgres_reader_needs_an_index_and_writers_share_one(pg_url: str) -> None:  # noqa: F811
    with pytest.raises(IndexAccessError, match="no index in PostgreSQL at"):
        open_index({"DATABASE_URL": pg_url}, readonly=True)
    # two writers (two workers) on one database: each sees the other's pages once flushed
    one, two = open_index({"DATABASE_URL": pg_url}), open_index({"DATABASE_URL": pg_url})
    assert isinstance(one, PostgresIndex) and isinstance(two, PostgresIndex)
    for n in range(40):  # the same link targets and anchors from both, interleaved
        one.add_page(_doc(f"http://a.test/{n}", "One", CRAWLER, [("http://a.test/t", "shared")]))
        two.add_page(_doc(f"http://b.test/{n}", "Two", POLITENESS, [("http://a.test/t", "shared")]))
        if n % 10 == 9:
            one.commit()
            two.commit()
    one.close()
    two.close()
    reader = open_index({"DATABASE_URL": pg_url}, readonly=True)
    try:
        assert reader.stats() == {"documents": 80, "urls": 81, "aliases": 0, "anchors": 1}
        [hit] = reader.search("shared")
        assert hit.url == "http://a.test/t" and not hit.fetched
        with pytest.raises(IndexAccessError, match="read-only"):
            reader.add_page(_doc("http://a.test/", "t", "x"))
    finally:
        reader.close()


def test_postgres_url_password_never_shown(pg_url: str) -> None:  # noqa: F811
    secret = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    bad = secret.replace(":5432/", ":1/")  # nothing listens there
    with pytest.raises(IndexAccessError) as info:
        open_index({"DATABASE_URL": bad})
    assert "s3cret" not in str(info.value) and "postgres:***@" in str(info.value)

