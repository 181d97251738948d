"""The crawl database and its adaptive schedule, without Scrapy; the backend tests run on SQLite
and on PostgreSQL (a fresh database on the local server, see ``tests/pg_support.py``)."""

from __future__ import annotations

from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path

import pytest

from crawler.backends.postgres.crawldb import PostgresCrawlDb
from crawler.backends.sqlite.crawldb import SqliteCrawlDb
from crawler.content.normalize import text_fingerprint
from crawler.crawldb import AdaptiveSchedule, CrawlDb, CrawlDbError, Visit
from tests.pg_support import pg_url  # noqa: F401

HOUR = 3600.0


def schedule(**kw: float) -> AdaptiveSchedule:
    base = {"interval": HOUR, "min_interval": 60.0, "max_interval": 10 * HOUR, "sync_delta": False}
    return AdaptiveSchedule(**{**base, **kw})  # type: ignore[arg-type]


def test_interval_shrinks_on_change_grows_without_and_stays_in_bounds() -> None:
    s = schedule()
    rec, changed = s.apply(None, Visit("u", 200, 0.0, fingerprint="a"))
    assert not changed and rec.interval == HOUR and rec.next_fetch == HOUR
    rec, changed = s.apply(rec, Visit("u", 200, HOUR, fingerprint="b"))
    assert changed and rec.change_count == 1 and rec.interval == pytest.approx(0.8 * HOUR)
    assert rec.next_fetch == pytest.approx(HOUR + 0.8 * HOUR)
    rec, changed = s.apply(rec, Visit("u", 304, 2 * HOUR))
    assert not changed and rec.interval == pytest.approx(0.8 * 1.4 * HOUR)
    assert rec.fingerprint == "b" and rec.fetch_count == 3
    for i in range(20):  # never changes again: up to the maximum, no further
        rec, _ = s.apply(rec, Visit("u", 304, (3 + i) * HOUR))
    assert rec.interval == 10 * HOUR
    for i in range(40):  # changes every time: down to the minimum
        rec, _ = s.apply(rec, Visit("u", 200, (30 + i) * HOUR, fingerprint=str(i)))
    assert rec.interval == 60.0


def test_priority_follows_the_change_rate() -> None:
    s = schedule(priority_levels=3)
    rec, _ = s.apply(None, Visit("u", 200, 0, fingerprint="a"))
    assert rec.priority == 0
    rec, _ = s.apply(rec, Visit("u", 200, 1, fingerprint="b"))
    assert rec.priority == 3  # changed at its only refetch
    rec, _ = s.apply(rec, Visit("u", 304, 2))
    rec, _ = s.apply(rec, Visit("u", 304, 3))
    assert rec.priority == 1  # 1 change in 3 refetches


def test_statuses() -> None:
    s = schedule()
    rec, _ = s.apply(
        None, Visit("u", 200, 0, etag='"x"', last_modified="lm", fingerprint="a",
                    outlinks=[("http://a/", "A")]),
    )
    not_modified, changed = s.apply(rec, Visit("u", 304, 10, etag='"y"'))
    assert not changed and not_modified.etag == '"y"' and not_modified.last_modified == "lm"
    assert not_modified.outlinks == [("http://a/", "A")]
    gone, _ = s.apply(rec, Visit("u", 404, 10))
    assert gone.interval == 10 * HOUR and gone.etag is None and gone.next_fetch == 10 + 10 * HOUR
    error, changed = s.apply(rec, Visit("u", 503, 10))
    assert not changed and error.interval == HOUR and error.fingerprint == "a"
    moved, _ = s.apply(None, Visit("v", 301, 0))
    assert moved.next_fetch == 10 * HOUR


def test_sync_delta_stretches_the_interval_of_a_long_unchanged_page() -> None:
    s = schedule(sync_delta=True, max_interval=100 * HOUR)
    day_ago = formatdate(0.0, usegmt=True)
    first, _ = s.apply(None, Visit("u", 200, 24 * HOUR, last_modified=day_ago, fingerprint="a"))
    assert first.interval == HOUR  # the first fetch keeps the configured interval
    again, _ = s.apply(first, Visit("u", 304, 25 * HOUR))
    assert again.interval == 25 * HOUR  # unchanged for 25 h: wait at least that long
    # pulled forward by 30 % of it, but never into the past
    assert again.next_fetch == pytest.approx(25 * HOUR + 0.7 * 25 * HOUR)


