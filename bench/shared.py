"""Benchmark of the state several workers share: near-duplicates on Redis and the index on
PostgreSQL (the seen-set: ``bench/seenset.py``).

Run from the project root (starts its own ``redis-server``; PostgreSQL at 127.0.0.1:5432, or
``TEST_POSTGRES_URL``, where it creates and drops a database)::

    .venv/bin/python bench/shared.py                 # everything (~4 min)
    .venv/bin/python bench/shared.py --only neardup,index --quick
    git archive main | tar -x -C /tmp/base             # the same real-pages run of main's code,
    .venv/bin/python bench/shared.py --only neardup --baseline /tmp/base --runs 3  # alternating
    .venv/bin/python bench/shared.py --only neardup --baseline /tmp/base --instructions
    .venv/bin/python bench/shared.py --only neardup --quick --devsite --instructions  # the
    # pages of bench/partition_costs.py --real's crawl too (its capacity)

It prints:

1. ``neardup``: decisions of two shared workers taking turns against one in-process detector
   on the synthetic labelled set and on real documentation pages in crawl order
   (``bench/realpages.py``'s trees, when installed): how many differ, time per page, Redis
   bytes per page by kind of key (``MEMORY USAGE``), and what Redis spent per real page: server
   time in the commits' ``EXEC`` (``INFO commandstats``), the CPU time of its main thread, the
   other commands; with ``--baseline DIR`` (another checkout, e.g. ``git archive main``) the
   real pages are run through that tree's code too, alternating, ``--runs`` times each, on the
   same Redis; with ``--instructions``, once more each against a ``redis-server`` under
   valgrind's callgrind, which counts its instructions per page (what a busy machine does not
   change); with ``--devsite``, the same on the real crawl's devsite pages; then
   check-and-insert per second from one and from two client processes on ~5 KB
   pages, the time a client waits for Redis per page, the server time per commit and the
   commits retried;
2. ``index``: PostgreSQL index writes per second (pages with ~95 outlinks, batches of 200)
   against SQLite FTS5, both measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import Manager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from bench.index import make_pages
from crawler.backends.postgres.index import PostgresIndex
from crawler.backends.redis.neardup import DEFAULT_CAPACITY, RedisNearDuplicateDetector
from crawler.backends.sqlite.index import SQLiteIndex
from crawler.content.neardup import NearDuplicateDetector
from devsite.testset import build_labelled_set, page_item, text_pages
from tests.pg_support import create_database, drop_database
from tests.redis_support import RedisServer, free_port, fresh_key, start_redis


def _crawl_order(pages: list[Any]) -> list[tuple[str, str, str | None]]:
    """bench/realpages.py's crawl order, as (url, main text, title)."""
    from bench.realpages import in_crawl_order

    return [(p.url, p.main_text, p.title or None) for p in in_crawl_order(pages)]


