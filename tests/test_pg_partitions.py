"""The PostgreSQL crawl database and index with their big tables hash-partitioned
(``DATABASE_PARTITIONS``): the shared crawl-database and index tests run
again on partitioned tables, rows spread over the partitions, and three workers writing at once
lose nothing. Each test has a database of its own, dropped afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from crawler.backends.postgres.crawldb import PostgresCrawlDb, partition_count
from crawler.backends.postgres.index import PostgresIndex
from crawler.crawldb.api import Visit
from crawler.index.base import PageDocument
from tests.pg_support import pg_url  # noqa: F401
from tests.test_crawldb import (  # the shared crawl-database tests, on partitioned tables
    Opener,
    schedule,
    test_backend,  # noqa: F401
    test_outlinks_are_replaced_by_a_full_fetch_and_kept_otherwise,  # noqa: F401
    test_record_is_read_back_before_and_after_it_is_written,  # noqa: F401
)
from tests.test_index import (  # the shared index tests, on partitioned tables
    test_aliases_have_no_document_and_lend_their_anchors,  # noqa: F401
    test_anchor_text_finds_pages_never_fetched,  # noqa: F401
    test_finds_pages_by_their_text_with_snippets,  # noqa: F401
    test_gone_and_noindex_drop_the_document_but_keep_links_to_it,  # noqa: F401
    test_link_counts_within_one_transaction,  # noqa: F401
    test_many_links_with_the_same_text_are_one_anchor,  # noqa: F401
    test_refetch_replaces_document_and_links,  # noqa: F401
    test_rollback_and_reopen,  # noqa: F401
    test_site_filter,  # noqa: F401
)

PARTITIONS = 4


@pytest.fixture
def opener(request: pytest.FixtureRequest, pg_url: str) -> Callable[..., object]:  # noqa: F811
    """A crawl database or an index (whichever the imported test wants) on partitioned
    tables."""
    if request.module is not None and request.node.function.__module__ == "tests.test_index":
        return lambda: PostgresIndex(pg_url, partitions=PARTITIONS)
    return lambda crawl="site": PostgresCrawlDb(
        pg_url, crawl, schedule(), partitions=PARTITIONS
    )


@pytest.fixture
def index(opener: Callable[[], PostgresIndex]) -> Iterator[PostgresIndex]:
    ix = opener()
    yield ix
    ix.close()


def _rows_per_partition(url: str, table: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [
            int(conn.execute(f"SELECT count(*) FROM {table}_p{i}").fetchone()[0])  # type: ignore[index]
            for i in range(PARTITIONS)
        ]


def test_one_setting_partitions_the_crawl_database_and_the_index(
    pg_url: str,  # noqa: F811
) -> None:
    """DATABASE_PARTITIONS splits both stores' big tables: one choice, a crawl's size."""
    settings = {"DATABASE_URL": pg_url, "DATABASE_PARTITIONS": PARTITIONS}
    crawler = get_crawler(Spider, settings)
    db = PostgresCrawlDb.from_crawler(crawler)
    ix = PostgresIndex.from_settings(crawler.settings)
    try:
        db.record(Visit("https://h.test/", 200, 1000.0, fingerprint="f"))
        db.commit()
        ix.add_page(PageDocument(url="https://h.test/", site="h", title="t", text="words",
                                 status=200, outlinks=[]))
        ix.commit()
        with psycopg.connect(pg_url) as conn:
            assert partition_count(conn, "crawldb") == PARTITIONS
            assert partition_count(conn, "docs") == PARTITIONS
    finally:
        db.close()
        ix.close()


def test_tables_are_partitioned_and_rows_spread(pg_url: str) -> None:  # noqa: F811
    db = PostgresCrawlDb(pg_url, "site", schedule(), partitions=PARTITIONS)
    for i in range(400):
        db.record(Visit(f"https://h{i % 7}.test/p/{i}", 200, 1000.0 + i, fingerprint=str(i)))
    db.commit()
    assert len(db) == 400
    ix = PostgresIndex(pg_url, partitions=PARTITIONS)
    for i in range(100):
        ix.add_page(PageDocument(
            url=f"https://h.test/{i}", site="h", title=f"page {i}", text=f"words number {i}",
            status=200, outlinks=[(f"https://h.test/{i + 1}", f"next {i}")],
        ))
    ix.commit()
    assert ix.search("number")
    ix.close()
    with psycopg.connect(pg_url) as conn:
        assert partition_count(conn, "crawldb") == PARTITIONS
        assert all(partition_count(conn, t) == PARTITIONS for t in ("docs", "anchors", "outlinks"))
        assert partition_count(conn, "pages") == 0
    assert all(n > 50 for n in _rows_per_partition(pg_url, "crawldb"))
    assert all(n > 5 for n in _rows_per_partition(pg_url, "docs"))
    db.close()
    # a worker that asks for another shape gets the stored one: the table is not re-created
    plain = PostgresCrawlDb(pg_url, "site", schedule(), partitions=0)
    assert len(plain) == 400
    plain.close()


def test_three_workers_write_at_once(pg_url: str) -> None:  # noqa: F811
    """Three crawl databases and three indexes on one partitioned database, writing together
    (overlapping URLs and link targets): every record and every link count lands."""
    dbs = [PostgresCrawlDb(pg_url, "site", schedule(), partitions=PARTITIONS) for _ in range(3)]
    ixs = [PostgresIndex(pg_url, partitions=PARTITIONS) for _ in range(3)]

    def work(w: int) -> None:
        for i in range(300):
            url = f"https://h{i % 5}.test/{w}/{i}"
            dbs[w].record(Visit(url, 200, 1000.0, fingerprint=str(i)))
            ixs[w].add_page(PageDocument(
                url=url, site="h", title="t", text=f"text {i}", status=200,
                outlinks=[(f"https://h0.test/shared/{i % 10}", "shared anchor")],
            ))
            if i % 50 == 49:
                dbs[w].commit()
                ixs[w].commit()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for db, ix in zip(dbs, ixs, strict=True):
        db.commit()  # hands the last batch to the writer thread, and returns at once
        ix.commit()
    for db, ix in zip(dbs, ixs, strict=True):
        db.flush()  # every writer's batches landed, not only the one that counts
        ix.flush()
    assert len(dbs[0]) == 900
    with psycopg.connect(pg_url) as conn:
        n = conn.execute("SELECT sum(n) FROM anchors WHERE anchor = 'shared anchor'").fetchone()
        assert n is not None and n[0] == 900
    for db, ix in zip(dbs, ixs, strict=True):
        db.close()
        ix.close()


__all__ = ["Opener"]
