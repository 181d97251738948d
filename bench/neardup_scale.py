"""The shared (Redis) near-duplicate detector at a million pages: a worker's memory, a new
worker's first decision, checks per second, Redis bytes per page, and the decisions on the real
pages against the in-process detector.

Run from the project root (starts its own ``redis-server`` on a free port, no persistence)::

    .venv/bin/python bench/neardup_scale.py                      # 1,000,000 pages, 2 workers
    .venv/bin/python bench/neardup_scale.py --pages 50000 --workers 1   # a quick look

Pages are synthetic, built from real ones (``bench/realpages.py``: the Debian documentation
trees under ``/usr/share/doc``): page ``n`` is on host ``s<n % hosts>.<tree>.test``, has the
lines its tree's pages share (its template: headings, navigation text) and ~12 lines of real
text drawn from its tree's other lines, so two pages share their template and little else; a
share of them are copies of an earlier page (exact, on another host) or near copies (one line
replaced). Each worker process checks every ``workers``-th page with its own client and
reports its RSS (``VmRSS``), its cache's estimate and its pages/s as it goes; Redis's
``used_memory`` per page checked is measured against the empty server's, and
``commandstats`` gives the scripts' server time per check.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.config import defaults
from crawler.content.neardup import NearDuplicateDetector

KEY = "scale"
HOSTS = 5000
EXACT, NEAR = 0.08, 0.22  # shares of pages that copy an earlier one, exactly / with an edit
CONTENT_LINES = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


# --- the synthetic pages -------------------------------------------------------------------

class Corpus:
    """Per tree: its template lines (on 3 or more of its pages) and its other lines."""

    def __init__(self, per_tree: int, hosts: int = HOSTS) -> None:
        from bench.realpages import build

        self.hosts = hosts
        pages, skipped = build(per_tree=per_tree)
        if len(pages) < 100:
            raise SystemExit(f"documentation trees missing ({skipped}): "
                             "bench/realpages.py --install")
        by_tree: dict[str, list[list[str]]] = defaultdict(list)
        for p in pages:
            if p.kind == "original":
                by_tree[p.tree].append([x for x in p.main_text.splitlines() if x.strip()])
        self.trees: list[str] = []
        self.template: dict[str, list[str]] = {}
        self.content: dict[str, list[str]] = {}
        for tree, docs in sorted(by_tree.items()):
            counts = Counter(line for doc in docs for line in set(doc))
            common = [x for x, n in counts.items() if n >= 3]
            rest = [x for x, n in counts.items() if n < 3 and len(x.split()) >= 4]
            if len(rest) >= 200:
                self.trees.append(tree)
                self.template[tree] = sorted(common)[:20]
                self.content[tree] = sorted(rest)
        self.real = pages

    def tree(self, n: int) -> str:
        """The tree of page ``n``'s host."""
        return self.trees[(n % self.hosts) % len(self.trees)]

    def original(self, n: int) -> tuple[str, str, str]:
        """(url, main text, title) of page ``n`` as an original."""
        rng = random.Random(n)
        tree = self.tree(n)
        host = f"s{n % self.hosts}.{tree.replace('_', '-').replace('.', '-')}.test"
        template = self.template[tree]
        lines = template[:3] + rng.sample(self.content[tree], CONTENT_LINES) + template[3:6]
        return f"http://{host}/p/{n}.html", "\n".join(lines), f"{tree} {n}"

    def page(self, n: int) -> tuple[str, str, str]:
        """Page ``n``: an original, or a copy of an earlier one."""
        rng = random.Random(-n - 1)
        r = rng.random()
        url, text, title = self.original(n)
        if n < 100 or r >= EXACT + NEAR:
            return url, text, title
        _, text, title = self.original(rng.randrange(n))
        if r >= EXACT:  # a near copy: one line replaced
            lines = text.splitlines()
            tree = self.tree(n)
            lines[3 + rng.randrange(CONTENT_LINES)] = rng.choice(self.content[tree])
            text = "\n".join(lines)
        return url, text, title


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


# --- the workers ---------------------------------------------------------------------------

