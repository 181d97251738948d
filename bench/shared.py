"""Benchmark of the state several workers share: near-duplicates on Redis, the Bloom seen-set,
the index on PostgreSQL.

Run from the project root (starts its own ``redis-server``; PostgreSQL at 127.0.0.1:5432, or
``TEST_POSTGRES_URL``, where it creates and drops a database)::

    .venv/bin/python bench/shared.py                 # everything (~3 min)
    .venv/bin/python bench/shared.py --only neardup,bloom,index --quick

It prints:

1. ``neardup``: decisions of the shared detector against the in-process one on the labelled
   set (how many differ), check-and-insert calls per second from one and from two clients
   (threads) on ~5 KB pages, Redis round trips per page, and Redis bytes per document
   (``MEMORY USAGE`` of every key, divided by the documents indexed);
2. ``bloom``: memory and measured false-positive rate of the seen-set Bloom filter at 10
   million URLs (1 %), next to an exact SET (measured at 1 million, per URL), and add-script
   throughput with each;
3. ``index``: PostgreSQL index writes per second (pages with ~95 outlinks, batches of 200)
   against SQLite FTS5, both measured here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench.index import make_pages
from crawler.content.neardup import NearDuplicateDetector
from crawler.content.redis_neardup import RedisNearDuplicateDetector
from crawler.frontier import Entry, PolitenessPolicy
from crawler.frontier.redis import RedisFrontier, bloom_params
from crawler.index.postgres import PostgresIndex
from crawler.index.sqlite import SQLiteIndex
from devsite.testset import build_labelled_set, page_item, text_pages
from tests.pg_support import create_database, drop_database
from tests.redis_support import RedisServer, fresh_key, start_redis


def bench_neardup(server: RedisServer, quick: bool) -> None:
    print("1. Shared near-duplicates (Redis, one Lua call per page)")
    labelled = build_labelled_set(pages=60 if quick else 130, variants_per_page=6, seed=7)
    pages = [*labelled.originals, *labelled.variants]
    shared = RedisNearDuplicateDetector(server.client(), fresh_key())
    local = NearDuplicateDetector()
    differ = 0
    for p in pages:
        text = page_item(p.url, p.html)["main_text"]
        a, b = shared.check(p.url, text), local.check(p.url, text)
        differ += (a.kind, a.duplicate_of) != (b.kind, b.duplicate_of)
    print(f"   labelled set: {len(pages)} pages, {differ} decisions differ from in-process")

    count = 3000 if quick else 10000
    texts = text_pages(count, size=5000, seed=3)
    for clients in (1, 2):
        key = fresh_key()
        workers = [RedisNearDuplicateDetector(server.client(), key, capacity=count)
                   for _ in range(clients)]
        info0 = server.client().info("stats")["total_commands_processed"]

        def run(n: int, workers: list[RedisNearDuplicateDetector] = workers) -> None:
            for i in range(n, count, len(workers)):
                workers[n].check(f"http://h{i % 50}.test/{i}", texts[i])

        threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - t0
        calls = server.client().info("stats")["total_commands_processed"] - info0
        mem = workers[0].memory()
        # the same work without Redis: what the worker spends computing the MinHash
        t1 = time.perf_counter()
        solo = NearDuplicateDetector()
        for i in range(min(count, 3000)):
            solo.check(f"http://h.test/{i}", texts[i])
        local_rate = min(count, 3000) / (time.perf_counter() - t1)
        print(f"   {clients} client(s): {count / took:7,.0f} pages/s check-and-insert "
              f"(in-process detector alone: {local_rate:,.0f}/s), "
              f"{calls / count:.1f} Redis commands/page, {mem / count:.0f} B/document "
              f"({workers[0].originals} originals)")
    # the script's own cost, without the MinHash: pre-computed signatures
    key = fresh_key()
    det = RedisNearDuplicateDetector(server.client(), key, capacity=count)
    rng = np.random.default_rng(1)
    sigs = rng.integers(0, 256, size=(count, det.num_perm), dtype=np.uint8)
    bands = [det.band_hashes(rng.integers(0, 2**32, size=det.num_perm, dtype=np.uint64))
             for _ in range(count)]
    script = det._script
    t0 = time.perf_counter()
    for i in range(count):
        script(args=[det.prefix, det.band_bits, det.table_bits, det.table_bits,
                     f"http://x.test/{i}", i.to_bytes(8, "big"), "x.test",
                     i.to_bytes(8, "big"), sigs[i].tobytes(), bands[i], "1", "0.5"])
    took = time.perf_counter() - t0
    print(f"   the Lua call alone (signatures precomputed): {count / took:,.0f} calls/s, "
          f"{det.memory() / count:.0f} B/document at capacity {count:,}")


def bench_bloom(server: RedisServer, quick: bool) -> None:
    print("2. Seen-set as a Bloom filter (1 %)")
    n = 1_000_000 if quick else 10_000_000
    bits, probes = bloom_params(n, 0.01)
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    h1, h2 = keys >> np.uint64(32), keys & np.uint64(0xFFFFFFFF)
    bitmap = np.zeros((bits + 7) // 8, dtype=np.uint8)
    for i in range(probes):
        off = (h1 + np.uint64(i) * h2) % np.uint64(bits)
        np.bitwise_or.at(bitmap, (off // np.uint64(8)).astype(np.int64),
                         (np.uint8(128) >> (off % np.uint64(8)).astype(np.uint8)))
    client = server.client()
    key = "{" + fresh_key() + "}:seen:bloom"
    client.set(key, bitmap.tobytes())
    used = client.memory_usage(key, samples=0)
    fresh = rng.integers(0, 2**63, size=200_000, dtype=np.uint64)
    f1, f2 = fresh >> np.uint64(32), fresh & np.uint64(0xFFFFFFFF)
    hit = np.ones(len(fresh), dtype=bool)
    for i in range(probes):
        off = (f1 + np.uint64(i) * f2) % np.uint64(bits)
        byte = bitmap[(off // np.uint64(8)).astype(np.int64)]
        hit &= (byte & (np.uint8(128) >> (off % np.uint64(8)).astype(np.uint8))) > 0
    print(f"   {n:,} URLs: {used / 2**20:.1f} MiB ({used / n:.2f} B/URL), {probes} probes, "
          f"false positives {hit.mean() * 100:.2f} % of 200,000 new URLs")
    client.delete(key)
    m = 1_000_000
    set_key = "{" + fresh_key() + "}:seen"
    pipe = client.pipeline(transaction=False)
    for start in range(0, m, 10_000):
        pipe.sadd(set_key, *[int(k).to_bytes(8, "big") for k in keys[start:start + 10_000]])
    pipe.execute()
    per_url = client.memory_usage(set_key, samples=0) / m
    print(f"   exact SET: {per_url:.1f} B/URL at {m:,} (x{per_url * n / used:.0f} the filter "
          f"at {n:,})")
    client.delete(set_key)
    links = 20_000 if quick else 100_000
    for name, bloom in (("SET", None), ("Bloom", bloom_params(n, 0.01))):
        f = RedisFrontier(server.client(), fresh_key(), PolitenessPolicy(), seen_bloom=bloom)
        entries = [Entry(url=f"http://h{i % 100}.test/{i}", host=f"h{i % 100}.test")
                   for i in range(links)]
        t0 = time.perf_counter()
        for start in range(0, links, 50):
            f.add_many(entries[start:start + 50])
        print(f"   add script, 50 links per call, {name:5s}: "
              f"{links / (time.perf_counter() - t0):,.0f} links/s")
        f.reset()


def bench_index(quick: bool) -> None:
    print("3. Index writes: PostgreSQL against SQLite FTS5 (batches of 200 pages)")
    count = 1000 if quick else 4000
    pages = make_pages(count)
    url = create_database()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, open_index in (
                ("SQLite", lambda: SQLiteIndex(Path(tmp) / "b.sqlite")),
                ("PostgreSQL", lambda: PostgresIndex(url)),
            ):
                ix = open_index()
                t0 = time.perf_counter()
                handed = 0.0
                for n, page in enumerate(pages, 1):
                    ix.add_page(page)
                    if n % 200 == 0:
                        c0 = time.perf_counter()
                        ix.commit()
                        handed += time.perf_counter() - c0
                ix.flush()
                took = time.perf_counter() - t0
                ix.close()
                print(f"   {name:10s}: {count / took:6,.0f} pages/s written; the caller spent "
                      f"{handed / (count / 200) * 1e3:.1f} ms per commit() of 200 pages")
            ix = PostgresIndex(url, readonly=True)
            t0 = time.perf_counter()
            for _ in range(5):
                hits = ix.search("function", limit=10)
            print(f"   search 'function' on PostgreSQL: {(time.perf_counter() - t0) / 5 * 1e3:.1f}"
                  f" ms ({len(hits)} shown)")
            ix.close()
    finally:
        drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="neardup,bloom,index")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        server = start_redis(Path(tmp))
        try:
            if "neardup" in only:
                bench_neardup(server, args.quick)
            if "bloom" in only:
                bench_bloom(server, args.quick)
        finally:
            server.stop()
    if "index" in only:
        bench_index(args.quick)


if __name__ == "__main__":
    main()
