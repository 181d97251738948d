"""Costs of the partition-owned Redis frontier against the Lua one (issue 37, "Costs"), both
measured in the same run on the same machine so that their ratios mean something.

    .venv/bin/python bench/partition_costs.py [--sizes 100000,1000000] [--hosts 10000]
                                              [--pages 20000] [--workers 1,2]
                                              [--policies depth,opic] [--links 20]
                                              [--local 0.8] [--space 2] [--batch 1000]
                                              [--json out.json] [--merge old.json]

The Lua frontier (``old``) is deleted (issue 37): its figures below come from this file run
in an old checkout (see the end), and that run's ``--json`` file given to ``--merge`` puts its
rows next to this run's.

For each queue size N, the frontier (``new``: ``RedisFrontierStore``'s
``PartitionedFrontier``, 16 partitions, one
``MercatorFrontier`` over a ``RedisQueueStore`` per owned partition) and each priority policy
(``FRONTIER_PRIORITY_POLICY`` depth or opic), on a fresh Debian ``redis-server`` this script
starts itself (``tests/redis_support.start_redis``), each frontier built by its store class from
the same settings, as a worker builds it (no Scrapy, no HTTP):

1. **Seeds**: N realistic URLs (documentation link shapes over ``--hosts`` hosts, from
   ``bench/seeds_bulk.seed_urls``) go in through ``add_many`` in batches of ``--batch``;
   seeds/s end to end (the frontier object's calls, so URL hashing and the client included),
   and the seeding process's CPU per URL.
2. **Bytes per queued URL**: Redis ``used_memory`` (less client buffers and the script cache)
   after the seeds, less before, over the URLs queued; also without the seen-set (its keys'
   ``MEMORY USAGE``).
3. **Pages**: ``--workers`` forked processes, each building its own frontier (the new one:
   beating until it owns its share of the partitions, before the clock starts), lease with
   ``next_many(--lease)`` and, per page, ``apply`` its ``--links`` links (a ``--local`` share on
   the page's own host, the rest anywhere in a URL space of ``--space`` x N: so some cross
   host and partition, and more and more are seen) together with the page's ``finish``, until
   ``--pages`` pages are done in all. Politeness is off (``FRONTIER_MIN_DELAY=0``,
   ``FRONTIER_DELAY_FACTOR=0``) so the frontier, not the clock, is measured. The new frontier's
   workers then read their inboxes dry (the mail the pages sent is their cost too). Measured:
   Redis CPU per page (``INFO cpu`` user + sys delta over pages) and worker CPU per page
   (``time.process_time`` of the worker processes).
4. **Projection**: masters for 10,000 pages/s (Redis CPU per page x 10,000 over one core used
   at 70 %) and for a billion URLs (bytes per queued URL, seen-set included, x 1e9 over 25 GB
   usable per master), assuming the load spreads evenly over masters (partitions by hash tag).

The table at the end gives every figure with the ratio new/old. ``--group N`` applies N pages'
links and acknowledgements in one call, as a worker's ``BufferedFrontier`` joins the pages
that end within its linger or while its last call ran (a busy worker's calls carry several).
The Lua frontier (``old``) is no longer in the code: it is measured by this same file run from
a checkout of 80be95b (``git worktree add --detach /work/old 80be95b``), with ``STORES``
mapping ``old`` to that checkout's ``RedisFrontierStore`` and ``open_frontier`` building its
``_redis_frontier``; ``--merge`` puts its ``--json`` rows beside this run's.

Measured 2026-12-05, Debian redis-server 7.0 (exact seen-sets, no RedisBloom), 1,000,000 URLs
queued over 10,000 hosts, depth order, 20 links a page (80 % on the page's host), 5,000 pages a
configuration, old and new one after the other on a quiet machine (load < 1)::

    .venv/bin/python bench/partition_costs.py --sizes 1000000 --policies depth --pages 5000 \
        [--group 8] [--callgrind --pages 2000]

=========================================  ===============  =================  ================
1 / 2 workers                              old (Lua)        new                new / old
=========================================  ===============  =================  ================
Redis CPU us/page, a call a page           309 / 304        117-119 / 147-158  0.38 / 0.48-0.52
Redis CPU us/page, ``--group 8``           217 / 206        54 / 68            0.25 / 0.33
Redis instructions/page (``--callgrind``)  2,095k / 2,034k  363k / 436k        0.17 / 0.21
worker CPU us/page, a call a page          313 / 341        818-826 / 788-808  2.6 / 2.3-2.4
worker CPU us/page, ``--group 8``          215 / 228        435 / 469          2.0 / 2.1
Redis B per queued URL (without seen-set)  40.5 (35.5)      33.9 (29.1)        0.84
seeds/s (``add_many`` of 1,000)            75,202           31,982-37,046      0.43-0.49
masters for 10k pages/s (a call a page)    5                3
masters for 10k pages/s (``--group 8``)    3                1
masters for a billion URLs                 2                2
=========================================  ===============  =================  ================

Under OPIC (1M, layout 7): 37.4 B per queued URL (32.4 without the seen-set) against the Lua
frontier's 84.5. CPU times vary +-15 % run to run on this VM even when quiet; the instruction
counts (callgrind, user space only) do not. They show the gap between the two ratios: the new
frontier's Redis executes a fifth of the old one's instructions a page, but in more, smaller
requests (2 a page with 1 worker: the seen-test, one fenced call for all partitions), so the
kernel's share of each request and the cost of each wake-up weigh more than in the Lua
frontier's two large script calls. Where the rest goes (``--callgrind``, ``INFO
commandstats``): the exact seen-set's one ``SMISMEMBER`` per bucket a page's links touch (~17 a
page) and one ``SADD`` per new URL inside the fenced call, each redis.call in Lua ~2,900
instructions plus ~750 per argument. On a Redis with RedisBloom the seen-test is one
``BF.MEXISTS`` per partition.

The worker's CPU (a sampling profile of the 1-worker run): redis-py's Python layers ~31 % (about
25 us a round trip and 5 us a command above hiredis's parsing), the seen-test ~28 %, the fenced
flushes ~20 %, the entry codec ~7 %, this bench's own link making ~9 %. The algorithm runs in
the worker now, and each round trip costs the client more than the Lua frontier's single
EVALSHA; in a real crawl the page's own work dominates. Since then the seen-test and the fenced
calls go through ``crawler.backends.redis.wire`` (one request packed by hiredis, replies read by
it, no redis-py pipeline objects): the worker's instructions a page (callgrind, 100,000 seeds,
2,000 pages, beats off, the link making left out) fell from 2.94M to 2.18M a call a page and
from 2.04M to 1.54M with ``--group 8`` (-25 to -26 %); the CPU rows above predate it. Old
and new measured again after it, two runs each, one after the other at a load below 2 (a
call a page, 1 / 2 workers; this VM ran the old frontier's Redis slower than the table's day):
Redis CPU 130-135 / 127-151 us a page against 569 / 495-514 (0.23-0.24 / 0.25-0.30), worker
CPU 765-773 / 783-981 against 558-597 / 559-575 (1.3-1.4 / 1.4-1.7), 28,664-32,618 seeds/s
against 37,300-37,386, 33.9 B per queued URL against 40.8.

The workers' own instructions a page (``--worker-callgrind DIR``: the simulated workers run
under callgrind, counted from the pages' start to the end of their inbox reads; beats and lease
renewals off, as they come once a second whatever the pace and valgrind slows the pace tens of
times; this bench's link making included, alike for both), 100,000 URLs, depth, a call a
page, 1,000 pages (2026-12-06, after the worker's link hashing was halved)::

    .venv/bin/python bench/partition_costs.py --sizes 100000 --policies depth --pages 1000 \
        --workers 1 --worker-callgrind /tmp/wcg

1 / 2 workers: 2.78M / 3.29M instructions a page against the Lua frontier's 1.85M / 1.85M
(1.50 / 1.78): the algorithm now runs in the worker, which the Lua frontier left to Redis.
On 2026-12-06 (a batch's connection kept as the pool's spare, the registered domain walked
through the public-suffix tree without tldextract's per-host objects, entry tails not encoded
again, letters packed without copies): 2.27M / 2.49M (1.23 / 1.35), of which ~0.25M / 0.42M
was tldextract's first look-up falling in the measured pages before (now built when the
lookup is made). Later that day (url_key from a ready blake2b, the exact seen-test written as
protocol text with bucket names cached, a page's hosts asked once, a front queue's read-ahead
decoded entry by entry as it is popped): 2.17M / 2.32M (1.17 / 1.25).

10 M URLs over 1 M hosts (10 URLs a host), depth, 1 worker, 2,000 pages::

    .venv/bin/python bench/partition_costs.py --sizes 10000000 --hosts 1000000 \
        --policies depth --pages 2000 --workers 1 [--callgrind] \
        [--set FRONTIER_SEEN_EXACT_LIMIT=20000000]

Redis instructions a page 330k (363k at 1 M: flat in the queue's size). With the defaults on a
Redis without RedisBloom the exact seen-set is laid out for ``FRONTIER_SEEN_EXACT_LIMIT`` (2 M)
URLs: past it its buckets leave their intsets, 105.4 B per queued URL in all. Laid out for the
crawl (``--set FRONTIER_SEEN_EXACT_LIMIT=20000000``): 42.8 B per queued URL (37.4 without the
seen-set: a million hosts' records and back queues cost ~8 B a URL more than 10,000 hosts'
do), 13,120 seeds/s (seeded on a machine at a load of 15-40), Redis CPU 161 us and worker CPU
1,094 us a page. Masters projected: 3 for 10,000 pages/s, 2 for a billion URLs.

A real crawl (``--real-only``: 2 ``scrapy crawl web`` workers, every feature on, 40 devsite
hosts, ``--real-pages`` 50, 3,200 pages fetched, politeness off, whole run), Redis
instructions per page under ``--callgrind``: 1,385k and 1,517k (old, two runs) against 997k
and 1,158k (new): 0.72-0.76.
Most of a real crawl's Redis work is not the frontier's: ``EVALSHA`` 5.7 a page, of which the
near-duplicate store's check and postings and the address budget's take and release make the
most, with their ``HGET``/``HMGET``/``HSET`` (21, 19 and 21 a page). With the near-duplicate
store off (``--real-set NEARDUP_ENABLED=False``): 273k (old) against 166k (new) instructions a
page, 0.61: at a real crawl's pace most calls carry one page, and the fenced call's fixed cost
(every written partition's lease and number) weighs as in the simulation's call a page.
The near-duplicate store's first postings then went to a plain ``HSETNX`` and its commit's
arguments into two strings (``docs/benchmarks/history.md``): 1,014k -> 808k instructions a page
with every feature on (about 0.55 of the Lua frontier's), 172k with the store off. A fenced
call costs Redis ~29k instructions, ~22k per partition it writes (its lease, number and epoch:
3 keys, 5 arguments, the MGET's share and the number's SET) and ~9.6k per write; an EVALSHA
argument ~1.3k, a plain pipelined HSET ~4.7k (callgrind, one call at a time).
On 2026-12-06, after the near-duplicate store's anchor postings became bucket strings (one
``MGET`` a page, one ``APPEND`` an anchor, no ``neardup_put`` script) and ``due_in`` stopped
making a fenced call of its own (a third of a real crawl's fenced calls): 582k instructions a
page with every feature on (731k the day before), 0.38-0.42 of the Lua frontier's; the store
alone ~451k -> ~337k a page on the real pages of ``bench/shared.py --only neardup --quick
--instructions``, 0 decisions changed. Still short of a third: the store's commit script
(~145k, half of it the fixed cost of a call) is the next lever, batching several pages' checks.
Then the near-duplicate store read in a plain pipeline and its commit wrote the postings
itself, and lease renewals became a ``GETEX`` each (they were a fenced ``PEXPIRE`` call every
second, twice: ~32k instructions a lease): 731k instructions a page with every feature on
(0.48-0.53 of the Lua frontier's), 185k with the store off. Of those 185k (callgrind_annotate):
``EVALSHA`` ~63 % (its arguments' Lua tables ~15 %, the Lua VM ~17 %, the redis.calls ~31 %:
13.5 a call, ~8k each with the Lua/Redis conversions); ``serverCron`` ~14 % (jemalloc's stats,
once a tick: wall time, so valgrind's slowness inflates it, alike for old and new).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing as mp
import queue
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from scrapy.settings import Settings  # noqa: E402

from bench.seeds_bulk import data_memory, seed_urls, server_cpu  # noqa: E402
from crawler.backends.redis import partitioned as partitioned_module  # noqa: E402
from crawler.backends.redis.frontier_store import RedisFrontierStore  # noqa: E402
from crawler.backends.redis.partitioned import PartitionedFrontier  # noqa: E402
from crawler.frontier import Entry, Frontier  # noqa: E402
from crawler.frontier.api import Settlement  # noqa: E402
from tests.redis_support import RedisServer, start_redis  # noqa: E402

SITE = "costs"
STALL = 60.0  # seconds without a URL handed out: the configuration failed
READY_WITHIN = 1800.0  # seconds for the workers to start and own their shares, at most
LEASE_TTL = 600.0  # no lease expires during a run: every page is settled
PAGES_GOAL = 10_000  # pages/s the projection asks for
URLS_GOAL = 1e9  # URLs the projection asks for
USABLE_GB = 25.0  # memory a master may fill (a 32 GB machine, room for fork and fragmentation)
HEADROOM = 0.7  # share of a master's one core the frontier may use
FRONT_QUEUES = 8  # crawler.frontier.mercator.FRONT_QUEUES: depth d goes to front queue min(d, 7)
# "old" (the Lua frontier) is gone from the code: its rows come from an earlier checkout's
# --json file, through --merge
STORES: dict[str, type[RedisFrontierStore]] = {"new": RedisFrontierStore}


EXTRA: dict[str, str] = {}  # --set: settings of the simulation's frontiers (forked workers too)


def settings(port: int, policy: str, worker: str) -> Settings:
    """One worker's settings: politeness off, everything else the defaults (or ``--set``)."""
    return Settings(
        {
            "REDIS_URL": f"redis://127.0.0.1:{port}/0",
            "FRONTIER_PRIORITY_POLICY": policy,
            "FRONTIER_MIN_DELAY": 0.0,
            "FRONTIER_DELAY_FACTOR": 0.0,
            "FRONTIER_HOST_CONCURRENCY": 1,
            "RECORD_WORKER_ID": worker,
            **EXTRA,
        }
    )


