"""The shared (Redis) near-duplicate detector at a million pages: a worker's memory, a new
worker's first decision, checks per second, Redis bytes per page, and the decisions on the real
pages against the in-process detector.

Run from the project root (starts its own ``redis-server`` on a free port, no persistence)::

    .venv/bin/python bench/neardup_scale.py                      # 1,000,000 pages, 2 workers
    .venv/bin/python bench/neardup_scale.py --pages 50000 --workers 1   # a quick look
    .venv/bin/python bench/neardup_scale.py --bulk 1000000 --pages 300000 --minutes 4
    .venv/bin/python bench/neardup_scale.py --instructions real        # callgrind, real pages
    .venv/bin/python bench/neardup_scale.py --instructions 3000,1000   # callgrind, synthetic

``--bulk N`` writes originals straight into the store (see :func:`bulk_fill`: a store of a
million, not a million decisions) after ``--bulk-base`` pages checked, then checks pages on
top of it; ``--count-after`` then counts redis-server's instructions per check on that store.
``--instructions`` counts them (valgrind's callgrind: the load does not move them) on a small
store whose buckets are as full as a crawl sized for it has them.

Pages are synthetic, built from real ones (``bench/realpages.py``: the Debian documentation
trees under ``/usr/share/doc``): page ``n`` is on host ``s<n % hosts>.<tree>.test``, has the
lines its tree's pages share (its template: headings, navigation text) and ~12 lines of real
text drawn from its tree's other lines, so two pages share their template and little else; a
share of them are copies of an earlier page (exact, on another host) or near copies (one line
replaced). Each worker process checks every ``workers``-th page with its own client and
reports its RSS (``VmRSS``), its cache's estimate and its pages/s as it goes; Redis's
``used_memory`` per page checked is measured against the empty server's, and
``commandstats`` gives the server time per check.
"""

from __future__ import annotations

import argparse
import hashlib
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

import numpy as np
import redis

from crawler.backends.redis.neardup import DEFAULT_CACHE_BYTES, RedisNearDuplicateDetector
from crawler.backends.redis.neardup_codec import decode_record, encode_record
from crawler.backends.redis.neardup_state import SLOTS
from crawler.content.neardup import NearDuplicateDetector
from crawler.content.neardup_features import ANCHORS, Features
from crawler.content.neardup_index import MAX_POSTING

KEY = "scale"
HOSTS = 5000
EXACT, NEAR = 0.08, 0.22  # shares of pages that copy an earlier one, exactly / with an edit
CONTENT_LINES = 12


def callgrind_dump(pid: int, root: Path) -> tuple[int, Path]:
    """Have the redis-server running under callgrind (``pid``) dump its counts into ``root``:
    the instructions counted since the last zeroing, and the dump's path."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    time.sleep(0.5)
    dump = sorted(root.glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime)[-1]
    total = next(int(line.split()[1]) for line in dump.read_text().splitlines()
                 if line.startswith("summary:"))  # fmt: skip
    return total, dump


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(root: Path, under: list[str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server of its own on a free port (``under``: a command to run it under, as
    valgrind)."""
    port = free_port()
    proc = subprocess.Popen(
        [*(under or []), shutil.which("redis-server") or "redis-server", "--port", str(port),
         "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    deadline = time.time() + (900 if under else 60)  # under valgrind, loading a dump is slow
    while time.time() < deadline:
        try:
            client.ping()
            return proc, port
        except redis.ConnectionError:  # BusyLoadingError too
            time.sleep(0.2)
    raise RuntimeError("redis-server did not start")


def count_on_store(root: Path, client: redis.Redis, corpus: Corpus, capacity: int,
                   first: int, warm: int, count: int) -> None:
    """Instructions per check on this store as it is (the million of ``--bulk``): saved, loaded
    by a ``redis-server`` under callgrind (instrumented only from the first counted check), then
    ``warm`` pages and ``count`` counted ones from page ``first`` on, two detectors taking
    turns (new ones: the warm-up gives them the copies of their hosts' templates and models a
    running worker has)."""
    client.save()
    out = root / "callgrind.out"
    proc, port = start_redis(root, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                    f"--callgrind-out-file={out}"])
    try:
        workers = [RedisNearDuplicateDetector(redis.Redis(port=port), KEY, capacity=capacity)
                   for _ in range(2)]
        for n in range(first, first + warm + count):
            if n == first + warm:  # counted from here: the warm-up made the workers' copies
                subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                               capture_output=True)
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True,
                               capture_output=True)
                redis.Redis(port=port).config_resetstat()
            url, text, title = corpus.page(n)
            workers[n % 2].check(url, text, title=title)
        stats = redis.Redis(port=port).info("commandstats")
        total, _ = callgrind_dump(proc.pid, root)
        inner = sum(v["calls"] for k, v in stats.items()
                    if k not in ("cmdstat_config|resetstat", "cmdstat_info"))
        print(f"on this store, under callgrind: {total / count:,.0f} redis-server instructions "
              f"per check ({count} checks after {warm}; {inner / count:.1f} commands per check)",
              flush=True)
    finally:
        proc.terminate()
        proc.wait()


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
           every: int, corpus: Corpus, out: Any, deadline: float, start: int = 0) -> None:
    detector = RedisNearDuplicateDetector(redis.Redis(port=port), KEY, capacity=capacity,
                                          cache_bytes=cache)
    kinds: Counter[str] = Counter()
    t0 = time.perf_counter()
    out.put(("progress", w, 0, rss(), 0, 1.0, 0, {}))  # the worker's RSS before any page
    for done, n in enumerate(range(start + w, pages, workers), 1):
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