def test_counters_and_dates_in_the_page_are_not_changes() -> None:
    s = schedule()
    one = text_fingerprint("News of the day. Visits: 1234. Updated Tuesday, 3 March 2026")
    two = text_fingerprint("News of the day. Visits: 1240. Updated Wednesday, 4 March 2026")
    rec, _ = s.apply(None, Visit("u", 200, 0, fingerprint=one))
    rec, changed = s.apply(rec, Visit("u", 200, HOUR, fingerprint=two))
    assert not changed
    other = text_fingerprint("Other news of the day. Visits: 1240.")
    assert s.apply(rec, Visit("u", 200, 2 * HOUR, fingerprint=other))[1]


Opener = Callable[..., CrawlDb]


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens (again) one crawl database of the backend under test (``crawl``: the site)."""
    if request.param == "sqlite":
        return lambda crawl="site": SqliteCrawlDb(tmp_path / "sub" / f"{crawl}.sqlite", schedule())
    url = request.getfixturevalue("pg_url")
    return lambda crawl="site": PostgresCrawlDb(url, crawl, schedule())


def test_backend(opener: Opener) -> None:
    db = opener()
    links = [("http://a.example/x", "X"), ("http://a.example/y", "Ünïcode")]
    r = db.record(Visit("http://a.example/", 200, 0, depth=0, etag='"e"', fingerprint="f",
                        outlinks=links))
    assert r.new and not r.changed
    db.record(Visit("http://a.example/x", 200, 0, depth=1, fingerprint="1"))
    db.record(Visit("http://a.example/x", 200, 100, depth=1, fingerprint="2"))  # changed: prio 3
    db.record(Visit("http://a.example/z", 200, 0, depth=1, fingerprint="z"))
    # keyed by the canonical form; the URL requested kept when it differs
    asked = "http://a.example/q?/p"
    db.record(Visit("http://a.example/q?%2Fp=", 200, 0, depth=1, request_url=asked))
    new, new_asked = "http://a.example/new?a=1&b=2", "http://a.example/new?b=2&a=1"
    assert db.add_unfetched([("http://a.example/", 0, None), (new, 2, new_asked)], 50) == 1
    db.close()

    other = opener("other-site")  # another site's crawl database: empty
    assert len(other) == 0 and other.get("http://a.example/") is None
    other.close()
    db = opener()
    assert len(db) == 5 and set(db.urls()) == {
        "http://a.example/", "http://a.example/x", "http://a.example/z", new,
        "http://a.example/q?%2Fp=",
    }
    assert db.get("http://a.example/q?%2Fp=").request_url == asked  # type: ignore[union-attr]
    rec = db.get("http://a.example/")
    assert rec is not None and rec.outlinks == links and rec.etag == '"e"'
    assert db.get(new).status is None  # type: ignore[union-attr]
    assert db.validators("http://a.example/") == ('"e"', None)
    assert db.validators(new) == (None, None)  # known, never fetched
    assert db.validators("http://a.example/unknown") == (None, None)
    assert [(d.url, d.fetch_url) for d in db.due(60)] == [(new, new_asked)]
    due = db.due(10 * HOUR)
    assert due[0].url == "http://a.example/x" and due[0].priority == 3  # changes often: first
    assert db.next_due() == 50
    claimed = db.claim_due(10 * HOUR, lease=HOUR, limit=2)
    assert len(claimed) == 2
    assert len(db.due(10 * HOUR)) == 3  # the claimed ones are leased out
    db.close()


def test_schema_version_is_checked(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(CrawlDbError, match="schema version 99"):
        SqliteCrawlDb(path)


def test_record_is_read_back_before_and_after_it_is_written(opener: Opener) -> None:
    db = opener()
    db.record(Visit("http://a.example/", 200, 0, etag='"1"', fingerprint="a"))
    assert db.validators("http://a.example/") == ('"1"', None)  # not committed yet
    db.commit()
    again = db.record(Visit("http://a.example/", 200, HOUR, etag='"2"', fingerprint="b"))
    assert again.changed and not again.new and again.record.fetch_count == 2
    db.close()
    db = opener()
    rec = db.get("http://a.example/")
    assert rec is not None and rec.etag == '"2"' and rec.change_count == 1
    db.close()


def test_outlinks_are_replaced_by_a_full_fetch_and_kept_otherwise(opener: Opener) -> None:
    """Each step reads the stored record back from the database (flushed), not from the
    records waiting for the writer."""
    db = opener()
    old, new = [("http://a.example/x", "X")], [("http://a.example/y", "Y")]
    db.record(Visit("http://a.example/", 200, 0, fingerprint="a", outlinks=old))
    for visit, expected in [
        (Visit("http://a.example/", 304, HOUR), old),  # not modified: kept
        (Visit("http://a.example/", 200, 2 * HOUR, fingerprint="a"), old),  # no outlinks given
        (Visit("http://a.example/", 503, 3 * HOUR), old),
        (Visit("http://a.example/", 200, 4 * HOUR, fingerprint="b", outlinks=new), new),
    ]:
        db.commit()
        if hasattr(db, "flush"):
            db.flush()
        result = db.record(visit)
        assert result.record.outlinks == expected
        db.commit()
        if hasattr(db, "flush"):
            db.flush()
        assert db.get("http://a.example/").outlinks == expected  # type: ignore[union-attr]
    assert db.get("http://a.example/").fetch_count == 5  # type: ignore[union-attr]
    db.close()


def test_postgres_workers_share_one_crawl_database(pg_url: str) -> None:  # noqa: F811
    """Two workers of one crawl: what one records, the other knows; a due URL is claimed once."""
    one = PostgresCrawlDb(pg_url, "site", schedule())
    two = PostgresCrawlDb(pg_url, "site", schedule())
    for i in range(30):
        (one if i % 2 else two).record(Visit(f"http://a.example/{i}", 200, 0, fingerprint="f"))
    # each handle writes on a thread of its own: wait for both before reading the shared table
    one.flush()
    two.flush()
    assert len(one) == len(two) == 30
    assert set(one.urls()) == set(two.urls())
    assert one.validators("http://a.example/2") == (None, None)  # written by two, known to one
    assert one.get("http://a.example/2").fetch_count == 1  # type: ignore[union-attr]
    # claims interleaved from both: every due URL goes to exactly one of them
    claimed: list[str] = []
    while batch := one.claim_due(2 * HOUR, lease=HOUR, limit=4) + two.claim_due(
        2 * HOUR, lease=HOUR, limit=3
    ):
        claimed += [d.url for d in batch]
    assert sorted(claimed) == sorted(one.urls()) and len(claimed) == 30
    one.close()
    two.close()


def test_sqlite_writes_run_on_the_writer_thread_and_reads_see_them_first(tmp_path: Path) -> None:
    """While another connection holds the file's write lock, recording and committing still
    return at once (the writer thread waits, not the caller) and reads answer from the records
    not written yet; once the lock is gone, flush() lands them for every reader."""
    import sqlite3
    import time

    path = tmp_path / "db.sqlite"
    db = SqliteCrawlDb(path, schedule())
    links = [("http://a.example/x", "X")] * 3
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock: the writer's batch must wait
    started = time.monotonic()
    db.record(Visit("http://a.example/", 200, 0, etag='"1"', fingerprint="a", outlinks=links))
    db.commit()  # handed over: the writer now waits for the lock
    db.record(Visit("http://a.example/b", 200, 0, last_modified="Mon", fingerprint="b"))
    assert time.monotonic() - started < 1.0
    assert db.validators("http://a.example/") == ('"1"', None)  # handed over, not written
    assert db.validators("http://a.example/b") == (None, "Mon")  # pending
    assert db.get("http://a.example/").outlinks == links  # type: ignore[union-attr]
    again = db.record(Visit("http://a.example/", 200, HOUR, etag='"2"', fingerprint="c"))
    assert again.changed and again.record.fetch_count == 2  # built on the unwritten record
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT count(*) FROM pages").fetchone()[0] == 0
    blocker.execute("COMMIT")
    db.flush()
    rows = dict(reader.execute("SELECT url, etag FROM pages").fetchall())
    assert rows == {"http://a.example/": '"2"', "http://a.example/b": None}
    assert db.validators("http://a.example/") == ('"2"', None)  # now from the file
    assert db.get("http://a.example/").outlinks == links  # type: ignore[union-attr]
    reader.close()
    blocker.close()
    db.close()


def test_sqlite_close_writes_everything_recorded(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = SqliteCrawlDb(path, schedule(), batch=7)  # some batches handed over, the rest pending
    for i in range(20):
        db.record(Visit(f"http://a.example/{i}", 200, 0, fingerprint=str(i),
                        outlinks=[(f"http://a.example/{i + 1}", "next")]))
    db.close()
    db = SqliteCrawlDb(path, schedule())
    assert len(db) == 20
    assert db.get("http://a.example/19").outlinks == [("http://a.example/20", "next")]  # type: ignore[union-attr]
    db.close()


_KILLED_MID_BATCH = """
import os, signal, sys, time
from crawler.backends.sqlite.crawldb import SqliteCrawlDb
from crawler.crawldb import Visit
db = SqliteCrawlDb(sys.argv[1], batch=5000, batch_links=10**9)  # one batch of 3,000
links = [(f"http://a.example/0/{j}", "link " * 20) for j in range(300)]
for i in range(200):
    db.record(Visit(f"http://a.example/first/{i}", 200, 0, fingerprint="f", outlinks=links))