def open_frontier(kind: str, port: int, policy: str, worker: str) -> Frontier:
    """The frontier as a worker's store class builds it (without the buffering thread)."""
    store = STORES[kind](settings(port, policy, worker), SITE)
    client = redis.Redis(host="127.0.0.1", port=port)
    return store.partitioned_frontier(client, lease_ttl=LEASE_TTL, max_pages_per_host=None)


def host_of(url: str) -> str:
    return url.split("/", 3)[2]


@dataclass
class Corpus:
    """The URL space: ``seeds`` (the first N) and the rest, found only as links; by host."""

    urls: list[str]
    seeds: int
    by_host: dict[str, list[str]]

    @classmethod
    def make(cls, seeds: int, hosts: int, space: float) -> Corpus:
        urls = seed_urls(int(seeds * space), hosts)
        by_host: dict[str, list[str]] = {}
        for u in urls:
            by_host.setdefault(host_of(u), []).append(u)
        return cls(urls, seeds, by_host)

    def seed_entries(self, opic: bool) -> list[Entry]:
        return [
            Entry(u, host_of(u), priority=0, cash=1.0 if opic else 0.0)
            for u in self.urls[: self.seeds]
        ]

    def links(self, page: Entry, n: int, local: float, rng: random.Random) -> list[Entry]:
        """``n`` links of ``page``: a ``local`` share on its host, the rest anywhere; each
        carrying an equal part of the page's cash (OPIC) and one more level of depth."""
        own = self.by_host.get(page.host) or self.urls
        depth = page.depth + 1
        cash = page.cash / n if page.cash else 0.0
        out = []
        for _ in range(n):
            url = rng.choice(own) if rng.random() < local else rng.choice(self.urls)
            out.append(
                Entry(url, host_of(url), priority=min(depth, FRONT_QUEUES - 1), depth=depth,
                      cash=cash)
            )  # fmt: skip
        return out