def server_usec(client: redis.Redis) -> tuple[int, int]:
    """Server time (us) and calls of every command but the benchmark's own (INFO, CONFIG)."""
    stats = client.info("commandstats")
    mine = [v for k, v in stats.items() if not k.startswith(("cmdstat_info", "cmdstat_config"))]
    return sum(int(v.get("usec", 0)) for v in mine), sum(int(v.get("calls", 0)) for v in mine)


# --- the bulk fill (--bulk) ----------------------------------------------------------------

def _bucket(s: bytes, bits: int) -> tuple[int, bytes]:
    """The URL and fingerprint tables' bucket number and field of a hash (as
    ``neardup_state.bucket``)."""
    return int.from_bytes(s[:4], "big") >> (32 - bits), s[bits // 8 :]


def _stored(client: redis.Redis, keys: Any, doc: int) -> bytes:
    """Original ``doc``'s record (b'' if none)."""
    return client.hget(keys.records(doc // SLOTS), doc) or b""


def bulk_fill(port: int, capacity: int, total: int, seed: int = 1,
              batch: int = 2000) -> dict[str, Any]:
    """Fill the store up to ``total`` ids with originals written straight into it, in
    pipelines, with the codec the detector reads (records, URL and fingerprint tables) and the
    anchors' ``APPEND`` (postings): a bulk stand-in for checking a million pages, which this
    machine cannot do in a session (features in Python).

    Each bulk original copies an original already checked (through the detector): its title,
    host, blocks and the shape of its sketch, every hash XOR-ed with a mask of its own
    *generation* (one per pass over the checked originals: 24 low bits, so gaps and anchor
    buckets spread as the real ones), re-sorted; within a generation anchors are shared as the
    checked originals share them, across generations almost never. Its fingerprint and URL are
    new. What bulk originals do not do: teach their hosts' template models or count in the
    hosts' duplicate counts (the per-host state is the checked pages')."""
    client = redis.Redis(port=port)
    detector = RedisNearDuplicateDetector(client, KEY, capacity=capacity)
    keys = detector.keys
    first = int(client.hget(keys.versions, "seq") or 0)  # ids are commit places
    sources = []
    for doc in range(1, first + 1):
        rec = _stored(client, keys, doc)
        if rec:
            hid, _, title, sketch, blocks, cover = decode_record(rec)
            if len(sketch) >= ANCHORS:
                sources.append((hid, title, sketch, blocks, cover))
    if not sources:
        raise SystemExit("--bulk needs originals checked first (--bulk-base)")
    names = {int(h): v.decode() for v, h in client.hgetall(keys.host_ids).items()}
    bits = detector.store.bits
    t0 = time.perf_counter()
    sample: list[tuple[int, bytes, np.ndarray]] = []
    rng = random.Random(seed)
    done = first
    while done < total:
        pipe = client.pipeline(transaction=False)
        for doc in range(done + 1, min(total, done + batch) + 1):
            hid, title, sketch, blocks, cover = sources[(doc - first - 1) % len(sources)]
            generation = (doc - first - 1) // len(sources) + 1
            mask = random.Random(seed * 1_000_003 + generation).getrandbits(24)
            mixed = sketch ^ np.uint32(mask)
            order = np.argsort(mixed, kind="stable")
            mixed, mixed_blocks = mixed[order], blocks[order]
            if cover != 0xFFFFFFFF:
                cover = int(mixed[-1])
            url = f"http://{names.get(hid, '')}/bulk/{doc}.html"
            fp = hashlib.blake2b(b"fp%d" % doc, digest_size=8).digest()
            uh = hashlib.blake2b(url.encode(), digest_size=8).digest()
            record = encode_record(fp, hid, url, title, Features(
                "", 0, 0, [], mixed, mixed_blocks, cover))
            pipe.hset(keys.records(doc // SLOTS), doc, record)
            b, field = _bucket(uh, bits)
            pipe.hset(keys.urls_prefix + str(b), field, doc)
            b, field = _bucket(fp, bits)
            pipe.hset(keys.fingerprints_prefix + str(b), field, doc)
            for anchor in mixed[:ANCHORS].tolist():
                key, field = detector.store.place(anchor)
                pipe.append(key, (field << 32 | doc).to_bytes(8, "big"))
            if rng.random() < 200 / max(1, total - first):
                sample.append((doc, record, mixed))
        done = min(total, done + batch)
        pipe.hset(keys.versions, "seq", done)
        pipe.execute()
        if done // batch % 50 == 0:
            print(f"  bulk: {done:,} ids, {(done - first) / (time.perf_counter() - t0):,.0f} "
                  f"originals/s", flush=True)
    took = time.perf_counter() - t0
    # a sample read back as the detector reads it: the record, the postings
    bad = 0
    for doc, record, mixed in sample:
        rec = detector.store.records([doc])[0]
        got = decode_record(rec) if rec else None
        anchors = mixed[:ANCHORS].tolist()
        postings = detector.store.read(0, bytes(8), b"", anchors).postings
        listed = all(doc in p or len(p) >= MAX_POSTING for p in postings)
        if (got is None or rec != record or not np.array_equal(got.sketch, mixed)
                or len(postings) != len(anchors) or not listed):
            bad += 1
    detector.close()
    return {"first": first, "total": total, "sources": len(sources), "seconds": took,
            "sampled": len(sample), "bad": bad}


def run_workers(args: argparse.Namespace, port: int, corpus: Corpus, capacity: int,
                start: int, end: int, base: int) -> tuple[dict[int, Any], dict[int, int], float]:
    """Pages ``start``..``end`` checked by ``args.workers`` processes (until ``--minutes``):
    each worker's last report, its RSS before its first page, the wall time."""
    client = redis.Redis(port=port)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(w, args.workers, end, port, args.cache_bytes,
                                              capacity, args.every // args.workers, corpus, out,
                                              time.time() + args.minutes * 60
                                              if args.minutes else 0.0, start))
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
        _, w, done, mem, cache, elapsed, retries, _ = msg
        if not done:
            start_rss[w] = mem
            continue
        last[w] = msg
        total = sum(m[2] for m in last.values())
        ids = int(client.hget("{" + KEY + "}:nd:v", "seq") or 0)  # ids are commit places
        print(f"  worker {w}: {done:,} pages, RSS {mem / 2**20:,.0f} MiB, cache "
              f"{cache / 2**20:,.1f} MiB, {done / elapsed:,.0f} pages/s, retries {retries}"
              f" | all: {total:,} pages, {ids:,} ids, Redis "
              f"{(used_memory(client) - base) / max(1, ids):,.0f} B/id", flush=True)
    for p in procs:
        p.join()
    return last, start_rss, time.perf_counter() - t0


def count_instructions(corpus: Corpus, warm: int, count: int, capacity: int,
                       real: bool) -> None:
    """Instructions redis-server executes per check (valgrind's callgrind: the same on a busy
    machine as on a quiet one), and on a plain redis-server the same checks' server time, its
    main thread's CPU and the commands they run, per check (``instructions / CPU us``
    converts one into the other on this machine). Two detectors take turns; ``warm`` pages
    first, uncounted, then ``count``; ``real``: the real pages in crawl order instead."""
    if real:
        from bench.realpages import build, in_crawl_order

        pages = [(p.url, p.main_text, p.title or None)
                 for p in in_crawl_order(build(per_tree=80)[0])]
        warm, count = 0, len(pages)
        capacity = count  # the buckets as full as a crawl sized for its pages has them
    else:
        pages = [corpus.page(n) for n in range(warm + count)]
    for under in ([], ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s"]):
        root = Path(tempfile.mkdtemp(prefix="neardup-instr-"))
        if under:
            if not shutil.which("valgrind"):
                print("  (valgrind not installed: no instruction count)")
                return
            under[-1] = under[-1] % (root / "callgrind.out")
        proc, port = start_redis(root, under)
        try:
            client = redis.Redis(port=port)
            workers = [RedisNearDuplicateDetector(redis.Redis(port=port), KEY, capacity=capacity)
                       for _ in range(2)]
            for n in range(warm):
                url, text, title = pages[n]
                workers[n % 2].check(url, text, title=title)
            if under:
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True,
                               capture_output=True)
            client.config_resetstat()
            cpu0 = client.info("cpu")
            kinds: Counter[str] = Counter()
            for n in range(warm, warm + count):
                url, text, title = pages[n]
                kinds[workers[n % 2].check(url, text, title=title).kind] += 1
            cpu1 = client.info("cpu")
            stats = client.info("commandstats")
            if under:
                total, dump = callgrind_dump(proc.pid, root)
                print(f"  redis-server instructions per check (callgrind): {total / count:,.0f}")
                if shutil.which("callgrind_annotate"):  # where they go: the top functions
                    top = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(dump)],
                                         capture_output=True, text=True).stdout.splitlines()
                    rows = [x for x in top if "(" in x and ":" in x and x.strip()[:1].isdigit()]
                    for row in rows[:40]:
                        print("    " + row.strip()[:120])
                continue
            cpu = sum(cpu1[k] - cpu0[k] for k in ("used_cpu_user_main_thread",
                                                  "used_cpu_sys_main_thread"))
            inner = {k[8:]: v for k, v in stats.items()
                     if k not in ("cmdstat_info", "cmdstat_config|resetstat")}
            print(f"  {count:,} checks ({dict(kinds)}) after {warm:,}: "
                  f"{sum(v['usec'] for v in inner.values()) / count:,.0f} us of server time "
                  f"per check, main-thread CPU "
                  f"{cpu / count * 1e6:,.0f} us per check; "
                  f"{sum(v['calls'] for v in inner.values()) / count:.1f} commands per check: "
                  + ", ".join(f"{k} {v['calls'] / count:.1f}" for k, v in
                              sorted(inner.items(), key=lambda kv: -kv[1]["calls"])))
        finally:
            proc.terminate()
            proc.wait()
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-bytes", type=int, default=DEFAULT_CACHE_BYTES)
    parser.add_argument("--per-tree", type=int, default=80, help="real pages per tree")
    parser.add_argument("--every", type=int, default=50_000, help="pages between reports")
    parser.add_argument("--no-real", action="store_true", help="skip the real-pages check")
    parser.add_argument("--capacity", type=int, default=0,
                        help="the index's DEFAULT_CAPACITY (default: --pages, or --bulk)")
    parser.add_argument("--hosts", type=int, default=HOSTS,
                        help="hosts the pages spread over (fewer: a host's model at a "
                        "million pages' size sooner)")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="stop checking after this long (0: check every page)")
    parser.add_argument("--bulk", type=int, default=0,
                        help="fill the store to this many ids in bulk (see bulk_fill) after "
                        "--bulk-base pages checked, then check --pages more on top")
    parser.add_argument("--bulk-base", type=int, default=5000,
                        help="pages checked through the detector before the bulk fill")
    parser.add_argument("--count-after", type=int, default=0,
                        help="with --bulk: then count redis-server's instructions per check "
                        "on the filled store (callgrind) over this many checks")
    parser.add_argument("--instructions", default="",
                        help="WARM,COUNT: only count redis-server's instructions per check "
                        "(callgrind) on COUNT synthetic pages after WARM; 'real': on the real "
                        "pages in crawl order")
    args = parser.parse_args()
    capacity = args.capacity or args.bulk or args.pages
    t_build = time.perf_counter()
    corpus = Corpus(args.per_tree, args.hosts)
    print(f"corpus: {len(corpus.trees)} trees, "
          f"{sum(len(v) for v in corpus.content.values()):,} lines of text, "
          f"{len(corpus.real)} real pages ({time.perf_counter() - t_build:.0f} s)", flush=True)
    if args.instructions:
        real = args.instructions == "real"
        warm, count = (0, 0) if real else map(int, args.instructions.split(","))
        count_instructions(corpus, warm, count, args.capacity or warm + count, real)
        return
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
        base = used_memory(client)
        start, end = 0, args.pages
        if args.bulk:
            minutes, args.minutes = args.minutes, 0.0
            run_workers(args, port, corpus, capacity, 0, args.bulk_base, base)
            args.minutes = minutes
            filled = bulk_fill(port, capacity, args.bulk)
            ids = int(client.hget("{" + KEY + "}:nd:v", "seq") or 0)  # ids are commit places
            grown = used_memory(client) - base
            print(f"bulk: {filled['total'] - filled['first']:,} originals written in "
                  f"{filled['seconds']:,.0f} s on top of {filled['first']:,} ids checked "
                  f"({filled['sources']:,} originals copied); a sample of {filled['sampled']} "
                  f"read back (record, postings): {filled['bad']} wrong", flush=True)
            print(f"Redis used_memory at {ids:,} ids: {grown / 2**20:,.1f} MiB, "
                  f"{grown / ids:,.0f} B per id", flush=True)
            start, end = args.bulk_base, args.bulk_base + args.pages
        client.config_resetstat()
        last, start_rss, wall = run_workers(args, port, corpus, capacity, start, end, base)
        checked = sum(m[2] for m in last.values())
        usec, calls = server_usec(client)
        pages = int(client.hget("{" + KEY + "}:nd:v", "seq") or 0)  # ids are commit places
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
        print(f"Redis: {usec / checked:,.0f} us of server time per check "
              f"({calls / checked:.1f} commands; {1e6 * checked / usec:,.0f} checks/s per "
              f"Redis core)")
        stored = pages if args.bulk else checked
        print(f"Redis used_memory: {grown / 2**20:,.1f} MiB for {pages:,} ids: "
              f"{grown / stored:,.0f} B per {'id' if args.bulk else 'page'}")
        probe = RedisNearDuplicateDetector(client, KEY, capacity=capacity)
        kinds_mem = probe.memory()
        total = sum(kinds_mem.values())
        print("  by kind (MEMORY USAGE, B/" + ("id" if args.bulk else "page") + "): " + ", ".join(
            f"{k} {v / stored:,.0f}" for k, v in sorted(kinds_mem.items(),
                                                        key=lambda kv: -kv[1])
        ) + f"; total {total / stored:,.0f}")
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        late = ctx.Process(target=first_decision, args=(port, args.cache_bytes, capacity, corpus,
                                                        pages, q))
        late.start()
        _, build_s, first_s, kind, dup, late_rss, replayed = q.get()
        late.join()
        print(f"a new worker: built in {build_s * 1e3:.1f} ms, first decision in "
              f"{first_s * 1e3:.1f} ms ({kind}, of {dup}), RSS {late_rss / 2**20:,.0f} MiB, "
              f"{replayed} pages of template models replayed")
        if args.count_after and args.bulk and shutil.which("valgrind"):
            first = start + args.workers * max(m[2] for m in last.values()) + args.workers
            # warmed on two pages a host per worker: a running worker has its hosts' copies
            count_on_store(root, client, corpus, capacity, first, 4 * args.hosts,
                           args.count_after)
        per_worker = max(m[3] for m in last.values())
        print(f"projection at 1 billion pages: Redis {grown / stored * 1e9 / 2**30:,.0f} GiB"
              f" of near-duplicate state; per worker {per_worker / 2**20:,.0f} MiB RSS "
              f"(bounded by DEFAULT_CACHE_BYTES, not by the crawl's size)")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