def worker(w: int, workers: int, pages: int, port: int, cache: int, capacity: int,
           every: int, corpus: Corpus, out: Any, deadline: float) -> None:
    detector = RedisNearDuplicateDetector(redis.Redis(port=port), KEY, capacity=capacity,
                                          cache_bytes=cache)
    kinds: Counter[str] = Counter()
    t0 = time.perf_counter()
    out.put(("progress", w, 0, rss(), 0, 1.0, 0, {}))  # the worker's RSS before any page
    for done, n in enumerate(range(w, pages, workers), 1):
        url, text, title = corpus.page(n)
        kinds[detector.check(url, text, title=title).kind] += 1
        last = n + workers >= pages or (deadline and time.time() > deadline)
        if done % every == 0 or last:
            out.put(("progress", w, done, rss(), detector.cache_used, time.perf_counter() - t0,
                     detector.retries, dict(kinds)))
        if last:
            break
    detector.close()
    out.put(("done", w))


def first_decision(port: int, cache: int, capacity: int, corpus: Corpus, n: int, out: Any) -> None:
    """A new worker process: build the detector, judge one page (a near copy of an early
    one), time both."""
    t0 = time.perf_counter()
    detector = RedisNearDuplicateDetector(redis.Redis(port=port), KEY, capacity=capacity,
                                          cache_bytes=cache)
    _, text, title = corpus.original(7)
    lines = text.splitlines()
    lines[5] = "a line of this worker's own, added to an early page for the test"
    t1 = time.perf_counter()
    decision = detector.check(f"http://late.test/{n}", "\n".join(lines), title=title)
    t2 = time.perf_counter()
    out.put(("first", t1 - t0, t2 - t1, decision.kind, decision.duplicate_of, rss(),
             detector.replayed))