# -- seeds and memory ------------------------------------------------------------------------


def seen_bytes(client: redis.Redis, kind: str) -> int:
    """``MEMORY USAGE`` of the seen-set keys (old: ``:sx:``/``:seen``; new: ``:s``)."""
    total = 0
    for key in client.scan_iter(count=1000):
        name = key.decode()
        rest = name.split("}", 1)[-1]
        is_seen = rest.startswith((":sx:", ":seen")) if kind == "old" else rest.startswith(":s")
        if is_seen:
            total += int(client.memory_usage(key, samples=0) or 0)
    return total


def load_seeds(
    kind: str, port: int, policy: str, corpus: Corpus, batch: int
) -> dict[str, Any]:  # fmt: skip
    """Seeds through ``add_many``: URLs/s, seeding CPU per URL, bytes per queued URL."""
    client = redis.Redis(host="127.0.0.1", port=port)
    client.flushall()
    mem0, cpu0 = data_memory(client), server_cpu(client)
    entries = corpus.seed_entries(policy == "opic")
    frontier = open_frontier(kind, port, policy, "seeder")
    wall0, own0 = time.perf_counter(), time.process_time()
    added = 0
    for at in range(0, len(entries), batch):
        added += sum(r.added for r in frontier.add_many(entries[at : at + batch]))
    wall, own = time.perf_counter() - wall0, time.process_time() - own0
    counts = frontier.counts()
    frontier.close()
    mem = data_memory(client) - mem0
    seen = seen_bytes(client, kind)
    out = {
        "seeds": len(entries),
        "seeds_added": added,
        "queued": counts.queued,
        "seeds_per_s": len(entries) / wall,
        "seed_worker_us": own / len(entries) * 1e6,
        "seed_redis_us": (server_cpu(client) - cpu0) / len(entries) * 1e6,
        "bytes_per_queued": mem / max(counts.queued, 1),
        "bytes_per_queued_no_seen": (mem - seen) / max(counts.queued, 1),
    }
    client.close()
    return out


