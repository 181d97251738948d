"""The PostgreSQL index writes pages added one after another together (a few set-based
statements per run of pages): the result is what writing them one by one gives."""

from __future__ import annotations

import random
from typing import Any

from crawler.backends.postgres.index import PostgresIndex
from crawler.index.base import PageDocument
from tests.pg_support import create_database, drop_database

WORDS = ["crawler", "frontier", "politeness", "robots", "anchor", "index", "shingle", "sketch",
         "host", "queue"]


def _pages() -> list[PageDocument | tuple[str, str]]:
    """Pages of two sites linking to each other, to themselves, to pages of the same batch,
    with blank and repeated anchor texts; a page added twice with other links; aliases and a
    removal between them (which end a run)."""
    rng = random.Random(4)
    out: list[PageDocument | tuple[str, str]] = []
    for i in range(40):
        site = f"s{i % 2}"
        url = f"http://{site}.test/{i}"
        links = [(f"http://{site}.test/nav/{j}", f"Nav {j}") for j in range(5)]
        links += [(f"http://s{rng.randrange(2)}.test/{rng.randrange(40)}",
                   " ".join(rng.choices(WORDS, k=2))) for _ in range(4)]
        links += [(url, "itself"), (f"http://{site}.test/blank", "  "), ("", "no target")]
        links.append(links[0])  # the same link twice
        text = " ".join(rng.choices(WORDS, k=60))
        out.append(PageDocument(url, site=site, title=f"Page {i} {rng.choice(WORDS)}", text=text,
                                status=200, fetched_at="2026-01-01T00:00:00Z",
                                fingerprint=f"f{i}", outlinks=links))
        if i in (10, 25):  # the page again, with other links, in the same batch
            again = out[-1]
            assert isinstance(again, PageDocument)
            out.append(PageDocument(again.url, site=site, title=again.title, text=again.text,
                                    status=200, fetched_at="2026-01-02T00:00:00Z",
                                    outlinks=[("http://s0.test/3", "frontier queue")]))
        if i == 30:
            out.append(("alias", url))
        if i == 33:
            out.append(("remove", "http://s1.test/31"))
    return out


def _write(url: str, together: bool) -> dict[str, Any]:
    index = PostgresIndex(url)
    try:
        for n, item in enumerate(_pages()):
            if isinstance(item, PageDocument):
                index.add_page(item)
            elif item[0] == "alias":
                index.add_alias("http://mirror.test/x", item[1], site="s0")
            else:
                index.remove_page(item[1], status=404)
            if not together or n % 17 == 16:
                index.commit()
        index.flush()
        conn = index._reader
        state = {
            "stats": index.stats(),
            "pages": conn.execute(
                "SELECT p.url, p.site, p.title, p.status, p.fetched_at, p.visited_at,"
                " p.fingerprint, p.has_doc,"
                " (SELECT o.url FROM pages o WHERE o.id = p.alias_of) FROM pages p ORDER BY p.url"
            ).fetchall(),
            "docs": conn.execute(
                "SELECT p.url, d.title, d.body FROM docs d JOIN pages p ON p.id = d.page"
                " ORDER BY p.url"
            ).fetchall(),
            "anchors": conn.execute(
                "SELECT p.url, a.anchor, a.n FROM anchors a JOIN pages p ON p.id = a.target"
                " ORDER BY 1, 2"
            ).fetchall(),
            "outlinks": conn.execute(
                "SELECT p.url, array_agg(t.url || ' ' || a.anchor ORDER BY k.n)"
                " FROM outlinks o JOIN pages p ON p.id = o.source,"
                " unnest(o.anchor_ids) WITH ORDINALITY AS k(id, n)"
                " JOIN anchors a ON a.id = k.id JOIN pages t ON t.id = a.target"
                " GROUP BY p.url ORDER BY 1"
            ).fetchall(),
            # (ids are handed out in another order, so ties may be broken otherwise)
            "search": sorted((r.url, round(r.score, 6), sorted(r.anchors))
                             for r in index.search("frontier", limit=50)),
            "problems": index.integrity_check(),
        }
    finally:
        index.close()
    return state


def test_pages_written_together_as_one_by_one() -> None:
    one, many = create_database(), create_database()
    try:
        alone, together = _write(one, together=False), _write(many, together=True)
    finally:
        drop_database(one)
        drop_database(many)
    assert together["problems"] == [] and alone["problems"] == []
    for what in ("stats", "pages", "docs", "anchors", "outlinks", "search"):
        assert together[what] == alone[what], what
    assert together["stats"]["documents"] == 39 and together["stats"]["aliases"] == 1