def _timed(det: RedisNearDuplicateDetector) -> dict[str, float]:
    """Wrap the detector's calls on Redis so the time spent waiting for it is summed."""
    spent = {"redis": 0.0, "depth": 0}
    for target, names in ((det.store, ("host_id", "read", "host_state", "records", "commit")),):
        for name in names:
            method = getattr(target, name)

            def call(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                spent["depth"] += 1  # one call may make another: count the outer call only
                try:
                    return _method(*args, **kwargs)
                finally:
                    spent["depth"] -= 1
                    if not spent["depth"]:
                        spent["redis"] += time.perf_counter() - t0

            setattr(target, name, call)
    return spent


# Two shared workers taking turns on the pickled real pages against one in-process detector,
# with the code of the tree it runs in (this one, or --baseline's): only interfaces every layout
# has. Prints one JSON line.
_REAL_RUN = r"""
import json, os, pickle, sys, time
sys.path.insert(0, os.getcwd())
import redis
from crawler.content.neardup import NearDuplicateDetector
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
import subprocess
port, path, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
valgrind = sys.argv[4] if len(sys.argv) > 4 else ""  # pid of a redis-server under callgrind
pages = pickle.load(open(path, "rb"))
capacity = int(sys.argv[5]) if len(sys.argv) > 5 else len(pages)
client = redis.Redis(host="127.0.0.1", port=port)
workers = [RedisNearDuplicateDetector(redis.Redis(host="127.0.0.1", port=port), key,
                                      capacity=capacity) for _ in range(2)]
local = NearDuplicateDetector()
differ, shared, alone = 0, 0.0, 0.0
for w in workers:  # connected before counting
    w.check("http://warm.up/", "", add=False)
if valgrind:
    subprocess.run(["callgrind_control", "-z", valgrind], check=True, capture_output=True)
stats0, cpu0 = client.info("commandstats"), client.info("cpu")
for n, (url, text, title) in enumerate(pages):
    t0 = time.perf_counter()
    a = workers[n % 2].check(url, text, title=title)
    t1 = time.perf_counter()
    differ += a != local.check(url, text, title=title)
    shared += t1 - t0
    alone += time.perf_counter() - t1
stats1, cpu1 = client.info("commandstats"), client.info("cpu")
if valgrind:
    subprocess.run(["callgrind_control", "-d", valgrind], check=True, capture_output=True)
def delta(name, field):
    return stats1.get(name, {}).get(field, 0) - stats0.get(name, {}).get(field, 0)
inner = sum(delta(k, "calls") for k in stats1 if k not in ("cmdstat_exec", "cmdstat_info"))
cpu = sum(cpu1[k] - cpu0[k] for k in ("used_cpu_user_main_thread", "used_cpu_sys_main_thread"))
mem = workers[0].memory()
print(json.dumps({
    "pages": len(pages), "differ": differ, "originals": workers[0].originals,
    "shared_ms": shared / len(pages) * 1e3, "alone_ms": alone / len(pages) * 1e3,
    "script_us": delta("cmdstat_exec", "usec") / len(pages),
    "calls": delta("cmdstat_exec", "calls") / len(pages),
    "commands": inner / len(pages), "cpu_us": cpu / len(pages) * 1e6, "memory": mem,
}))
"""


def _real_run(
    port: int, tree: Path, path: Path, valgrind: int = 0, capacity: int = 0
) -> dict[str, Any]:
    """:data:`_REAL_RUN` with ``tree``'s code, in a process of its own (``capacity``: the
    detectors', else the pages')."""
    out = subprocess.run(
        [sys.executable, "-c", _REAL_RUN, str(port), str(path), fresh_key(),
         str(valgrind or ""), *([str(capacity)] if capacity else [])],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@contextlib.contextmanager
def callgrind_redis(out: Path) -> Iterator[tuple[int, int]]:
    """A ``redis-server`` under valgrind's callgrind, writing its counts in ``out`` (no
    persistence): its port and process id, once it answers; stopped (its counts dumped) after."""
    port = free_port()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.out",
         "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(600):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        client.close()
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait()


def _instructions(tree: Path, path: Path, pages: int, capacity: int = 0) -> float | None:
    """Instructions redis-server executes per real page with ``tree``'s code, counted by
    valgrind's callgrind (the same on a busy machine as on an idle one); None without it."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        return None
    with tempfile.TemporaryDirectory() as tmp, callgrind_redis(Path(tmp)) as (port, pid):
        _real_run(port, tree, path, pid, capacity)
        time.sleep(0.5)
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime)
        for line in dumps[-1].read_text().splitlines():
            if line.startswith("summary:"):
                return int(line.split()[1]) / pages
        return None


def _redis_cost(
    server: RedisServer, order: list[tuple[str, str, str | None]], baseline: Path | None,
    runs: int, instructions: bool, capacity: int = 0,
) -> None:
    """What Redis spends per real page, this tree's code (and ``baseline``'s, alternating);
    ``capacity``: the detectors' (else the pages')."""
    trees = [("this tree", Path(__file__).resolve().parents[1])]
    if baseline is not None:
        trees.insert(0, ("baseline", baseline.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pages.pickle"
        path.write_bytes(pickle.dumps(order))
        results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
        for _ in range(runs):
            for name, tree in trees:
                results[name].append(_real_run(server.port, tree, path, 0, capacity))
        counted = {name: _instructions(tree, path, len(order), capacity) if instructions else None
                   for name, tree in trees}
    for name, rows in results.items():
        best = min(rows, key=lambda r: r["script_us"])
        total = sum(best["memory"].values())
        spread = ", ".join(f"{r['script_us']:.0f}" for r in rows)
        print(f"   Redis per real page, {name}: commits (EXEC) {best['script_us']:.0f} us of "
              f"server time (runs: {spread}; {best['calls']:.2f} EXEC, {best['commands']:.1f} "
              f"other commands), main-thread CPU {best['cpu_us']:.0f} us, "
              f"{total / best['pages']:,.0f} B; "
              f"{best['differ']} decisions differ from in-process; "
              f"{best['shared_ms']:.2f} ms per page shared, {best['alone_ms']:.2f} in-process")
        if counted[name] is not None:
            print(f"      redis-server instructions per real page (callgrind): "
                  f"{counted[name] / 1e3:,.0f} thousand")


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


def _devsite_order() -> list[tuple[str, str, str | None]]:
    """The pages of ``bench/partition_costs.py --real``'s devsite (40 hosts of 50 pages), a
    page of each host in turn, as (url, main text, title)."""
    from urllib.parse import urlsplit

    from crawler.content.html import parse_html
    from crawler.content.maintext import main_text
    from devsite import HostSpec, build_site

    hosts = [f"127.0.0.{i}" for i in range(2, 42)]
    graph = build_site([HostSpec(h, pages=50) for h in hosts], links_per_page=5,
                       cross_host_links=1, port=8000)
    per_host = []
    for host in hosts:
        pages = []
        for url in [graph.url(host, "/"), *graph.page_urls(host)]:
            doc = graph.resolve(host, urlsplit(url).path)
            if doc is not None:
                html = doc.body.decode()
                pages.append((url, main_text(html), parse_html(doc.body, "utf-8").title or None))
        per_host.append(pages)
    return [pages[i] for i in range(max(map(len, per_host))) for pages in per_host
            if i < len(pages)]


def bench_neardup(
    server: RedisServer, quick: bool, baseline: Path | None = None, runs: int = 1,
    instructions: bool = False, devsite: bool = False,
) -> None:
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
            _redis_cost(server, order, baseline, runs, instructions)
        else:
            print(f"   real pages: documentation trees missing ({skipped})")
    except OSError as exc:
        print(f"   real pages: not available ({exc})")
    if devsite:  # the real crawl's pages, the capacity its workers have
        order = _devsite_order()
        _compare(server, "the devsite crawl's pages", order)
        _redis_cost(server, order, baseline, runs, instructions, DEFAULT_CAPACITY)

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
        info0 = server.client().info("commandstats").get("cmdstat_exec", {})
        with Manager() as manager, ProcessPoolExecutor(clients) as pool:
            barrier = manager.Barrier(clients)
            runs = list(pool.map(_client_run, [server.port] * clients, [key] * clients,
                                 [clients] * clients, range(clients), [count] * clients,
                                 [barrier] * clients))
        took = max(r[0] for r in runs)
        info1 = server.client().info("commandstats").get("cmdstat_exec", {})
        calls = info1.get("calls", 0) - info0.get("calls", 0)
        usec = info1.get("usec", 0) - info0.get("usec", 0)
        det = RedisNearDuplicateDetector(server.client(), key, capacity=count)
        mem = sum(det.memory().values())
        waited = sum(r[1] for r in runs) / clients
        print(f"   {clients} client process(es), {count:,} pages of ~5 KB on 50 hosts: "
              f"{count / took:7,.0f} pages/s check-and-insert; each client waited for Redis "
              f"{waited / (count / clients) * 1e6:.0f} us per page "
              f"({count / clients / waited:,.0f} pages/s if features were free); "
              f"{calls / count:.2f} commits (EXEC) per page, {usec / max(1, calls):.0f} us of "
              f"server time each; {sum(r[2] for r in runs)} commits retried; "
              f"{mem / count:.0f} B/document ({det.originals} originals)")


def bench_index(quick: bool) -> None:
    print("2. Index writes: PostgreSQL against SQLite FTS5 (batches of 200 pages)")
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
    parser.add_argument("--only", default="neardup,index")
    parser.add_argument("--baseline", type=Path, help="a tree whose shared near-duplicate code "
                        "to run on the real pages too (e.g. git archive main)")
    parser.add_argument("--runs", type=int, default=1, help="real-page runs per tree")
    parser.add_argument("--instructions", action="store_true", help="also count redis-server's "
                        "instructions per real page under valgrind (callgrind), once per tree")
    parser.add_argument("--devsite", action="store_true", help="also the pages of "
                        "bench/partition_costs.py --real's devsite, two workers taking turns")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        server = start_redis(Path(tmp))
        try:
            if "neardup" in only:
                bench_neardup(server, args.quick, args.baseline, args.runs, args.instructions,
                              args.devsite)
        finally:
            server.stop()
    if "index" in only:
        bench_index(args.quick)


if __name__ == "__main__":
    main()