# -- pages ---------------------------------------------------------------------------------------


def owns_share(frontier: Frontier, workers: int) -> bool:
    if not isinstance(frontier, PartitionedFrontier):
        return True
    return len(frontier.parts) == frontier.count // workers


def crawler_process(
    kind: str, port: int, policy: str, corpus: Corpus, args: argparse.Namespace, w: int,
    workers: int, done: Any, ready: Any, start: Any, stop: Any, leave: Any, out: Any,
    extra: dict[str, str],
) -> None:  # fmt: skip
    """One worker: page cycles until ``done`` reaches the goal, then (new) its inboxes read
    dry; puts its figures. ``extra``: ``--set`` (a spawned worker imports this file afresh)."""
    EXTRA.update(extra)
    frontier = open_frontier(kind, port, policy, f"w{w}")
    deadline = time.monotonic() + READY_WITHIN
    while not owns_share(frontier, workers) and time.monotonic() < deadline:
        assert isinstance(frontier, PartitionedFrontier)
        frontier.beat()
        time.sleep(0.2)
    if args.worker_callgrind and isinstance(frontier, PartitionedFrontier):
        # beats and lease renewals come once a second whatever the pace: under valgrind (tens
        # of times slower) they would be charged to that many times fewer pages; the old
        # frontier's workers have none in this bench. Leases that lapse meanwhile are taken
        # back by the next write (nobody else claims: no beats)
        partitioned_module.BEAT = math.inf
        frontier._stop_renewing()
    ready.wait()
    start.wait()
    rng = random.Random(w)
    pages = empty = 0
    cpu0 = time.process_time()
    progress = time.monotonic()
    try:
        pages, empty = page_cycles(frontier, corpus, args, done, rng, progress)
    except RuntimeError as exc:
        out.put({"error": str(exc)})
        return
    stop.wait()  # every worker has stopped sending mail
    letters = 0
    owned = 0
    if isinstance(frontier, PartitionedFrontier):
        owned = len(frontier.parts)
        while (n := frontier.read_mail()) > 0:
            letters += n
    cpu = time.process_time() - cpu0
    out.put({"pages": pages, "cpu": cpu, "empty": empty, "letters": letters, "owned": owned})
    leave.wait()  # nobody leaves (hands partitions over) before the meter is read
    frontier.close()


