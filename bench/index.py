"""Benchmark of the SQLite FTS5 index: writer pages/s, batch size, file size, search latency.

Run from the project root::

    .venv/bin/python bench/index.py            # 10,000 pages (~1 min)
    .venv/bin/python bench/index.py --quick    # 2,000 pages

The pages are ~5 KB of real prose each (see ``devsite/testset.py``) with ~95 outlinks:
a 40-link menu, 25 tags, 20 footer links and 6 "popular" links shared by the site's pages, plus
4 links to other pages with their own anchor text, which is what a template-heavy site gives
the anchor-text index to do.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.backends.sqlite.index import SQLiteIndex
from crawler.index.base import PageDocument
from devsite.testset import documents, text_pages


def make_pages(count: int, seed: int = 1) -> list[PageDocument]:
    rng = random.Random(seed)
    texts = text_pages(count, size=5000, seed=seed)
    titles = [d.title for d in documents()]
    sites = [f"site{i}" for i in range(10)]
    template = {
        site: [(f"http://{site}.test/nav/{j}", rng.choice(titles)[:40]) for j in range(91)]
        for site in sites
    }
    pages = []
    for i, text in enumerate(texts):
        site = sites[i % len(sites)]
        links = list(template[site])
        for _ in range(4):
            j = rng.randrange(count)
            links.append((f"http://{sites[j % len(sites)]}.test/page/{j}", rng.choice(titles)))
        pages.append(
            PageDocument(
                f"http://{site}.test/page/{i}",
                site=site,
                title=rng.choice(titles),
                text=text,
                status=200,
                fetched_at="2026-01-01T00:00:00Z",
                outlinks=links,
            )
        )
    return pages


def write(path: Path, pages: list[PageDocument], batch: int) -> float:
    ix = SQLiteIndex(path)
    t0 = time.perf_counter()
    for n, page in enumerate(pages, 1):
        ix.add_page(page)
        if n % batch == 0:
            ix.commit()
    ix.close()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    count = 2000 if args.quick else 10000
    pages = make_pages(count)
    links = statistics.fmean(len(p.outlinks) for p in pages)
    size = statistics.fmean(len(p.text) for p in pages)
    print(f"{count} pages, {size / 1024:.1f} KB of text and {links:.0f} outlinks each")
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (1, 50, 200, 1000):
            n = min(count, 500) if batch == 1 else count
            path = Path(tmp) / f"b{batch}.sqlite"
            took = write(path, pages[:n], batch)
            per_page = path.stat().st_size / n
            print(f"  batch of {batch:5d}: {n / took:7,.0f} pages/s "
                  f"({took / n * 1e3:.2f} ms/page, {n} pages), file {per_page / 1024:.1f} KB/page")
        path = Path(tmp) / "b200.sqlite"
        # refetch: every page again with the same links (the common case of a recrawl)
        ix = SQLiteIndex(path)
        t0 = time.perf_counter()
        for n, page in enumerate(pages[: count // 2], 1):
            ix.add_page(page)
            if n % 200 == 0:
                ix.commit()
        ix.close()
        took = time.perf_counter() - t0
        print(f"  refetch of {count // 2} pages (replace document and links): "
              f"{count // 2 / took:,.0f} pages/s")
        ix = SQLiteIndex(path)
        print(f"  index: {ix.stats()}")
        for query in ("function", "socket timeout", '"the default value"', "pars*",
                      "title:module", "anchor:reference", "return AND value NOT none"):
            t0 = time.perf_counter()
            for _ in range(5):
                hits = ix.search(query, limit=10)
            ms = (time.perf_counter() - t0) / 5 * 1e3
            print(f"  search {query!r:32s} {ms:7.1f} ms ({len(hits)} shown)")
        t0 = time.perf_counter()
        hits = ix.search("function", site="site3", limit=10)
        print(f"  search 'function' --site site3       "
              f"{(time.perf_counter() - t0) * 1e3:7.1f} ms ({len(hits)} shown)")
        ix.close()


if __name__ == "__main__":
    main()
