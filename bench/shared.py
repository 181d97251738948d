"""Benchmark of the state several workers share: near-duplicates on Redis, the Bloom seen-set,
the index on PostgreSQL.

Run from the project root (starts its own ``redis-server``; PostgreSQL at 127.0.0.1:5432, or
``TEST_POSTGRES_URL``, where it creates and drops a database)::

    .venv/bin/python bench/shared.py                 # everything (~3 min)
    .venv/bin/python bench/shared.py --only neardup,bloom,index --quick

It prints:

1. ``neardup``: decisions of two shared workers taking turns against one in-process detector
   on the synthetic labelled set and on real documentation pages in crawl order
   (``bench/realpages.py``'s trees, when installed): how many differ, time per page, Redis
   bytes per page by kind of key (``MEMORY USAGE``); then check-and-insert per second from one
   and from two client processes on ~5 KB pages, the time a client waits for Redis per page,
   the server time per script call and the commits retried;
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
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import Manager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import redis

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


def _crawl_order(pages: list[Any]) -> list[tuple[str, str, str | None]]:
    """bench/realpages.py's crawl order, as (url, main text, title)."""
    from bench.realpages import in_crawl_order

    return [(p.url, p.main_text, p.title or None) for p in in_crawl_order(pages)]


def _timed(det: RedisNearDuplicateDetector) -> dict[str, float]:
    """Wrap the detector's two scripts so the time spent waiting for Redis is summed."""
    spent = {"redis": 0.0}
    for name in ("_read", "_commit"):
        script = getattr(det, name)

        def call(*args: Any, _script: Any = script, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _script(*args, **kwargs)
            finally:
                spent["redis"] += time.perf_counter() - t0

        setattr(det, name, call)
    return spent


def _compare(
    server: RedisServer, name: str, pages: list[tuple[str, str, str | None]]
) -> None:
    """Two workers taking turns against one in-process detector: decisions that differ,
    time per page of each, Redis bytes per page by kind of key."""
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(server.client(), key, capacity=len(pages))
               for _ in range(2)]
    spent = [_timed(w) for w in workers]
    local = NearDuplicateDetector()
    differ = 0
    kinds: Counter[str] = Counter()
    shared_time = local_time = 0.0
    for n, (url, text, title) in enumerate(pages):
        t0 = time.perf_counter()
        a = workers[n % 2].check(url, text, title=title)
        t1 = time.perf_counter()
        b = local.check(url, text, title=title)
        shared_time += t1 - t0
        local_time += time.perf_counter() - t1
        differ += a != b
        kinds[a.kind] += 1
    redis_time = sum(s["redis"] for s in spent)
    mem = workers[0].memory()
    total = sum(mem.values())
    ranked = sorted(mem.items(), key=lambda kv: -kv[1])
    parts = ", ".join(f"{k} {v / len(pages):.0f}" for k, v in ranked if v / len(pages) >= 5)
    print(f"   {name}: {len(pages)} pages ({dict(kinds)}), {differ} decisions differ from "
          f"in-process; per page {shared_time / len(pages) * 1e3:.2f} ms shared (of which "
          f"{redis_time / len(pages) * 1e3:.2f} ms waiting for Redis) against "
          f"{local_time / len(pages) * 1e3:.2f} ms in-process")
    print(f"      Redis bytes per page {total / len(pages):,.0f} "
          f"(per original {total / max(1, workers[0].originals):,.0f}): {parts}")


def _client_run(
    port: int, key: str, clients: int, n: int, count: int, barrier: Any
) -> tuple[float, float, int]:
    """One client process of the throughput run: its share of the pages; (seconds taken,
    seconds waiting for Redis, commits retried)."""
    det = RedisNearDuplicateDetector(redis.Redis(host="127.0.0.1", port=port), key,
                                     capacity=count)
    spent = _timed(det)
    texts = text_pages(count, size=5000, seed=3)
    barrier.wait()
    t0 = time.perf_counter()
    for i in range(n, count, clients):
        det.check(f"http://h{i % 50}.test/{i}", texts[i])
    return time.perf_counter() - t0, spent["redis"], det.retries


def bench_neardup(server: RedisServer, quick: bool) -> None:
    print("1. Shared near-duplicates (Redis: READ, decide in the worker, COMMIT)")
    labelled = build_labelled_set(pages=60 if quick else 130, variants_per_page=6, seed=7)
    items = [(p.url, page_item(p.url, p.html)) for p in [*labelled.originals, *labelled.variants]]
    _compare(server, "labelled set", [
        (url, str(item["main_text"]), str(item.get("title") or "") or None) for url, item in items
    ])
    try:
        from bench.realpages import build

        real, skipped = build(per_tree=30 if quick else 80)
        order = _crawl_order(real)
        if len(order) > 100:
            _compare(server, "real pages in crawl order", order)
        else:
            print(f"   real pages: documentation trees missing ({skipped})")
    except OSError as exc:
        print(f"   real pages: not available ({exc})")

    count = 3000 if quick else 10000
    texts = text_pages(count, size=5000, seed=3)
    solo = NearDuplicateDetector()
    t0 = time.perf_counter()
    for i in range(count):
        solo.check(f"http://h{i % 50}.test/{i}", texts[i])
    print(f"   in-process detector, the same {count:,} pages of ~5 KB on 50 hosts: "
          f"{count / (time.perf_counter() - t0):,.0f} pages/s")
    for clients in (1, 2):
        key = fresh_key()
        RedisNearDuplicateDetector(server.client(), key, capacity=count)
        info0 = server.client().info("commandstats").get("cmdstat_evalsha", {})
        with Manager() as manager, ProcessPoolExecutor(clients) as pool:
            barrier = manager.Barrier(clients)
            runs = list(pool.map(_client_run, [server.port] * clients, [key] * clients,
                                 [clients] * clients, range(clients), [count] * clients,
                                 [barrier] * clients))
        took = max(r[0] for r in runs)
        info1 = server.client().info("commandstats").get("cmdstat_evalsha", {})
        calls = info1.get("calls", 0) - info0.get("calls", 0)
        usec = info1.get("usec", 0) - info0.get("usec", 0)
        det = RedisNearDuplicateDetector(server.client(), key, capacity=count)
        mem = sum(det.memory().values())
        waited = sum(r[1] for r in runs) / clients
        print(f"   {clients} client process(es), {count:,} pages of ~5 KB on 50 hosts: "
              f"{count / took:7,.0f} pages/s check-and-insert; each client waited for Redis "
              f"{waited / (count / clients) * 1e6:.0f} us per page "
              f"({count / clients / waited:,.0f} pages/s if features were free); "
              f"{calls / count:.2f} script calls per page, {usec / max(1, calls):.0f} us of "
              f"server time each; {sum(r[2] for r in runs)} commits retried; "
              f"{mem / count:.0f} B/document ({det.originals} originals)")


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
