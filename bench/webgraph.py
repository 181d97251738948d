"""What a crawl fetches first, judged by PageRank on a web-shaped graph (issue 25).

    .venv/bin/python bench/webgraph.py [--seeds 1,2] [--pages 100000] [--hosts 2000]
                                       [--share 0.2] [--real 10000] [--noise 3]
                                       [--backends memory,redis] [--workers 1,2]

For each graph (``devsite/webgraph.py``: power-law in-degrees by a copying model, link farms
reachable from one spam seed; seed 1 is the graph the settings were tuned on, seed 2 is held
out), the frontier itself is driven with simulated time and the same politeness for every order
(64 fetchers, one request per host at a time, the next one ``max(1 s, 5 x fetch time)`` after
the last ended, fetch times 0.1-0.5 s by host): OPIC, depth (breadth first), FIFO and random
priorities in this frontier, and stock Scrapy's default order (one LIFO queue, a per-host
download slot with a 1 s delay, as ``DEPTH_PRIORITY = 0`` does). Reported per order: the share
of the graph's PageRank fetched after the first 10 % and 20 % of its pages, the share of those
first 20 % spent inside link farms, and robots.txt files fetched for hosts none of whose pages
had been fetched yet. Then OPIC with the spam seed's domain listed as distrusted.

``--real N``: one real ``scrapy crawl`` of a graph of N pages over loopback hosts (served by
``devsite.webgraph.WebGraphServer``), OPIC against depth, to show the frontier-level figures
agree with a crawl through Scrapy (slower: run it with a smaller N).

``--backends memory,redis``: then OPIC and depth on the partitioned Redis frontier (issue 37),
on a redis-server the bench starts, built as a worker builds it
(``RedisFrontierStore.partitioned_frontier``: 16 partitions, each its own Mercator frontier,
links to another worker's partitions by mail, read before that worker's next call as its
wake-up makes it do), with ``--workers`` workers sharing the 64 fetchers; columns as above,
and the share of the first 10 % / 20 % the memory frontier also fetched first. ``--noise N``:
OPIC and depth in memory N times more with every host's fetch time moved by up to 0.02 s, the
spread a difference is judged by. 2026-12-05, load 17-31 on 2 cores (22 min; CPU ~15x memory's
with one worker, ~35x with two)::

    .venv/bin/python bench/webgraph.py --backends memory,redis       # workers 1,2
    .venv/bin/python bench/webgraph.py --noise 3

    PR after 10 % / 20 % / farm share     seed 1                   seed 2
    memory opic                           45.5 / 58.0 / 10.5       45.8 / 58.1 / 11.7
      its noise (with --noise 3's draws)  45.3-45.5 / 57.8-58.0 /  45.6-46.0 / 58.0-58.2 /
                                          10.5-10.8                11.7-12.0
    redis opic, 1 worker (16 x 24)        44.2 / 57.4 /  9.2       44.6 / 57.8 / 10.0
    redis opic, 2 workers (2 x 8 x 12)    44.7 / 57.6 / 10.2       45.7 / 58.1 / 11.4
    memory depth                          38.7 / 53.9 / 21.3       39.9 / 55.2 / 22.0
      its noise                           38.5-39.1 / 53.9-54.5 /  39.9-40.2 / 55.2-55.4 /
                                          20.5-21.4                22.0-23.0
    redis depth, 1 worker (16 x 24)       40.0 / 54.5 / 11.9       40.9 / 54.8 / 12.0
    redis depth, 2 workers (2 x 8 x 12)   38.7 / 53.9 / 20.5       40.0 / 55.0 / 21.7

With two workers, Redis's order is memory's: within the noise but for OPIC after 10 % on seed 1
(0.6 of a point below it). One worker differed because it had twice the back queues: each
partition got ``max(8, 2 x B / 16)`` whatever the worker owned, so one worker holding all 16
had 384 where memory has 192 (two holding 8 each: 192 in all). A worker's B is now shared over
the partitions it owns (``MercatorFrontier.resize_back`` at each beat), so one worker holds 192
as memory does; the rows above were measured before that change. After it (seed 1, the same
command): Redis with 1 worker (16 x 12) OPIC 44.8 / 57.6 / 10.2, depth 38.0 / 53.5 / 20.8; with
2 workers (2 x 8 x 12) OPIC 44.7 / 57.6 / 10.2, depth 38.7 / 53.9 / 20.5: one worker now gives
two workers' figures. Memory with 384
gives one worker's figures (``--memory-back-queues 384``: 44.3 / 57.3, 9.6 % and depth 39.8 /
55.0, 11.9 % on seed 1; 44.8 / 57.6, 10.4 % and 41.0 / 55.3, 12.0 % on seed 2), and so does
one worker at 192 in all give two workers' (``--workers 1 --redis-back-queues 96``: OPIC 44.8 /
57.6, 10.2 % and 45.7 / 58.1, 11.5 %), so the mail between workers costs no order. With one
partition and memory's 192 back queues (``--workers 1 --partitions 1 --redis-back-queues 96``)
Redis fetches the very same pages in the same order as memory: the store keeps the algorithm's
order exactly, and what is left on seed 1 is the split into partitions, each filling its own
back queues from its own front queues (handing out across partitions by the earliest ready
host, rather than in turns, was tried: 44.6 %, no better).

A real crawl shows the same (``--seeds "" --real 10000 --backends memory,redis``, one worker of
32 fetchers, so 16 x 12 back queues against memory's 96; one run each, load 5-6): OPIC 43.1 /
55.9 %, farm share 7.4 % on Redis against 43.7 / 56.4 %, 10.1 % in memory; depth 42.1 / 53.9 %,
7.3 % against 39.1 / 51.5 %, 10.3 %: more back queues, as in the simulation above.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import tempfile
import time
import types
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.backends.redis.partitioned import MAILED  # noqa: E402
from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy, Prioritizer  # noqa: E402
from crawler.frontier.api import AddResult  # noqa: E402
from crawler.frontier.opic import CashLedger, selector_weights  # noqa: E402
from crawler.frontier.policies import CrawlPolicy, PolicyBook  # noqa: E402
from devsite.webgraph import WebGraph, build_webgraph  # noqa: E402

CONCURRENCY = 64
FRONT_QUEUES = 8
POLITENESS = PolitenessPolicy(min_delay=1.0, delay_factor=5.0, max_delay=30.0, host_concurrency=1)
ORDERS = ("opic", "depth", "fifo", "stock", "random")
MEMORY_BACK_QUEUES = 0  # --memory-back-queues: the memory frontier's B (0: 3 x fetchers)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Crawl:
    order: str
    fetched: list[int] = field(default_factory=list)
    robots_before_page: int = 0  # robots.txt fetched for a host none of whose pages was
    robots: int = 0
    seconds: float = 0.0
    sim_time: float = 0.0
    released: int = 0
    inversions: int = 0  # pages fetched 2+ levels deeper than a URL still waiting
    back_queues: str = ""  # how many, over the workers' partitions: "192", "16 x 12 + 16 x 12"


JITTER: dict[int, float] = {}  # --noise: a draw of small changes to the hosts' fetch times


def fetch_time(host: int) -> float:
    return 0.1 + 0.1 * ((host * 2654435761) % 5) + JITTER.get(host, 0.0)


def noise(graph: WebGraph, limit: int, draws: int) -> None:
    """The memory frontier's figures when every host's fetch time moves by up to 0.02 s (one
    draw each): how far the order moves on its own, to judge a difference by."""
    n10, n20 = int(0.1 * graph.pages), int(0.2 * graph.pages)
    for order in ("opic", "depth"):
        rows = []
        for draw in range(1, draws + 1):
            rng = random.Random(draw)
            JITTER.update({h: rng.uniform(-0.02, 0.02) for h in range(len(graph.hosts))})
            try:
                rows.append(judge(graph, crawl_frontier(graph, order, limit), n10, n20))
            finally:
                JITTER.clear()
        spans = ", ".join(
            f"{key} {min(r[key] for r in rows):.1%}-{max(r[key] for r in rows):.1%}"
            for key in ("pr10", "pr20", "farm20")
        )
        print(f"memory {order}, fetch times moved by up to 0.02 s ({draws} draws): {spans}")


def _main_ready_time(self: MercatorFrontier, host: object) -> float | None:
    """main's rule before this change, for the "as main" row: a host's first request (its
    robots.txt) made it ready whether or not the host held a back queue."""
    if host.dead or host.skipped or host.first_in_flight:  # type: ignore[attr-defined]
        return None
    if not host.firsts and not host.returned and not host.has_back:  # type: ignore[attr-defined]
        return None
    slot = host.free_slot()  # type: ignore[attr-defined]
    return None if slot < 0 else host.free_at[slot]  # type: ignore[attr-defined]


def make_frontier(order: str, clock: Clock, rng: random.Random) -> MercatorFrontier:
    frontier = _make_frontier(order, clock)
    if order == "depth-main":
        frontier._ready_time = types.MethodType(_main_ready_time, frontier)  # type: ignore
    return frontier


def _make_frontier(order: str, clock: Clock) -> MercatorFrontier:
    opic = order.startswith("opic")
    return MercatorFrontier(
        POLITENESS,
        clock=clock,
        front_queues=FRONT_QUEUES,
        back_queues=MEMORY_BACK_QUEUES or 3 * CONCURRENCY,
        ledger=CashLedger(FRONT_QUEUES) if opic else None,
        selector_weights=selector_weights(FRONT_QUEUES) if opic else None,
        back_run=0 if order in ("fifo", "random", "depth-main") else 4,
        lease_ttl=1e9,
    )


def back_queue_counts(frontier: Any) -> str:
    """A frontier's back queues: "192"; a partitioned one's, "16 x 12" (partitions x each)."""
    parts = getattr(frontier, "parts", None)
    if parts is None:
        return str(frontier.back_queue_count)
    sizes = sorted({p.frontier.back_queue_count for p in parts.values()})
    return " + ".join(
        f"{sum(p.frontier.back_queue_count == n for p in parts.values())} x {n}" for n in sizes
    )


def back_released(frontier: Any) -> int:
    """Back queues given up for lack of value (a partitioned frontier: over its partitions)."""
    parts = getattr(frontier, "parts", None)
    if parts is None:
        return int(frontier.back_released)
    return sum(p.frontier.back_released for p in parts.values())


class RedisFrontiers:
    """Workers' frontiers on a redis-server of this bench's own, each built as a worker's store
    class builds it (``RedisFrontierStore.partitioned_frontier``) from the settings of this
    bench's politeness, on the simulated clock; one crawl key per run. ``back_queues``: the
    workers' ``FRONTIER_BACK_QUEUES`` (0: 3 x a worker's fetchers); ``partitions``: the
    crawl's (0: the store's, 16)."""

    def __init__(self, root: Path, back_queues: int = 0, partitions: int = 0) -> None:
        from crawler.backends.redis.frontier_store import RedisFrontierStore
        from tests.redis_support import start_redis

        self.server = start_redis(root)
        self.runs = 0
        self.back_queues = back_queues
        overrides: dict[str, Any] = {}
        if partitions:
            overrides["partition_count"] = property(lambda store: partitions)
        if back_queues:  # a worker's B, shared over the partitions it owns
            overrides["back_queues"] = property(lambda store: back_queues)
        self.store_class = type("BenchStore", (RedisFrontierStore,), overrides)

    def frontiers(self, order: str, clock: Clock, workers: int) -> list[Any]:
        import redis
        from scrapy.settings import Settings

        self.runs += 1
        out = []
        for w in range(workers):
            settings = Settings({
                "REDIS_URL": f"redis://127.0.0.1:{self.server.port}/0",
                "RECORD_WORKER_ID": f"w{w}",
                "FRONTIER_PRIORITY_POLICY": order,
                "CONCURRENT_REQUESTS": CONCURRENCY // workers,
                "FRONTIER_MIN_DELAY": POLITENESS.min_delay,
                "FRONTIER_DELAY_FACTOR": POLITENESS.delay_factor,
                "FRONTIER_MAX_DELAY": POLITENESS.max_delay,
                "FRONTIER_HOST_CONCURRENCY": POLITENESS.host_concurrency,
            })
            store = self.store_class(settings, f"wg{self.runs}-{order}")
            client = redis.Redis(host="127.0.0.1", port=self.server.port)
            out.append(store.partitioned_frontier(
                client, lease_ttl=1e9, max_pages_per_host=None, clock=clock
            ))
        deadline = time.monotonic() + 60
        while any(len(f.parts) != f.count // workers for f in out):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not share the partitions out in 60 s")
            for f in out:
                f.beat()
            time.sleep(0.1)
        return out

    def close(self, frontiers: list[Any]) -> None:
        for f in frontiers:
            f.close()
            f.client.close()

    def stop(self) -> None:
        self.server.stop()


def crawl_frontier(
    graph: WebGraph,
    order: str,
    limit: int,
    *,
    book: PolicyBook | None = None,
    seed: int = 0,
    redis: RedisFrontiers | None = None,
    workers: int = 1,
) -> Crawl:
    """Drive this crawler's frontier over ``graph`` until ``limit`` pages are fetched: the
    memory frontier, or with ``redis`` the partitioned Redis frontier of ``workers`` workers,
    each with its share of the fetchers (a page's links go through the worker that fetched
    it; letters to another worker's partitions are read before that worker's next call, as
    its wake-up makes it do)."""
    started = time.process_time()
    clock = Clock()
    rng = random.Random(seed)
    frontiers: list[Any] = (
        [make_frontier(order, clock, rng)] if redis is None
        else redis.frontiers(order, clock, workers)
    )
    fetchers = [CONCURRENCY // len(frontiers)] * len(frontiers)
    mail = [False] * len(frontiers)  # letters were sent that this worker has not read
    prioritizer = Prioritizer("depth" if order.startswith("depth") else "fifo", FRONT_QUEUES)
    opic = order.startswith("opic")
    urls = [graph.url(p) for p in range(graph.pages)]
    hosts = graph.hosts
    host_of = graph.host_of.tolist()
    page_of = {u: i for i, u in enumerate(urls)}
    indptr, indices = graph.indptr.tolist(), graph.indices
    known_hosts: set[int] = set()
    pages_of_host = [0] * len(hosts)
    crawl = Crawl(order)
    host_index = {name: i for i, name in enumerate(hosts)}
    leases_entry: dict[tuple[int, str], Entry] = {}
    robots_hosts: set[int] = set()
    found: set[int] = set()  # pages queued once (the frontier's seen-test drops the rest)
    waiting = [0] * 256  # queued URLs per depth

    def posted(w: int, results: list[AddResult]) -> None:
        if any(r.reason == MAILED for r in results):
            for other in range(len(frontiers)):
                mail[other] = mail[other] or other != w

    def add_many(w: int, batch: list[tuple[int, Entry]]) -> None:
        posted(w, frontiers[w].add_many([e for _, e in batch]))
        for page, e in batch:
            if page not in found:
                found.add(page)
                waiting[e.depth] += 1

    def entry(w: int, page: int, depth: int, cash: float = 0.0, policy: str = "") -> Entry:
        h = host_of[page]
        if order == "random":
            prio = rng.randrange(FRONT_QUEUES)
        else:
            prio = prioritizer.priority(depth=depth, host=hosts[h])
        if h not in known_hosts:  # robots.txt goes first, as the robots fetcher does
            known_hosts.add(h)
            robots = Entry(f"http://{hosts[h]}/robots.txt", hosts[h])
            posted(w, [frontiers[w].add(robots, first=True)])
        return Entry(urls[page], hosts[h], prio, depth, None, 0, cash, policy)

    for p in [*graph.seeds, graph.spam_seed]:
        label, factor = "", 1.0
        if book is not None:
            decided = book.seed(hosts[host_of[p]])
            label, factor = decided.label, decided.factor
        posted(0, [frontiers[0].add(entry(0, p, 0, factor, label), force=True)])
        found.add(p)
        waiting[0] += 1

    def read_mail() -> None:
        for w, frontier in enumerate(frontiers):
            if mail[w]:
                mail[w] = False
                frontier.read_mail()

    def due_in() -> float | None:
        dues = [f.due_in() for w, f in enumerate(frontiers) if fetchers[w]]
        return min((d for d in dues if d is not None), default=None)

    active: list[tuple[float, int, int, str, int, float]] = []
    tick = 0
    while len(crawl.fetched) < limit:
        read_mail()
        for w, frontier in enumerate(frontiers):
            while fetchers[w]:
                lease = frontier.next()
                if lease is None:
                    break
                fetchers[w] -= 1
                url = lease.entry.url
                page = page_of.get(url, -1)
                h = host_of[page] if page >= 0 else host_index[lease.entry.host]
                dur = fetch_time(h)
                tick += 1
                heapq.heappush(active, (clock.now + dur, tick, w, lease.token, page, dur))
                if page < 0:
                    crawl.robots += 1
                    robots_hosts.add(h)
                else:
                    d = lease.entry.depth
                    waiting[d] -= 1
                    if d >= 2 and any(waiting[: d - 1]):
                        crawl.inversions += 1
                leases_entry[w, lease.token] = lease.entry
        if not active:
            due = due_in()
            if due is None:
                if any(mail):
                    continue
                break
            clock.now += max(due, 1e-6)
            continue
        due = due_in() if any(fetchers) else None
        if due is not None and clock.now + due < active[0][0]:
            clock.now += max(due, 1e-6)
            continue
        end, _, w, token, page, dur = heapq.heappop(active)
        clock.now = end
        frontier = frontiers[w]
        frontier.complete(token, dur)
        fetchers[w] += 1
        done = leases_entry.pop((w, token))
        if page >= 0:
            crawl.fetched.append(page)
            pages_of_host[host_of[page]] += 1
            links = indices[indptr[page] : indptr[page + 1]].tolist()
            depth = done.depth + 1
            batch = []
            if opic:
                n = len(links) or 1
                share = done.cash / n
                label = done.policy
                parent_host = hosts[host_of[page]]
                for t in links:
                    if book is not None:
                        decided = book.link(label, parent_host, depth, urls[t], hosts[host_of[t]])
                        if decided is None:
                            continue
                        batch.append((t, entry(w, t, depth, share * decided.factor,
                                               decided.label)))
                    else:
                        batch.append((t, entry(w, t, depth, share)))
            else:
                batch = [(t, entry(w, t, depth)) for t in links]
            add_many(w, batch)
        frontier.ack(token)
    crawl.robots_before_page = sum(1 for h in robots_hosts if not pages_of_host[h])
    crawl.seconds = time.process_time() - started
    crawl.sim_time = clock.now
    crawl.released = sum(back_released(f) for f in frontiers)
    crawl.back_queues = ", ".join(back_queue_counts(f) for f in frontiers)
    if redis is not None:
        redis.close(frontiers)
    return crawl


def crawl_stock(graph: WebGraph, limit: int) -> Crawl:
    """Stock Scrapy's default order: one LIFO queue (``DEPTH_PRIORITY = 0``), the engine
    feeding the downloader while fewer than CONCURRENT_REQUESTS requests are in it, one slot
    per host (``CONCURRENT_REQUESTS_PER_DOMAIN = 1``, ``DOWNLOAD_DELAY = 1``, start to
    start)."""
    started = time.process_time()
    crawl = Crawl("stock")
    host_of = graph.host_of.tolist()
    indptr, indices = graph.indptr.tolist(), graph.indices
    seen = set([*graph.seeds, graph.spam_seed])
    stack = list(reversed([*graph.seeds, graph.spam_seed]))
    slots: dict[int, deque[int]] = {}
    next_start: dict[int, float] = {}
    busy: set[int] = set()
    ready: list[tuple[float, int]] = []  # (time, host) of idle slots with requests
    active: list[tuple[float, int, int]] = []
    in_downloader = 0
    now = 0.0
    while len(crawl.fetched) < limit:
        while in_downloader < CONCURRENCY and stack:
            p = stack.pop()
            h = host_of[p]
            q = slots.setdefault(h, deque())
            q.append(p)
            in_downloader += 1
            if h not in busy and len(q) == 1:
                heapq.heappush(ready, (max(now, next_start.get(h, 0.0)), h))
        while ready and ready[0][0] <= now:
            _, h = heapq.heappop(ready)
            if h in busy or not slots.get(h):
                continue
            p = slots[h].popleft()
            busy.add(h)
            next_start[h] = now + POLITENESS.min_delay
            heapq.heappush(active, (now + fetch_time(h), p, h))
        times = [t for t in (active[0][0] if active else None, ready[0][0] if ready else None)
                 if t is not None]
        if not times:
            break
        now = max(now, min(times))
        while active and active[0][0] <= now:
            _, p, h = heapq.heappop(active)
            busy.discard(h)
            in_downloader -= 1
            crawl.fetched.append(p)
            if slots[h]:
                heapq.heappush(ready, (max(now, next_start[h]), h))
            for t in indices[indptr[p] : indptr[p + 1]].tolist():
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
    crawl.seconds = time.process_time() - started
    crawl.sim_time = now
    return crawl


def judge(graph: WebGraph, crawl: Crawl, n10: int, n20: int) -> dict[str, float]:
    pr = graph.pagerank()
    fetched = np.array(crawl.fetched, dtype=np.int64)
    farm = graph.farm[graph.host_of] >= 0
    return {
        "pr10": float(pr[fetched[:n10]].sum()),
        "pr20": float(pr[fetched[:n20]].sum()),
        "farm20": float(farm[fetched[:n20]].mean()) if len(fetched) else 0.0,
    }


def farm_outlinks(graph: WebGraph) -> np.ndarray:
    """Good pages that farm pages link to."""
    farm = graph.farm[graph.host_of] >= 0
    targets = set()
    for p in np.nonzero(farm)[0].tolist():
        for t in graph.links(p).tolist():
            if not farm[t]:
                targets.add(t)
    return np.array(sorted(targets), dtype=np.int64)


def distrust_book(graph: WebGraph) -> PolicyBook:
    spam_host = graph.hosts[graph.host_of[graph.spam_seed]]
    return PolicyBook(
        {"distrust": CrawlPolicy("distrust", multiplier=0.001, dampening=0.5)},
        distrusted=frozenset({spam_host}),
        distrusted_policy="distrust",
    )


def run_graph(
    seed: int,
    pages: int,
    hosts: int,
    share: float,
    redis: RedisFrontiers | None = None,
    workers: tuple[int, ...] = (1, 2),
    draws: int = 0,
) -> None:
    graph = build_webgraph(seed, pages=pages, hosts=hosts)
    pr = graph.pagerank()
    n10, n20 = int(0.1 * graph.pages), int(0.2 * graph.pages)
    best = np.sort(pr)[::-1]
    limit = int(share * graph.pages)
    print(f"\n## graph seed {seed}: {graph.pages} pages, {len(graph.hosts)} hosts, "
          f"{int(graph.indptr[-1])} links, {int((graph.farm >= 0).sum())} farm hosts")
    print(f"best possible: {best[:n10].sum():.1%} of PageRank after 10 %, "
          f"{best[:n20].sum():.1%} after 20 %")
    print("| order | PR after 10 % | PR after 20 % | farm share of first 20 % "
          "| robots.txt of hosts without a page fetched / all "
          "| fetches 2+ levels deeper than a URL waiting | back queues given up | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    crawls = {}
    for order in (*ORDERS, "depth-main"):
        crawl = crawl_stock(graph, limit) if order == "stock" else crawl_frontier(
            graph, order, limit
        )
        r = judge(graph, crawl, n10, n20)
        results[order], crawls[order] = r, crawl
        name = "depth as on main (back_run=0, robots.txt first)" if order == "depth-main" else order
        robots = "-" if order == "stock" else f"{crawl.robots_before_page}/{crawl.robots}"
        inversions = "-" if order == "stock" else f"{crawl.inversions / len(crawl.fetched):.1%}"
        print(f"| {name} | {r['pr10']:.1%} | {r['pr20']:.1%} | {r['farm20']:.1%} | {robots} "
              f"| {inversions} | {crawl.released} | {crawl.seconds:.1f} |")
    o, d = results["opic"], results["depth"]
    print(f"OPIC / depth: {o['pr10'] / d['pr10']:.2f}x after 10 %, "
          f"{o['pr20'] / d['pr20']:.2f}x after 20 %")
    book = distrust_book(graph)
    crawl = crawl_frontier(graph, "opic", limit, book=book)
    r = judge(graph, crawl, n10, n20)
    good_out = farm_outlinks(graph)
    got = np.isin(good_out, np.array(crawl.fetched[:n20]))
    print(f"OPIC, spam seed distrusted: PR {r['pr10']:.1%} / {r['pr20']:.1%}, farm share of "
          f"first 20 % {r['farm20']:.2%}; good pages linked from the farms fetched in the "
          f"first 20 %: {int(got.sum())}/{len(good_out)}")
    full = crawl_frontier(graph, "opic", graph.pages, book=book)
    got_all = np.isin(good_out, np.array(full.fetched))
    print(f"  ... to completion: {len(full.fetched)} pages fetched of {graph.pages}; good pages "
          f"linked from the farms fetched: {int(got_all.sum())}/{len(good_out)}")
    if draws:
        noise(graph, limit, draws)
    if redis is not None:
        compare_backends(graph, limit, crawls, redis, workers)


def same_pages(crawl: Crawl, reference: Crawl, n: int) -> float:
    """Share of ``crawl``'s first ``n`` pages that ``reference`` fetched among its first ``n``."""
    return len(set(crawl.fetched[:n]) & set(reference.fetched[:n])) / max(1, n)