def page_cycles(
    frontier: Frontier, corpus: Corpus, args: argparse.Namespace, done: Any,
    rng: random.Random, progress: float,
) -> tuple[int, int]:  # fmt: skip
    """Lease, then each page's links with its ``finish``, until ``done`` reaches the goal:
    (pages, empty leases). A frontier that hands out nothing for ``STALL`` s fails."""
    pages = empty = 0
    while done.value < args.pages:
        leases = frontier.next_many(args.lease)
        if not leases:
            empty += 1
            if time.monotonic() - progress > STALL:
                lost = getattr(frontier, "lost", 0)
                raise RuntimeError(f"no URL handed out for {STALL:.0f}s ({lost} partitions lost)")
            time.sleep(0.001)
            continue
        progress = time.monotonic()
        for at in range(0, len(leases), args.group):
            group = leases[at : at + args.group]
            links = [
                link for lease in group
                for link in corpus.links(lease.entry, args.links, args.local, rng)
            ]  # fmt: skip
            frontier.apply(links, [Settlement("finish", lease.token, 0.05) for lease in group])
        pages += len(leases)
        with done.get_lock():
            done.value += len(leases)
    return pages, empty


def crawl(
    kind: str, port: int, policy: str, corpus: Corpus, args: argparse.Namespace, workers: int
) -> dict[str, Any]:  # fmt: skip
    ctx: Any = mp.get_context("fork")
    counted = WorkerCallgrind(Path(args.worker_callgrind)) if args.worker_callgrind else None
    if counted:
        ctx = counted.context()
    done = ctx.Value("q", 0)
    ready, stop = ctx.Barrier(workers + 1), ctx.Barrier(workers)
    start, leave = ctx.Event(), ctx.Event()
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=crawler_process,
            args=(
                kind,
                port,
                policy,
                corpus,
                args,
                w,
                workers,
                done,
                ready,
                start,
                stop,
                leave,
                out,
                dict(EXTRA),
            ),
        )
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        # a start reads the owned partitions' state (minutes at 10 M URLs, under valgrind)
        try:
            ready.wait(READY_WITHIN)
        except threading.BrokenBarrierError:  # (a RuntimeError whose message is empty)
            raise RuntimeError(
                f"the workers did not own their shares within {READY_WITHIN:.0f}s"
            ) from None
        client = redis.Redis(host="127.0.0.1", port=port)
        client.config_resetstat()
        cpu0, wall0 = server_cpu(client), time.perf_counter()
        sys0 = float(client.info("cpu")["used_cpu_sys"])
        callgrind_dump(args)  # (the counts so far, thrown away)
        if counted:
            counted.start(procs)
        start.set()
        reports = []
        for _ in procs:
            reports.append(collect(out, procs))
            if "error" in reports[-1]:
                raise RuntimeError(reports[-1]["error"])
        worker_instructions = counted.dump(procs) if counted else 0
        wall, cpu = time.perf_counter() - wall0, server_cpu(client) - cpu0
        sys_cpu = float(client.info("cpu")["used_cpu_sys"]) - sys0
        instructions = callgrind_dump(args)
        stats = client.info("commandstats")
        leave.set()
        for p in procs:
            p.join(60)
        client.close()
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
    pages = sum(r["pages"] for r in reports)
    return {
        "workers": workers,
        "pages": pages,
        "pages_per_s": pages / wall,
        "redis_us": cpu / pages * 1e6,
        "redis_sys_us": sys_cpu / pages * 1e6,
        "redis_instructions": instructions / pages if instructions else None,
        "worker_us": sum(r["cpu"] for r in reports) / pages * 1e6,
        "worker_instructions": worker_instructions / pages if worker_instructions else None,
        "letters": sum(r["letters"] for r in reports),
        "owned": [r["owned"] for r in reports],
        "empty": sum(r["empty"] for r in reports),
        "commands": top_commands(stats, pages),
    }


def top_commands(stats: dict[str, Any], pages: int, n: int = 14) -> dict[str, list[float]]:
    """The commands that cost Redis the most: name -> [calls per page, usec per page]."""
    rows = sorted(stats.items(), key=lambda kv: -int(kv[1]["usec"]))[:n]
    return {
        name.removeprefix("cmdstat_"): [int(row["calls"]) / pages, int(row["usec"]) / pages]
        for name, row in rows
    }


def collect(out: Any, procs: list[Any]) -> dict[str, Any]:
    """The next worker's report; a worker that died fails the run (no waiting for ever)."""
    while True:
        try:
            return out.get(timeout=2)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a worker died (exit codes {dead})") from None


# -- Redis under callgrind -------------------------------------------------------------------