def real_pages(port: int, per_tree: int) -> tuple[int, int, Counter[str]]:
    """Decisions of the shared detector (two workers taking turns) and the in-process one on
    the real pages in crawl order: (pages, differing, kinds)."""
    from bench.realpages import build, in_crawl_order

    pages, _ = build(per_tree=per_tree)
    ordered = in_crawl_order(pages)
    workers = [RedisNearDuplicateDetector(redis.Redis(port=port), "real") for _ in range(2)]
    local = NearDuplicateDetector()
    differing = 0
    kinds: Counter[str] = Counter()
    for i, p in enumerate(ordered):
        a = workers[i % 2].check(p.url, p.main_text, title=p.title or None)
        b = local.check(p.url, p.main_text, title=p.title or None)
        differing += a != b
        kinds[a.kind] += 1
    return len(ordered), differing, kinds


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def script_usec(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats")
    s = stats.get("cmdstat_evalsha", {})
    return int(s.get("usec", 0)), int(s.get("calls", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-bytes", type=int, default=defaults.NEARDUP_CACHE_BYTES)
    parser.add_argument("--per-tree", type=int, default=80, help="real pages per tree")
    parser.add_argument("--every", type=int, default=50_000, help="pages between reports")
    parser.add_argument("--no-real", action="store_true", help="skip the real-pages check")
    parser.add_argument("--capacity", type=int, default=0,
                        help="NEARDUP_SHARED_CAPACITY (default: --pages)")
    parser.add_argument("--hosts", type=int, default=HOSTS,
                        help="hosts the pages spread over (fewer: a host's model at a "
                        "million pages' size sooner)")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="stop checking after this long (0: check every page)")
    args = parser.parse_args()
    capacity = args.capacity or args.pages
    t_build = time.perf_counter()
    corpus = Corpus(args.per_tree, args.hosts)
    print(f"corpus: {len(corpus.trees)} trees, "
          f"{sum(len(v) for v in corpus.content.values()):,} lines of text, "
          f"{len(corpus.real)} real pages ({time.perf_counter() - t_build:.0f} s)", flush=True)
    root = Path(tempfile.mkdtemp(prefix="neardup-scale-"))
    proc, port = start_redis(root)
    client = redis.Redis(port=port)
    try:
        if not args.no_real:
            n, differing, kinds = real_pages(port, args.per_tree)
            print(f"real pages in crawl order: {n} pages, {differing} decisions differing from "
                  f"the in-process detector ({dict(kinds)})", flush=True)
            for key in client.scan_iter(match="*real*", count=10_000):
                client.delete(key)
        client.config_resetstat()
        base = used_memory(client)
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(w, args.workers, args.pages, port,
                                                  args.cache_bytes, capacity,
                                                  args.every // args.workers, corpus, out,
                                                  time.time() + args.minutes * 60
                                                  if args.minutes else 0.0))
                 for w in range(args.workers)]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        running = len(procs)
        last: dict[int, tuple[Any, ...]] = {}
        start_rss: dict[int, int] = {}
        while running:
            msg = out.get()
            if msg[0] == "done":
                running -= 1
                continue
            _, w, done, mem, cache, elapsed, retries, kinds = msg
            if not done:
                start_rss[w] = mem
                continue
            last[w] = msg
            total = sum(m[2] for m in last.values())
            print(f"  worker {w}: {done:,} pages, RSS {mem / 2**20:,.0f} MiB, cache "
                  f"{cache / 2**20:,.1f} MiB, {done / elapsed:,.0f} pages/s, retries {retries}"
                  f" | all: {total:,} pages, Redis {(used_memory(client) - base) / total:,.0f}"
                  f" B/page", flush=True)
        for p in procs:
            p.join()
        wall = time.perf_counter() - t0
        checked = sum(m[2] for m in last.values())
        usec, calls = script_usec(client)
        pages = int(client.get("{" + KEY + "}:nd:next") or 0)
        grown = used_memory(client) - base
        kinds_all: Counter[str] = Counter()
        for m in last.values():
            kinds_all.update(m[7])
        print(f"\n{checked:,} pages checked in {wall:,.0f} s by {args.workers} workers "
              f"({checked / wall:,.0f} pages/s together; {dict(kinds_all)})")
        for w, m in sorted(last.items()):
            print(f"  worker {w}: RSS {m[3] / 2**20:,.0f} MiB at the end "
                  f"({start_rss[w] / 2**20:,.0f} MiB before its first page), cache estimate "
                  f"{m[4] / 2**20:,.1f} MiB (bound {args.cache_bytes / 2**20:,.0f} MiB), "
                  f"{m[2] / m[5]:,.0f} checks/s, {m[6]} retries")
        print(f"Redis scripts: {usec / checked:,.0f} us of server time per check "
              f"({calls / checked:.2f} calls; {1e6 * checked / usec:,.0f} checks/s per "
              f"Redis core)")
        print(f"Redis used_memory: {grown / 2**20:,.1f} MiB for {pages:,} ids: "
              f"{grown / checked:,.0f} B per page")
        probe = RedisNearDuplicateDetector(client, KEY, capacity=capacity)
        kinds_mem = probe.memory()
        total = sum(kinds_mem.values())
        print("  by kind (MEMORY USAGE, B/page): " + ", ".join(
            f"{k} {v / checked:,.0f}" for k, v in sorted(kinds_mem.items(),
                                                         key=lambda kv: -kv[1])
        ) + f"; total {total / checked:,.0f}")
        q = ctx.Queue()
        late = ctx.Process(target=first_decision, args=(port, args.cache_bytes, capacity, corpus,
                                                        args.pages, q))
        late.start()
        _, build_s, first_s, kind, dup, late_rss, replayed = q.get()
        late.join()
        print(f"a new worker: built in {build_s * 1e3:.1f} ms, first decision in "
              f"{first_s * 1e3:.1f} ms ({kind}, of {dup}), RSS {late_rss / 2**20:,.0f} MiB, "
              f"{replayed} pages of template models replayed")
        per_worker = max(m[3] for m in last.values())
        print(f"projection at 1 billion pages: Redis {grown / checked * 1e9 / 2**30:,.0f} GiB"
              f" of near-duplicate state; per worker {per_worker / 2**20:,.0f} MiB RSS "
              f"(bounded by NEARDUP_CACHE_BYTES, not by the crawl's size)")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