def compare_backends(
    graph: WebGraph,
    limit: int,
    memory: dict[str, Crawl],
    redis: RedisFrontiers,
    workers: tuple[int, ...],
) -> None:
    """OPIC and depth on the partitioned Redis frontier (``workers`` workers sharing its 16
    partitions and the 64 fetchers) against the memory frontier's crawls of the same graph."""
    n10, n20 = int(0.1 * graph.pages), int(0.2 * graph.pages)
    print(f"\n### memory against Redis, graph of {graph.pages} pages")
    print("| backend | order | PR after 10 % | PR after 20 % | farm share of first 20 % "
          "| first 10 % / 20 % also memory's | robots.txt of hosts without a page fetched / all "
          "| back queues (per worker: partitions x each) | back queues given up "
          "| CPU s (bench + Redis) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for order in ("opic", "depth"):
        runs = [("memory", memory[order], 0.0)]
        for n in workers:
            cpu = redis_cpu(redis.server.client())
            crawl = crawl_frontier(graph, order, limit, redis=redis, workers=n)
            runs.append((f"redis, {n} worker{'s' * (n > 1)}", crawl,
                         redis_cpu(redis.server.client()) - cpu))
        for backend, crawl, rcpu in runs:
            r = judge(graph, crawl, n10, n20)
            print(f"| {backend} | {order} | {r['pr10']:.1%} | {r['pr20']:.1%} "
                  f"| {r['farm20']:.1%} | {same_pages(crawl, memory[order], n10):.1%} / "
                  f"{same_pages(crawl, memory[order], n20):.1%} "
                  f"| {crawl.robots_before_page}/{crawl.robots} | {crawl.back_queues} "
                  f"| {crawl.released} "
                  f"| {crawl.seconds + rcpu:.1f} |", flush=True)


def redis_cpu(client: object) -> float:
    """The Redis server's CPU seconds so far (user + system)."""
    info = client.info("cpu")  # type: ignore[attr-defined]
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_real(
    pages: int, seed: int = 1, backends: tuple[str, ...] = ("memory",), runs: int = 1
) -> None:
    """Real ``scrapy crawl`` runs of a smaller graph served on loopback, stopped after 20 % of
    its pages: the PageRank fetched in item order, and the farm share. ``backends``: the
    frontier's (``redis``: a redis-server of its own on a free port, started here), each
    order on each backend in turn, ``runs`` times; CPU is the crawl process's plus Redis's."""
    import json
    import os
    import resource
    import subprocess
    import tempfile

    from devsite.webgraph import WebGraphServer
    from tests.crawling import crawl_command

    graph = small_graph(pages, seed)
    n10, n20 = int(0.1 * graph.pages), int(0.2 * graph.pages)
    print(f"\n## real scrapy crawl: graph seed {seed}, {graph.pages} pages, {len(graph.hosts)} "
          f"hosts on loopback, stopped after {n20} pages (CLOSESPIDER_ITEMCOUNT), "
          f"load {os.getloadavg()[0]:.1f}")
    print("| backend | order | PR after 10 % | PR after 20 % | farm share of first 20 % | pages "
          "| wall s | CPU ms/page (crawl + Redis) |")
    print("|---|---|---|---|---|---|---|---|")
    redis_server = None
    with WebGraphServer(graph) as server, tempfile.TemporaryDirectory() as tmp:
        if "redis" in backends:
            from tests.redis_support import start_redis

            (Path(tmp) / "redis").mkdir()
            redis_server = start_redis(Path(tmp) / "redis")
        seeds = [graph.url(p) for p in [*graph.seeds, graph.spam_seed]]
        spam_host = graph.hosts[graph.host_of[graph.spam_seed]]
        plan = [(b, o, r) for r in range(runs) for o in ("opic", "depth", "fifo", "opic+distrust")
                for b in backends]
        for backend, order, run in plan:
            work = Path(tmp) / f"{backend}-{order.replace('+', '-')}-{run}"
            sites = work / "sites"
            sites.mkdir(parents=True)
            (sites / "distrusted.txt").write_text(spam_host + "\n")
            distrust = 'distrusted_domains = "distrusted.txt"\n' if "distrust" in order else ""
            # an open scope, as the openweb site has: the crawl goes wherever the links lead
            (sites / "wg.toml").write_text(
                f'name = "wg"\nallow_private_addresses = true\n{distrust}[scope]\nopen = true\n'
            )
            settings = {
                "FRONTIER_PRIORITY_POLICY": order.split("+")[0],
                "CONCURRENT_REQUESTS": 32,
                "FRONTIER_MIN_DELAY": 0.5,
                "FRONTIER_DELAY_FACTOR": 0,
                "CLOSESPIDER_ITEMCOUNT": n20,
                "NEARDUP_ENABLED": False,
                "INDEX_ENABLED": False,
                "RECORD_ENABLED": False,
                "LOG_LEVEL": "INFO",
            }
            client = None
            if backend == "redis":
                assert redis_server is not None
                settings |= {
                    "FRONTIER_BACKEND": "redis",
                    "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
                    "FRONTIER_REDIS_KEY": f"wg-{order.replace('+', '-')}-{run}",
                }
                client = redis_server.client()
            cmd = crawl_command(work, "wg", seeds=seeds, settings=settings, sites_dir=sites)
            started = time.perf_counter()
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            rcpu0 = redis_cpu(client) if client is not None else 0.0
            subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
            if client is not None:
                cpu += redis_cpu(client) - rcpu0
                client.close()
            fetched = []
            for line in (work / "items.jsonl").read_text().splitlines():
                url = json.loads(line)["url"]
                rest = url.split("://", 1)[1]
                host_port, _, path = rest.partition("/")
                page = graph.page_of(host_port.split(":")[0], "/" + path)
                if page is not None:
                    fetched.append(page)
            crawl = Crawl(order, fetched)
            r = judge(graph, crawl, n10, n20)
            print(f"| {backend} | {order} | {r['pr10']:.1%} | {r['pr20']:.1%} "
                  f"| {r['farm20']:.1%} | {len(fetched)} | {wall:.0f} "
                  f"| {cpu / max(1, len(fetched)) * 1e3:.2f} |", flush=True)
        del server
        if redis_server is not None:
            redis_server.stop()
    if backends == ("memory",):
        simulate_like_real(graph)


def small_graph(pages: int, seed: int = 1) -> WebGraph:
    """The graph of ``--real``: 50 pages a host, three farms of 4 hosts."""
    hosts = max(100, pages // 50)
    return build_webgraph(seed, pages=pages, hosts=hosts, farm_hosts=max(4, hosts // 100),
                          farm_pages=max(300, pages // 33), good_seeds=min(19, hosts // 20))


def simulate_like_real(graph: WebGraph) -> None:
    """The ``--real`` graph with the frontier driven directly under the real runs' settings
    (32 fetchers, so 96 back queues; 0.5 s between a host's fetches; fetch times as above)."""
    global CONCURRENCY, POLITENESS
    saved = CONCURRENCY, POLITENESS
    CONCURRENCY, POLITENESS = 32, PolitenessPolicy(min_delay=0.5, delay_factor=0)
    n10, n20 = int(0.1 * graph.pages), int(0.2 * graph.pages)
    try:
        for order in ("opic", "depth", "fifo", "opic+distrust"):
            book = distrust_book(graph) if "distrust" in order else None
            crawl = crawl_frontier(graph, order.split("+")[0], n20, book=book)
            r = judge(graph, crawl, n10, n20)
            print(f"| {order} (simulated) | {r['pr10']:.1%} | {r['pr20']:.1%} "
                  f"| {r['farm20']:.1%} | {len(crawl.fetched)} | - |")
    finally:
        CONCURRENCY, POLITENESS = saved


def doc_site(trees: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Real documentation trees as a site: page URL -> its links as written (joined), one host
    per tree (``tN.docs.test``), and the seeds (:func:`tree_seeds`)."""
    import re
    from urllib.parse import urljoin

    href = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'#][^"']*)["']""", re.I)
    pages: dict[str, list[str]] = {}
    seeds = []
    for n, tree in enumerate(trees):
        root = Path(tree)
        host = f"t{n}.docs.test"
        for path in sorted(root.rglob("*.htm*")):
            if not path.is_file() or "/core/arch/" in path.as_posix():
                continue
            url = f"http://{host}/{path.relative_to(root).as_posix()}"
            links = []
            for raw in href.findall(path.read_bytes()):
                try:
                    links.append(urljoin(url, raw.decode("utf-8", "replace").strip()))
                except ValueError:
                    continue
            pages[url] = links
        seeds += tree_seeds(pages, host)
    return pages, seeds


def tree_seeds(pages: dict[str, list[str]], host: str) -> list[str]:
    """A tree's start pages: its ``index.html``; else (``/usr/share/doc``, one directory a
    package: a seed there that did not exist found no link, and that tree alone crawled
    nothing) the pages nothing links to, then, for the pages still out of their reach, the
    shallowest of them (a directory's index first), until every page is reached."""
    index = f"http://{host}/index.html"
    if index in pages:
        return [index]
    mine = [url for url in pages if url.split("/")[2] == host]
    linked = {link.partition("#")[0] for url in mine for link in pages[url]}
    seeds: list[str] = []
    reached: set[str] = set()
    for url in sorted(mine, key=lambda u: (u in linked, u.count("/"),
                                           not u.endswith("/index.html"), u)):
        if url in reached:
            continue
        seeds.append(url)
        todo = [url]
        while todo:
            page = todo.pop()
            if page not in reached and page in pages:
                reached.add(page)
                todo += (link.partition("#")[0] for link in pages[page])
    return seeds


def link_cost(trees: list[str], runs: int = 3) -> None:
    """CPU per link of admission, link intake and frontier (no network, no parsing: the links
    are read from the files first), OPIC against depth, each crawl to completion."""
    from crawler.frontier import UrlPolicy
    from crawler.frontier.scope import ScopeRegistry
    from crawler.scheduler.admission import Admission
    from crawler.scheduler.intake import LinkIntake
    from crawler.scheduler.stats import FrontierStats
    from tests.test_scheduler_intake import Stats

    pages, seeds = doc_site(trees)
    hosts = sorted({u.split("/")[2] for u in seeds})
    results: dict[str, list[tuple[float, int, frozenset[str]]]] = {"depth": [], "opic": []}
    for _ in range(runs):
        for order in ("depth", "opic"):
            clock = Clock()
            frontier = MercatorFrontier(
                PolitenessPolicy(min_delay=0, delay_factor=0), clock=clock,
                ledger=CashLedger(FRONT_QUEUES) if order == "opic" else None,
                selector_weights=selector_weights(FRONT_QUEUES) if order == "opic" else None,
                back_run=4, lease_ttl=1e9,
            )
            admission = Admission(UrlPolicy(hosts=hosts), Prioritizer(order, FRONT_QUEUES),
                                  ScopeRegistry(), lambda origin, host: None)
            intake = LinkIntake(admission, frontier, FrontierStats(Stats()),
                                slice_size=10**9, cache_size=1_000_000)
            for url in seeds:
                frontier.add(admission.entry(url, url.split("/")[2], 0, cash=1.0), force=True)
            fetched = []
            links = 0
            started = time.process_time()
            while (lease := frontier.next()) is not None:
                entry = lease.entry
                fetched.append(entry.url)
                out = pages.get(entry.url, [])
                links += len(out)
                intake.take(out, entry.depth + 1, None, None, cash=entry.cash, page=entry.url)
                frontier.finish(lease.token, 0.0)
            cpu = time.process_time() - started
            results[order].append((cpu, links, frozenset(fetched)))
    if not links:
        raise SystemExit(f"no links found from the seeds of {', '.join(trees)}: nothing to time")
    print(f"\n## per-link CPU, real documentation ({len(pages)} pages in {len(trees)} trees: "
          f"{', '.join(trees)})")
    print("| order | pages fetched | links taken | CPU per link, best of runs (us) | all runs |")
    print("|---|---|---|---|---|")
    for order, rows in results.items():
        best = min(r[0] / r[1] for r in rows) * 1e6
        runs_text = ", ".join(f"{r[0] / r[1] * 1e6:.2f}" for r in rows)
        print(f"| {order} | {len(rows[0][2])} | {rows[0][1]} | {best:.2f} | {runs_text} |")
    d = min(r[0] / r[1] for r in results["depth"])
    o = min(r[0] / r[1] for r in results["opic"])
    same = results["depth"][0][2] == results["opic"][0][2]
    print(f"OPIC / depth CPU per link: {o / d:.3f}; same pages fetched: {same}")


class PageCalls:
    """A Redis frontier as a worker's ``BufferedFrontier`` drives it, one page at a time: the
    page's links and the cash of its repeated links (``add_many``, ``credit``) wait for its
    completion and go with it in one ``apply`` (one pipeline: the links' script call, then the
    completion's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entries: list[Entry] = []
        self.credits: list[tuple[Any, ...]] = []

    def add_many(self, entries: list[Entry]) -> list[Any]:
        from crawler.frontier.api import AddResult

        self.entries += entries
        return [AddResult(True)] * len(entries)

    def credit(self, links: list[tuple[Any, ...]]) -> None:
        self.credits += links

    def finish(self, token: str) -> None:
        from crawler.frontier.api import Settlement

        self.inner.apply(self.entries, [Settlement("finish", token, 0.0)], self.credits)
        self.entries, self.credits = [], []


def link_cost_redis(trees: list[str], runs: int = 3) -> None:
    """``link_cost`` on the partitioned Redis frontier (a redis-server of its own, one worker
    owning the crawl's one partition): admission, link intake and the frontier's Redis calls,
    a page's links, their cash and its completion in one ``apply`` as a worker sends them
    (:class:`PageCalls`), each crawl to completion; CPU is this process's plus Redis's. Then
    the bytes per queued URL (Redis's ``used_memory``), depth against OPIC."""
    import os
    import tempfile

    from crawler.frontier import UrlPolicy
    from crawler.frontier.scope import ScopeRegistry
    from crawler.scheduler.admission import Admission
    from crawler.scheduler.intake import LinkIntake
    from crawler.scheduler.stats import FrontierStats
    from tests.redis_support import start_redis
    from tests.test_frontier_partitioned import partitioned
    from tests.test_scheduler_intake import Stats

    pages, seeds = doc_site(trees)
    hosts = sorted({u.split("/")[2] for u in seeds})
    results: dict[str, list[tuple[float, float, int, frozenset[str]]]] = {"depth": [], "opic": []}
    with tempfile.TemporaryDirectory() as tmp:
        server = start_redis(Path(tmp))
        client = server.client()
        client.config_set("hash-max-listpack-entries", 128)  # Redis's default (Debian's: 512)
        for run in range(runs):
            for order in ("depth", "opic"):
                clock = Clock()
                frontier = partitioned(
                    client, f"lc-{order}-{run}", clock,
                    policy=PolitenessPolicy(min_delay=0, delay_factor=0),
                    front_queues=FRONT_QUEUES, back_queues=48, lease_ttl=1e9,
                    opic=order == "opic", back_run=4,
                )
                admission = Admission(UrlPolicy(hosts=hosts), Prioritizer(order, FRONT_QUEUES),
                                      ScopeRegistry(), lambda origin, host: None)
                calls = PageCalls(frontier)
                intake = LinkIntake(admission, calls, FrontierStats(Stats()),
                                    slice_size=10**9, cache_size=1_000_000)
                for url in seeds:
                    frontier.add(admission.entry(url, url.split("/")[2], 0, cash=1.0),
                                 force=True)
                fetched = []
                links = 0
                started, rstarted = time.process_time(), redis_cpu(client)
                while leases := frontier.next_many(16):
                    for lease in leases:
                        entry = lease.entry
                        fetched.append(entry.url)
                        out = pages.get(entry.url, [])
                        links += len(out)
                        intake.take(out, entry.depth + 1, None, None, cash=entry.cash,
                                    page=entry.url)
                        calls.finish(lease.token)
                cpu = time.process_time() - started
                rcpu = redis_cpu(client) - rstarted
                results[order].append((cpu, rcpu, links, frozenset(fetched)))
        if not links:
            raise SystemExit(f"no links found from the seeds of {', '.join(trees)}")
        print(f"\n## per-link CPU on Redis, real documentation ({len(pages)} pages in "
              f"{len(trees)} trees), load {os.getloadavg()[0]:.1f}")
        print("| order | pages fetched | links taken | CPU per link, client + Redis, best of "
              "runs (us) | Redis's part (us) | all runs (us) |")
        print("|---|---|---|---|---|---|")
        for order, rows in results.items():
            best = min(rows, key=lambda r: (r[0] + r[1]) / r[2])
            all_runs = ", ".join(f"{(r[0] + r[1]) / r[2] * 1e6:.2f}" for r in rows)
            print(f"| {order} | {len(rows[0][3])} | {rows[0][2]} "
                  f"| {(best[0] + best[1]) / best[2] * 1e6:.2f} | {best[1] / best[2] * 1e6:.2f} "
                  f"| {all_runs} |")
        d = min((r[0] + r[1]) / r[2] for r in results["depth"])
        o = min((r[0] + r[1]) / r[2] for r in results["opic"])
        same = results["depth"][0][3] == results["opic"][0][3]
        print(f"OPIC / depth CPU per link on Redis: {o / d:.3f}; same pages fetched: {same}")
        queued_memory(client, pages=pages)
        client.close()
        server.stop()


def queued_memory(
    client: object,
    hosts: int = 20,
    per_host: int = 5000,
    pages: dict[str, list[str]] | None = None,
) -> None:
    """Bytes per queued URL in Redis (the partitioned frontier, one partition), depth against
    OPIC, less the seen-set: for hosts of ``per_host`` URLs and of 50 (URLs of 50-60
    characters, no referrer), and for the documentation's links within its hosts with the page
    each was found on (``pages``: longer entries)."""
    from crawler.frontier.urls import normalize_url
    from tests.test_frontier_partitioned import partitioned

    shapes: list[tuple[str, list[Entry]]] = []
    for n_hosts, n in ((hosts, per_host), (hosts * 100, 50)):
        shapes.append((f"{n_hosts} x {n}", [
            Entry(f"https://www.host{h}.example.org/docs/section-{i // 40}/page-{i}.html",
                  f"www.host{h}.example.org", priority=FRONT_QUEUES // 2, depth=3,
                  cash=1.0 / (1 + i % 7))
            for h in range(n_hosts) for i in range(n)
        ]))
    if pages:
        links: dict[str, Entry] = {}
        for page, out in pages.items():
            for raw in out:
                url, host = normalize_url(raw) if raw.startswith("http") else ("", "")
                if url and url not in links and host == page.split("/")[2]:
                    links[url] = Entry(url, host, priority=FRONT_QUEUES // 2, depth=3,
                                       cash=1.0 / (1 + len(links) % 7), referrer=page)
        hosts_of = len({e.host for e in links.values()})
        if links:
            shapes.append((f"{hosts_of} x {len(links) // hosts_of} (documentation, referrers)",
                           list(links.values())))
    print("\n| hosts x URLs queued | depth: bytes per queued URL | OPIC |  (used_memory; "
          "under 50,000 URLs, the sum of MEMORY USAGE)")
    print("|---|---|---|")
    for label, entries in shapes:
        per = {}
        for order in ("depth", "opic"):
            key = f"mem-{order}-{len(entries)}-{label[:4]}"
            f = partitioned(client, key, Clock(), front_queues=FRONT_QUEUES, back_queues=1,
                            opic=order == "opic")  # one back queue: all in front
            before = client.info("memory")["used_memory"]  # type: ignore[attr-defined]
            for at in range(0, len(entries), 1000):
                f.add_many(entries[at : at + 1000])
            after = client.info("memory")["used_memory"]  # type: ignore[attr-defined]
            usage = {k: client.memory_usage(k, samples=0) or 0  # type: ignore[attr-defined]
                     for k in client.scan_iter(match=f"{{{key}*")}  # type: ignore[attr-defined]
            seen = sum(v for k, v in usage.items() if k.split(b"}", 1)[-1].startswith(b":s"))
            if len(entries) < 50_000:  # too few for used_memory: the keys' own sizes
                after, before = sum(usage.values()), 0
            per[order] = (after - before - seen) / len(entries)
            f.close()
        print(f"| {label} | {per['depth']:.0f} | {per['opic']:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--real", type=int, default=0)
    parser.add_argument("--linkcost", nargs="*", default=None, metavar="TREE",
                        help="only the per-link CPU on documentation trees (default: the Rust "
                        "reference, std, and /usr/share/doc)")
    parser.add_argument("--backends", default="memory",
                        help="the frontier backends, e.g. memory,redis (the graphs: memory's "
                        "orders, then OPIC and depth on Redis against memory's)")
    parser.add_argument("--workers", default="1,2",
                        help="the graphs on Redis: workers sharing the crawl, e.g. 1,2")
    parser.add_argument("--runs", type=int, default=1, help="--real: runs of each order")
    parser.add_argument("--memory-back-queues", type=int, default=0,
                        help="the graphs: the memory frontier's B (0: 3 x fetchers)")
    parser.add_argument("--redis-back-queues", type=int, default=0,
                        help="the graphs on Redis: a worker's B (0: 3 x its fetchers), shared "
                        "over the partitions it owns")
    parser.add_argument("--partitions", type=int, default=0,
                        help="the graphs on Redis: the crawl's partitions (0: the store's, 16)")
    parser.add_argument("--noise", type=int, default=0, metavar="DRAWS",
                        help="the graphs: OPIC and depth in memory again with the fetch times "
                        "moved a little, DRAWS times (the spread a difference is judged by)")
    args = parser.parse_args()
    global MEMORY_BACK_QUEUES
    MEMORY_BACK_QUEUES = args.memory_back_queues
    if args.linkcost is not None:
        import glob

        trees = args.linkcost or [
            *sorted(glob.glob(str(Path.home() / ".rustup/toolchains/stable-*/share/doc/rust/html"
                                  "/reference"))),
            *sorted(glob.glob(str(Path.home() / ".rustup/toolchains/stable-*/share/doc/rust/html"
                                  "/std"))),
            "/usr/share/doc",
        ]
        if "memory" in args.backends:
            link_cost(trees)
        if "redis" in args.backends:
            link_cost_redis(trees, runs=max(args.runs, 2))
        return
    backends = tuple(args.backends.split(","))
    redis = None
    with tempfile.TemporaryDirectory() as tmp:
        if "redis" in backends and args.seeds:
            redis = RedisFrontiers(Path(tmp), args.redis_back_queues, args.partitions)
        try:
            for seed in (int(s) for s in args.seeds.split(",") if s):
                run_graph(seed, args.pages, args.hosts, args.share, redis,
                          tuple(int(w) for w in args.workers.split(",")), args.noise)
        finally:
            if redis is not None:
                redis.stop()
    if args.real:
        run_real(args.real, backends=backends, runs=args.runs)


if __name__ == "__main__":
    main()