class CallgrindRedis:
    """A Debian ``redis-server`` run under ``valgrind --tool=callgrind``: its user-space
    instructions are counted exactly whatever the machine's load (the kernel's share of each
    round trip, its read and write calls, is not). Instrumented only from the first
    :meth:`dump` on (the pages' start): the seeds before run several times faster, which a
    10 M run needs."""

    def __init__(self, root: Path, out: str = "") -> None:
        from tests.redis_support import free_port

        self.port = free_port()
        self.out = Path(out) if out else root / "callgrind"
        self.out.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={self.out}/out.%p",
                "/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(root),
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.counting = False
        deadline = time.monotonic() + 60
        while True:
            try:
                redis.Redis(host="127.0.0.1", port=self.port).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port)

    def dump(self) -> int:
        """Instructions since the last dump (callgrind zeroes its counts at each); the first
        call turns the counting on and answers 0."""
        if not self.counting:
            subprocess.run(
                ["callgrind_control", "-i", "on", str(self.process.pid)],
                check=True, capture_output=True,
            )  # fmt: skip
            self.counting = True
            return 0
        before = set(self.out.iterdir())
        subprocess.run(
            ["callgrind_control", "-d", str(self.process.pid)], check=True, capture_output=True
        )
        deadline = time.monotonic() + 60
        while not (new := set(self.out.iterdir()) - before) and time.monotonic() < deadline:
            time.sleep(0.1)
        (path,) = new
        while "summary:" not in (text := path.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return int(text.split("summary:", 1)[1].split()[0])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


CALLGRIND: list[CallgrindRedis] = []  # the server, when --callgrind


class WorkerCallgrind:
    """The simulated workers run under ``valgrind --tool=callgrind`` (``--worker-callgrind``):
    their user-space instructions a page, counted from the pages' start to the end of their
    inbox reads, are the same whatever the machine's load, unlike their CPU time (which a
    loaded machine inflates: the ratio old/new must not depend on what else runs). Workers
    are spawned, not forked, through a wrapper that starts Python under valgrind; the counts
    include this bench's own link making (~9 % of a worker's CPU), alike for old and new."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.wrapper = out / "python-under-callgrind"
        self.wrapper.write_text(
            "#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no "
            f"--callgrind-out-file={out}/worker.%p {sys.executable} \"$@\"\n"
        )
        self.wrapper.chmod(0o755)

    def context(self) -> Any:
        ctx = mp.get_context("spawn")
        ctx.set_executable(str(self.wrapper))
        return ctx

    def start(self, procs: list[Any]) -> None:
        for p in procs:
            subprocess.run(["callgrind_control", "-i", "on", str(p.pid)], check=True,
                           capture_output=True)  # fmt: skip

    def dump(self, procs: list[Any]) -> int:
        """The instructions of every worker since :meth:`start`."""
        total = 0
        for p in procs:
            before = set(self.out.glob(f"worker.{p.pid}*"))
            subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True,
                           capture_output=True)  # fmt: skip
            deadline = time.monotonic() + 120
            while not (new := set(self.out.glob(f"worker.{p.pid}*")) - before):
                assert time.monotonic() < deadline, f"no callgrind dump of worker {p.pid}"
                time.sleep(0.1)
            (path,) = new
            while "summary:" not in (text := path.read_text()):
                assert time.monotonic() < deadline, f"callgrind dump {path} incomplete"
                time.sleep(0.1)
            total += int(text.split("summary:", 1)[1].split()[0])
        return total


def callgrind_dump(args: argparse.Namespace) -> int:
    return CALLGRIND[0].dump() if CALLGRIND else 0


# -- a real crawl ------------------------------------------------------------------------------

STORE_CLASSES = {"new": "crawler.backends.redis.frontier_store.RedisFrontierStore"}


def real_crawl(kind: str, server: RedisServer, args: argparse.Namespace) -> dict[str, Any]:
    """Two ``scrapy crawl web`` workers (one with the seeds, one joining) crawl a devsite of
    ``--real-hosts`` loopback hosts of ``--real-pages`` pages to the end, with
    ``BACKEND_CLASSES``'s ``frontier_store`` the frontier's: Redis CPU per page fetched over the
    whole run (start-up and heartbeats included) and the workers' CPU per page (their rusage)."""
    from devsite import HostSpec, build_site
    from devsite.routed import RoutedSiteServer
    from tests.crawling import finish_crawl, start_crawl

    client = server.client()
    client.flushall()
    hosts = [f"127.0.0.{i}" for i in range(2, 2 + args.real_hosts)]
    graph = build_site(
        [HostSpec(h, pages=args.real_pages) for h in hosts], links_per_page=5, cross_host_links=1
    )
    with tempfile.TemporaryDirectory() as tmp, RoutedSiteServer(graph) as site:
        dirs = [Path(tmp) / f"w{i}" for i in range(2)]
        common = {
            "FRONTIER_BACKEND": "redis",
            "BACKEND_CLASSES": {"frontier_store": STORE_CLASSES[kind]},
            "REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
            "FRONTIER_REDIS_KEY": f"real-{kind}",
            "ALLOW_PRIVATE_ADDRESSES": True,
            "FRONTIER_MIN_DELAY": 0.0,
            "FRONTIER_DELAY_FACTOR": 0,
            "LOG_LEVEL": "INFO",
            **dict(item.split("=", 1) for item in args.real_set),
        }
        client.config_resetstat()
        cpu0, own0 = server_cpu(client), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.perf_counter()
        callgrind_dump(args)  # (the counts so far, thrown away)
        procs = []
        for i, d in enumerate(dirs):
            d.mkdir()
            settings = {**common, "INDEX_PATH": d / "index.sqlite"}
            seeds = site.seeds() if i == 0 else None
            procs.append(start_crawl(d, seeds=seeds, settings=settings))
        results = [
            finish_crawl(p, d, timeout=args.real_timeout) for p, d in zip(procs, dirs, strict=True)
        ]
        wall, cpu = time.perf_counter() - wall0, server_cpu(client) - cpu0
        instructions = callgrind_dump(args)
        stats = client.info("commandstats")
        own = resource.getrusage(resource.RUSAGE_CHILDREN)
        records = site.records
    client.close()
    pages = sum(1 for r in records if r.path != "/robots.txt")
    fetched = Counter((r.host, r.path) for r in records if r.path != "/robots.txt")
    worker = own.ru_utime + own.ru_stime - own0.ru_utime - own0.ru_stime
    out = {
        "kind": kind,
        "pages": pages,
        "distinct": len(fetched),
        "twice": sum(1 for n in fetched.values() if n > 1),
        "wall": wall,
        "redis_us": cpu / max(pages, 1) * 1e6,
        "redis_instructions": instructions / max(pages, 1) if instructions else None,
        "worker_us": worker / max(pages, 1) * 1e6,
        "returncodes": [r.returncode for r in results],
        "scraped": [r.stats.get("item_scraped_count", 0) for r in results],
        "commands": top_commands(stats, max(pages, 1), 20),
    }
    for r in results:
        if r.returncode != 0:
            print(r.log[-2000:], flush=True)
    return out


# -- the table ---------------------------------------------------------------------------------


def project(row: dict[str, Any]) -> dict[str, int | None]:
    """Masters for 10,000 pages/s (from the 2-worker Redis CPU per page) and for 1e9 URLs."""
    done = [c for c in row["crawls"] if "error" not in c]
    return {
        "masters_pages": math.ceil(done[-1]["redis_us"] * 1e-6 * PAGES_GOAL / HEADROOM)
        if done
        else None,
        "masters_urls": math.ceil(row["bytes_per_queued"] * URLS_GOAL / (USABLE_GB * 1e9)),
    }


FIGURES = [
    ("seeds/s", lambda r: r["seeds_per_s"], "{:,.0f}"),
    ("seeding worker CPU us/URL", lambda r: r["seed_worker_us"], "{:.1f}"),
    ("seeding Redis CPU us/URL", lambda r: r["seed_redis_us"], "{:.1f}"),
    ("Redis B/queued URL", lambda r: r["bytes_per_queued"], "{:.1f}"),
    ("  without the seen-set", lambda r: r["bytes_per_queued_no_seen"], "{:.1f}"),
]


def of(row: dict[str, Any], i: int, key: str) -> float | None:
    """A figure of the row's i-th crawl; None when that crawl failed."""
    crawls = row["crawls"]
    return crawls[i].get(key) if i < len(crawls) else None


def crawl_figures(workers: list[int]) -> list[tuple[str, Callable[[Any], Any], str]]:
    rows: list[tuple[str, Callable[[Any], Any], str]] = []
    for i, w in enumerate(workers):
        rows += [
            (f"Redis CPU us/page, {w} worker(s)", lambda r, i=i: of(r, i, "redis_us"),
             "{:.0f}"),
            (f"worker CPU us/page, {w} worker(s)", lambda r, i=i: of(r, i, "worker_us"),
             "{:.0f}"),
            (f"pages/s, {w} worker(s)", lambda r, i=i: of(r, i, "pages_per_s"), "{:,.0f}"),
            (f"worker instructions/page, {w} worker(s)",
             lambda r, i=i: of(r, i, "worker_instructions"), "{:,.0f}"),
        ]  # fmt: skip
    rows += [
        ("masters for 10k pages/s", lambda r: project(r)["masters_pages"], "{:.0f}"),
        ("masters for 1e9 URLs", lambda r: project(r)["masters_urls"], "{:.0f}"),
    ]
    return rows


def print_table(results: list[dict[str, Any]], workers: list[int]) -> None:
    for size in sorted({r["size"] for r in results}):
        for policy in sorted({r["policy"] for r in results}):
            rows = {r["kind"]: r for r in results if r["size"] == size and r["policy"] == policy}
            old, new = rows.get("old"), rows.get("new")
            print(f"\n{size:,} URLs queued, {policy} order\n")
            print("| figure | old (Lua) | new (partitions) | new/old |")
            print("|---|---|---|---|")  # fmt: skip
            for name, get, fmt in FIGURES + crawl_figures(workers):
                a = get(old) if old else None
                b = get(new) if new else None
                ratio = f"{b / a:.2f}" if a and b is not None else "-"
                print(
                    f"| {name} | {fmt.format(a) if a is not None else '-'} | "
                    f"{fmt.format(b) if b is not None else '-'} | {ratio} |"
                )


def print_real(real: list[dict[str, Any]]) -> None:
    if not real:
        return
    rows = {r["kind"]: r for r in real}
    print("\nReal crawl, 2 scrapy crawl workers on devsite\n")
    print("| figure | old (Lua) | new (partitions) | new/old |")
    print("|---|---|---|---|")  # fmt: skip
    for name, key in (
        ("pages fetched", "pages"),
        ("pages fetched twice", "twice"),
        ("wall s", "wall"),
        ("Redis CPU us/page", "redis_us"),
        ("worker CPU us/page", "worker_us"),
    ):
        a = rows["old"][key] if "old" in rows else None
        b = rows["new"][key] if "new" in rows else None
        ratio = f"{b / a:.2f}" if a and b is not None else "-"
        print(
            f"| {name} | {a if a is None else f'{a:,.0f}'} | "
            f"{b if b is None else f'{b:,.0f}'} | {ratio} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="URLs queued as seeds")
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=20_000, help="pages per configuration")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--policies", default="depth,opic")
    parser.add_argument("--frontiers", default="new")
    parser.add_argument("--links", type=int, default=20, help="links a page adds")
    parser.add_argument("--local", type=float, default=0.8, help="share of same-host links")
    parser.add_argument("--space", type=float, default=2.0, help="URL space / seeds")
    parser.add_argument("--lease", type=int, default=16, help="next_many(n)")
    parser.add_argument("--batch", type=int, default=1000, help="seeds per add_many")
    parser.add_argument(
        "--group", type=int, default=1,
        help="pages per apply call (a worker's BufferedFrontier joins the pages that end "
        "within its linger, or while its last call ran)",
    )
    parser.add_argument(
        "--callgrind", action="store_true",
        help="Redis under callgrind: its instructions per page (slow: few --pages)",
    )  # fmt: skip
    parser.add_argument("--callgrind-out", default="", help="keep callgrind's files there")
    parser.add_argument(
        "--worker-callgrind", default="", metavar="DIR",
        help="the workers under callgrind (files in DIR): their instructions per page",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the simulation's frontiers (e.g. FRONTIER_SEEN_EXACT_LIMIT=-1)",
    )
    parser.add_argument("--real", action="store_true", help="also 2 scrapy crawl workers")
    parser.add_argument("--real-only", action="store_true", help="only the real crawl")
    parser.add_argument(
        "--real-set", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the real crawl's workers (e.g. NEARDUP_ENABLED=False)",
    )
    parser.add_argument("--real-hosts", type=int, default=40)
    parser.add_argument("--real-pages", type=int, default=50, help="pages per host")
    parser.add_argument("--real-timeout", type=float, default=600)
    parser.add_argument("--json", default="", help="write the results there as they come")
    parser.add_argument(
        "--merge", default="", help="a --json file of an earlier run: its rows join the table"
    )
    args = parser.parse_args()
    EXTRA.update(item.split("=", 1) for item in args.set)
    workers = [int(x) for x in args.workers.split(",")]
    results: list[dict[str, Any]] = []
    real: list[dict[str, Any]] = []
    earlier = json.loads(Path(args.merge).read_text()) if args.merge else []
    with tempfile.TemporaryDirectory() as tmp:
        server: Any
        if args.callgrind:
            server = CallgrindRedis(Path(tmp), args.callgrind_out)
            CALLGRIND.append(server)
        else:
            server = start_redis(Path(tmp), kind="redis")
        try:
            sizes = [] if args.real_only else [int(x) for x in args.sizes.split(",")]
            for size in sizes:
                t = time.perf_counter()
                corpus = Corpus.make(size, args.hosts, args.space)
                # out of the collector's sight: a full collection over tens of millions of
                # URLs stalls the process for seconds, past a partition's lease (10 s at 10M)
                gc.freeze()
                print(
                    f"{size:,} seeds, {len(corpus.urls):,} URLs of space over "
                    f"{len(corpus.by_host):,} hosts ({time.perf_counter() - t:.0f}s)",
                    flush=True,
                )
                for policy in args.policies.split(","):
                    for kind in args.frontiers.split(","):
                        row = {"size": size, "policy": policy, "kind": kind}
                        row.update(load_seeds(kind, server.port, policy, corpus, args.batch))
                        print(f"  {kind} {policy}: {json.dumps(row)}", flush=True)
                        row["crawls"] = []
                        for w in workers:
                            try:
                                c = crawl(kind, server.port, policy, corpus, args, w)
                            except RuntimeError as exc:
                                c = {"workers": w, "error": str(exc)}
                            row["crawls"].append(c)
                            print(f"    {json.dumps(c)}", flush=True)
                        results.append(row)
                        if args.json:
                            Path(args.json).write_text(json.dumps(results, indent=1))
            if args.real or args.real_only:
                for kind in args.frontiers.split(","):
                    real.append(real_crawl(kind, server, args))
                    print(f"  real crawl: {json.dumps(real[-1])}", flush=True)
        finally:
            server.stop()
    print_table(earlier + results, workers)
    print_real(real)


if __name__ == "__main__":
    main()
