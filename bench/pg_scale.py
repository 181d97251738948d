"""What the PostgreSQL crawl database and index cost per page, and whether the write path
keeps its rate with three workers writing at once, on plain and on hash-partitioned tables.

    .venv/bin/python bench/pg_scale.py [--pages 2000] [--partitions 8]
    .venv/bin/python bench/pg_scale.py --quick          # 500 pages per worker

Needs the PostgreSQL at 127.0.0.1:5432 (``TEST_POSTGRES_URL`` names another); each run gets a
database of its own, dropped at the end. The pages: the HTML files under /usr/share/doc (title,
visible text, links with their anchor texts, resolved), page ``j`` being file ``j`` mod their
number on host ``docs<j / files>.test``, so every URL is distinct while the texts are real.
Each worker is a process of its own writing through the real code: the crawl database
(:class:`~crawler.backends.postgres.crawldb.PostgresCrawlDb`: ``record`` per page,
``commit`` every 100) and the index (:class:`~crawler.backends.postgres.index.PostgresIndex`:
``add_page`` per page, ``commit`` every 100), then ``close`` (everything written).

Reported per run: pages written per second (all workers together, from the moment they all
start to the last ``close``), and per table the rows and ``pg_total_relation_size`` (heap,
TOAST, indexes; a partitioned table summed over its partitions; after ``VACUUM``, which
merges the GIN indexes' pending lists as autovacuum would) per page, then a projection
for 100 million pages.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from lxml import html as lxml_html

from crawler.backends.postgres.crawldb import PostgresCrawlDb
from crawler.backends.postgres.index import PostgresIndex
from crawler.crawldb.api import Visit
from crawler.index.base import PageDocument
from tests.pg_support import create_database, drop_database

TABLES = ("crawldb", "pages", "docs", "anchors", "outlinks")
COMMIT_EVERY = 100


def doc_files(root: str = "/usr/share/doc") -> list[Path]:
    return sorted(p for p in Path(root).rglob("*.htm*") if p.is_file() and p.stat().st_size > 0)


def parse(path: Path, root: str = "/usr/share/doc") -> tuple[str, str, list[tuple[str, str]]]:
    """Title, visible text and links (path relative to the tree, anchor text) of one file."""
    try:
        tree = lxml_html.fromstring(path.read_bytes())
    except (ValueError, lxml_html.etree.ParserError):
        return "", "", []
    for bad in tree.xpath("//script|//style"):
        bad.drop_tree()
    title = " ".join((tree.findtext(".//title") or "").split())
    text = " ".join(tree.text_content().split())
    base = "http://x.test/" + str(path.relative_to(root))
    links = []
    for a in tree.xpath("//a[@href]"):
        target = urlsplit(urljoin(base, a.get("href")))
        if target.netloc == "x.test" and target.scheme == "http":
            links.append((target.path, " ".join(a.text_content().split())))
    return title, text, links


Parsed = dict[int, tuple[str, str, list[tuple[str, str]]]]


def page(files: list[Path], parsed: Parsed, j: int) -> tuple[Visit, PageDocument]:
    k = j % len(files)
    if k not in parsed:
        parsed[k] = parse(files[k])
    title, text, links = parsed[k]
    host = f"docs{j // len(files)}.test"
    url = f"https://{host}/{files[k].relative_to('/usr/share/doc')}"
    outlinks = [(f"https://{host}{p}", t) for p, t in links]
    visit = Visit(url, 200, time.time(), fingerprint=f"{j:016x}", outlinks=outlinks)
    doc = PageDocument(url=url, site=host, title=title, text=text, status=200,
                       fetched_at="2026-11-27T00:00:00Z", outlinks=outlinks)
    return visit, doc


def worker(
    url: str, partitions: int, first: int, count: int, start: Any, ready: Any, done: Any
) -> None:
    files = doc_files()
    parsed: Parsed = {}
    work = [page(files, parsed, j) for j in range(first, first + count)]
    db = PostgresCrawlDb(url, "docs", partitions=partitions)
    index = PostgresIndex(url, partitions=partitions)
    ready.put(True)
    start.wait()
    for n, (visit, doc) in enumerate(work, 1):
        db.record(visit)
        index.add_page(doc)
        if n % COMMIT_EVERY == 0:
            db.commit()
            index.commit()
    db.close()
    index.close()
    done.put(time.perf_counter())


def sizes(url: str) -> dict[str, tuple[int, int]]:
    """Rows and bytes (pg_total_relation_size, partitions summed) of each table."""
    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # GIN pending lists merged, as autovacuum would
        for table in TABLES:
            size = conn.execute(
                "SELECT coalesce((SELECT sum(pg_total_relation_size(relid))"
                " FROM pg_partition_tree(%s) WHERE isleaf), pg_total_relation_size(%s))",
                (table, table),
            ).fetchone()
            rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            out[table] = (int(rows[0]), int(size[0]))  # type: ignore[index]
    return out


def run(
    workers: int, pages: int, partitions: int
) -> tuple[float, dict[str, tuple[int, int]], int]:
    url = create_database()
    try:
        # the schema first, so the workers' clocks measure writes, not CREATE TABLE
        PostgresCrawlDb(url, "docs", partitions=partitions).close()
        PostgresIndex(url, partitions=partitions).close()
        ctx = mp.get_context("spawn")
        start, ready, done = ctx.Event(), ctx.Queue(), ctx.Queue()
        procs = [
            ctx.Process(
                target=worker, args=(url, partitions, w * pages, pages, start, ready, done)
            )
            for w in range(workers)
        ]
        for p in procs:
            p.start()
        for _ in procs:  # each parses its pages (before the clock), then says so
            ready.get()
        t0 = time.perf_counter()
        start.set()
        ends = [done.get() for _ in procs]
        for p in procs:
            p.join()
        return workers * pages / (max(ends) - t0), sizes(url), workers * pages
    finally:
        drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages per worker")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    pages = 500 if args.quick else args.pages
    files = doc_files()
    print(f"{len(files)} HTML files under /usr/share/doc; {pages} pages per worker")
    print("| run | pages/s (all workers) | B/page crawldb | pages | docs | anchors | outlinks "
          "| total B/page | rows/page (crawldb, pages, docs, anchors, outlinks) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    totals = {}
    for workers, partitions in ((1, 0), (3, 0), (1, args.partitions), (3, args.partitions)):
        rate, tables, n = run(workers, pages, partitions)
        per = {t: b / n for t, (_, b) in tables.items()}
        total = sum(per.values())
        totals[(workers, partitions)] = (total, per)
        rows = ", ".join(f"{tables[t][0] / n:.2f}" for t in TABLES)
        name = f"{workers} worker{'s' if workers > 1 else ''}, " + (
            f"{partitions} partitions" if partitions else "plain tables")
        print(f"| {name} | {rate:,.0f} | " + " | ".join(f"{per[t]:,.0f}" for t in TABLES)
              + f" | {total:,.0f} | {rows} |", flush=True)
    total, per = totals[(3, 0)]
    print("\nprojection for 100 million pages (3 workers, plain tables): "
          + ", ".join(f"{t} {per[t] * 1e8 / 2**30:,.0f} GiB" for t in TABLES)
          + f"; total {total * 1e8 / 2**30:,.0f} GiB")


if __name__ == "__main__":
    main()