db.flush()  # the first batch is on disk
for i in range(3000):
    db.record(Visit(f"http://a.example/second/{i}", 200, 0, fingerprint="s", outlinks=links))
db.commit()  # the writer packs and writes 3,000 records in one transaction...
time.sleep(float(sys.argv[2]))
os.kill(os.getpid(), signal.SIGKILL)  # ...and the process dies while (or before) it does
"""


@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_sqlite_a_killed_process_loses_at_most_the_last_batch(tmp_path: Path, delay: float) -> None:
    """kill -9 while the writer thread writes a batch: the earlier batch is intact, the last
    one is all there or not at all, and the file opens again."""
    import subprocess
    import sys

    path = tmp_path / "db.sqlite"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_BATCH, str(path), str(delay)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr.decode()
    db = SqliteCrawlDb(path, schedule())
    urls = set(db.urls())
    first = {u for u in urls if "/first/" in u}
    second = {u for u in urls if "/second/" in u}
    assert len(first) == 200
    assert len(second) in (0, 3000)
    assert db.get("http://a.example/first/199").outlinks[-1][0] == "http://a.example/0/299"  # type: ignore[union-attr]
    db.close()


def test_outlinks_packed_a_slice_at_a_time_are_the_same_json() -> None:
    import json
    import zlib

    from crawler.crawldb.outlinks import _PACK_SLICE, pack_outlinks, unpack_outlinks

    for n in (1, _PACK_SLICE, _PACK_SLICE + 1, 3 * _PACK_SLICE + 7):
        links = [(f"http://a.example/{i}", f'"ü{i}\\') for i in range(n)]
        blob = pack_outlinks(links)
        assert blob is not None and unpack_outlinks(blob) == links
        assert zlib.decompress(blob) == json.dumps(links, separators=(",", ":")).encode()
    assert pack_outlinks([]) is None


def test_sqlite_hands_records_over_by_their_outlinks_too(tmp_path: Path) -> None:
    """Records waiting for the writer hold their outlinks as Python objects: a batch is handed
    over once it has ``batch_links`` outlinks, however few records it has."""
    db = SqliteCrawlDb(tmp_path / "db.sqlite", schedule(), batch=1000, batch_links=250)
    links = [(f"http://a.example/{i}", "t") for i in range(100)]
    for i in range(3):
        db.record(Visit(f"http://a.example/p{i}", 200, 0, fingerprint="f", outlinks=links))
    assert not db._pending  # 300 outlinks: handed over at the third record
    db.record(Visit("http://a.example/p3", 200, 0, fingerprint="f", outlinks=links))
    assert list(db._pending) == ["http://a.example/p3"]
    db.close()
