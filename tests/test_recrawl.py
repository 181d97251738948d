"""Recrawls over a crawl database, against a real server that answers conditional requests.

Time is simulated in the database between runs (``next_fetch`` moved), so what is due does not
depend on how fast the machine is.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from devsite import HostSpec, build_site
from devsite.routed import Answer, Ask, RoutedSiteServer
from tests.crawling import loopback_settings, per_host, run_crawl

pytestmark = pytest.mark.integration

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]


def text(body: str, status: int = 200) -> Answer:
    return status, [("Content-Type", "text/plain")], body.encode()


def db_rows(path: Path, where: str = "1") -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    rows = {r["url"]: dict(r) for r in conn.execute(f"SELECT * FROM pages WHERE {where}")}
    conn.close()
    return rows


def db_exec(path: Path, sql: str, *args: Any) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


def page_statuses(records: list[Any]) -> Counter[int]:
    return Counter(r.status for r in records if r.path != "/robots.txt")


def test_recrawl_over_a_crawl_database(tmp_path: Path) -> None:
    graph = build_site([HostSpec(a, pages=8) for a in HOSTS], links_per_page=3)
    server = RoutedSiteServer(graph)
    visits = Counter[str]()

    def counter_page(ask: Ask) -> Answer:
        """Same page, with a visit counter in its footer: a new ETag every time."""
        visits[ask.path] += 1
        doc = server.graph.resolve(ask.address, "/p/1.html")
        assert doc is not None
        body = doc.body.replace(b"</footer>", b"<p>Visits: %d</p></footer>" % visits[ask.path])
        headers = [("Content-Type", doc.content_type), ("ETag", f'"v{visits[ask.path]}"')]
        return 200, headers, body

    robots_5 = {"ok": False}

    def flaky_robots(ask: Ask) -> Answer:
        return text("User-agent: *\nAllow: /\n") if robots_5["ok"] else text("down", 503)

    server.route("127.0.0.2", "/p/1.html", counter_page)
    server.route("127.0.0.5", "/robots.txt", flaky_robots)
    db = tmp_path / "crawldb.sqlite"
    settings = loopback_settings(
        CRAWLDB_PATH=db,
        RECRAWL_INTERVAL=3600,
        FRONTIER_MIN_DELAY=0.02,
        TUNING={"recrawl_sync_delta": False, "robots_retry_times": 0},
        INDEX_PATH=tmp_path / "index.sqlite",
    )

    def crawl(run: str) -> tuple[Any, dict[str, list[Any]]]:
        server.reset()
        result = run_crawl(tmp_path / run, seeds=server.seeds(), settings=settings)
        assert result.returncode == 0, result.log[-3000:]
        return result, per_host(server.records)

    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    (tmp_path / "3").mkdir()
    with server:
        first, records1 = crawl("1")
        fetched1 = sum(len(r) for r in records1.values())
        bytes1 = sum(x.bytes for r in records1.values() for x in r)
        assert page_statuses(records1[HOSTS[0]]) == {200: len(records1[HOSTS[0]]) - 1}
        # .5's robots.txt failed: its seed (and links to it from the other hosts) are
        # remembered as due, not lost
        assert [r.path for r in records1["127.0.0.5"]] == ["/robots.txt"]
        remembered = db_rows(db, "status IS NULL")
        assert server.url("127.0.0.5") in remembered
        assert all(u.startswith(server.url("127.0.0.5")) for u in remembered)
        assert first.stats["crawldb/remembered_unfetched"] == len(remembered)

        # Second run: everything due except host .4; the site has not changed.
        db_exec(db, "UPDATE pages SET next_fetch = 0")
        db_exec(db, "UPDATE pages SET next_fetch = 1e12 WHERE url LIKE ?", "http://127.0.0.4:%")
        robots_5["ok"] = True
        second, records2 = crawl("2")
        assert records2.get("127.0.0.4", []) == []  # not due, and robots.txt is cached
        unchanged = [r for h in HOSTS[:2] for r in records2[h]]
        statuses = page_statuses(unchanged)
        assert statuses[304] >= 0.95 * sum(statuses.values()), statuses
        # only the counter page (under two URLs: with and without a query) answers 200: a new
        # ETag every time, but the same text, so no change
        assert {r.path.split("?")[0] for r in unchanged if r.status == 200} == {"/p/1.html"}
        assert all(r.path != "/robots.txt" for r in unchanged)  # cached from the first run
        assert second.stats["crawldb/not_modified"] == statuses[304]
        assert second.stats["crawldb/unchanged"] == statuses[200] == 2
        assert "crawldb/changed" not in second.stats
        not_modified = [i for i in second.items if i["status"] == 304]
        assert len(not_modified) == statuses[304]
        assert all(i["text"] == "" for i in not_modified)
        # the URL remembered for .5 was fetched once robots.txt could be read, with its links
        assert page_statuses(records2["127.0.0.5"])[200] >= 9

        # Third run: one page changed (new text, a new link); everything due again.
        target = server.graph.resolve("127.0.0.3", "/p/2.html")
        assert target is not None
        server.set_body(
            "127.0.0.3",
            "/p/2.html",
            target.body.replace(b"<main>", b'<main><p>Breaking news</p><a href="/p/7.html?n">'),
        )
        db_exec(db, "UPDATE pages SET next_fetch = 0")
        third, records3 = crawl("3")
        changed_url = server.url("127.0.0.3", "/p/2.html")
        [item] = [i for i in third.items if i["url"] == changed_url]
        assert item["status"] == 200 and "Breaking news" in item["text"]  # re-parsed
        assert third.stats["crawldb/changed"] == 1
        assert third.stats["crawldb/new"] == 1  # /p/7.html?n, found by the re-parse
        rows = db_rows(db)
        assert rows[changed_url]["change_count"] == 1
        assert rows[changed_url]["fetch_count"] == 3
        assert rows[changed_url]["priority"] > 0  # changes often: comes back first
        calm = rows[server.url("127.0.0.3", "/p/3.html")]
        assert rows[changed_url]["interval"] < calm["interval"]
        counter = rows[server.url("127.0.0.2", "/p/1.html")]
        assert counter["change_count"] == 0 and counter["fetch_count"] == 3
        assert sum(x.bytes for r in records3.values() for x in r) < 0.2 * bytes1
    assert fetched1 > 40


def test_continuous_mode_refetches_as_pages_come_due(tmp_path: Path) -> None:
    graph = build_site([HostSpec("127.0.0.2", pages=3)], links_per_page=2, extras=False)
    server = RoutedSiteServer(graph)
    hits = Counter[str]()

    def always_new(ask: Ask) -> Answer:
        hits[ask.path] += 1
        word = ["alpha", "bravo", "charlie", "delta"][hits[ask.path] % 4]
        return 200, [("Content-Type", "text/html")], f"<p>{word} news</p>".encode()

    server.route("127.0.0.2", "/p/2.html", always_new)
    db = tmp_path / "crawldb.sqlite"
    with server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=loopback_settings(
                CRAWLDB_PATH=db,
                RECRAWL_CONTINUOUS=True,
                RECRAWL_INTERVAL=0.6,
                TUNING={"recrawl_sync_delta": False},
                CLOSESPIDER_TIMEOUT=5,
                INDEX_PATH=tmp_path / "index.sqlite",
            ),
        )
        fetched = Counter(r.path for r in server.records)
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["finish_reason"] == "closespider_timeout"
    # the page that changes at every fetch comes back more and more often; the others less
    assert fetched["/p/2.html"] >= 6, fetched
    assert fetched["/p/0.html"] < fetched["/p/2.html"]
    assert fetched["/robots.txt"] == 1
    rows = db_rows(db)
    changing = rows[server.url("127.0.0.2", "/p/2.html")]
    calm = rows[server.url("127.0.0.2", "/p/0.html")]
    assert changing["change_count"] >= 4 and changing["interval"] < 0.6 < calm["interval"]
    assert result.stats["crawldb/recrawl_scheduled"] >= 6
