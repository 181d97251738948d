"""Sharded frontier on a Redis Cluster, simulated without HTTP (issue 23): what splitting a
crawl's frontier into S shards costs and how it spreads over N masters.

    .venv/bin/python bench/shard_sim.py [--urls 10000000] [--hosts 1000000] [--shards 1,3,6]
                                        [--masters 3] [--workers 2] [--zipf 1.0] [--space 3]
                                        [--links 50] [--lease 16] [--coalesce 1]
                                        [--json out.json]

For each N in ``--masters`` it starts a fresh local Redis Cluster of N masters and no replicas
(``tests/redis_cluster_support.py``), and for each S in ``--shards`` a fresh crawl on it, built as
production builds it (``frontier_store._redis_frontier``: one :class:`RedisFrontier` when S = 1,
else one per shard served by a :class:`ShardedFrontier`, 1024 back queues per shard, the cluster's
script runner, each worker listening on the wake channels). Politeness is
``PolitenessPolicy(min_delay=0, delay_factor=0, host_concurrency=1)``, so the frontier, not the
clock, is measured.

The workload: a URL space of ``--space`` x ``--urls`` ~50-character URLs over ``--hosts`` hosts
whose sizes follow Zipf (host of rank r has ~1/r^zipf of the space: a few huge hosts, a long tail,
each host its own registered domain). Seeds: one URL per host (so every host is in the crawl).
Then ``--workers`` processes run page cycles: ``lease_with_status(--lease)``, and for each lease
(``--coalesce`` N: for each N leases, their links and completions in one ``apply``, as the
buffered frontier sends the calls queued while its worker is busy; 1: each page's own)
``add_many`` of ``--links`` links drawn uniformly from the URL space (so a link's host follows
the same Zipf law, and more links are already seen as the crawl goes on), then ``finish`` (links
before the acknowledgement, as the buffered frontier orders them), until ``--urls`` URLs have
been added in all (seeds included).

Measured per configuration, for the page cycles only: Redis CPU per page (``INFO cpu`` user + sys
deltas, summed over the masters) and each master's share of it; worker CPU per page
(``time.process_time`` of the worker processes, all of it, and the part spent inside the frontier
calls); pages/s of the whole cluster; script calls per page and what the scripts' commands cost
(``INFO commandstats``); Redis ``used_memory`` per queued URL and per seen URL at the end (the
seen SETs' ``MEMORY USAGE`` against the rest). Then a projection from the per-node figures:
masters for a billion URLs and for 10,000 pages/s.

Nothing leaves loopback. Needs ``redis-server`` and ``redis-cli`` (apt-get install redis-server).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from redis.cluster import RedisCluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.redis.calls import script_runner
from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.sharded import ShardedFrontier
from crawler.frontier import Entry, Frontier, PolitenessPolicy
from crawler.frontier.api import Settlement
from tests.redis_cluster_support import RedisClusterServers, start_cluster

POLICY = PolitenessPolicy(min_delay=0.0, delay_factor=0.0, host_concurrency=1)
BACK_QUEUES = 1024  # frontier_store.SHARED_BACK_QUEUES: the crawl's B, shared out over the shards
KEY = "sim"
USABLE_GB = 25.0  # memory a master may fill (a 32 GB machine, room for fork and fragmentation)
HEADROOM = 0.7  # share of a master's one core the projection lets the frontier use
PAGES_GOAL = 10_000
URLS_GOAL = 1e9


def host_name(h: int) -> str:
    return f"www.h{h:07d}.com"


def url(h: int, page: int) -> str:
    return f"https://www.h{h:07d}.com/pages/{page:013d}.html"  # 49 characters


class UrlSpace:
    """``total`` URLs over ``hosts`` hosts, host r holding ~total/r^zipf/H(zipf) of them (at
    least 1). A uniform draw over the space picks a host with Zipf odds."""

    def __init__(self, total: int, hosts: int, zipf: float) -> None:
        weights = 1.0 / np.arange(1, hosts + 1, dtype=np.float64) ** zipf
        sizes = np.maximum(1, np.floor(weights / weights.sum() * total)).astype(np.int64)
        self.sizes = sizes
        self.starts = np.concatenate(([0], np.cumsum(sizes)))
        self.total = int(self.starts[-1])
        self.hosts = hosts

    def draw(self, n: int, rng: np.random.Generator) -> list[Entry]:
        where = rng.integers(0, self.total, n)
        hosts = np.searchsorted(self.starts, where, side="right") - 1
        pages = where - self.starts[hosts]
        return [
            Entry(url(h, p), host_name(h), priority=1)
            for h, p in zip(hosts.tolist(), pages.tolist(), strict=True)
        ]


def build_frontier(client: Any, shards: int) -> Frontier:
    """As ``frontier_store._redis_frontier`` builds it (the settings this bench needs)."""
    runner = script_runner(client)
    parts = [
        RedisFrontier(
            client, KEY, POLICY, back_queues=-(-BACK_QUEUES // shards), shard=i, shards=shards,
            runner=runner,
        )
        for i in range(shards)
    ]
    return parts[0] if shards == 1 else ShardedFrontier(parts)


def worker(
    port: int, shards: int, space: UrlSpace, args: argparse.Namespace, seed: int,
    added: Any, start: Any, out: Any,
) -> None:  # fmt: skip
    """One worker process: page cycles until ``added`` reaches the goal; puts its figures."""
    client = RedisCluster(host="127.0.0.1", port=port)
    frontier = build_frontier(client, shards)
    unwatch = frontier.watch(lambda: None)
    rng = np.random.default_rng(seed)
    pages = new = empty = 0
    in_calls = 0.0
    start.wait()
    cpu0 = time.process_time()
    clock = time.process_time
    while added.value < args.urls:
        t = clock()
        leases, _ = frontier.lease_with_status(args.lease)
        in_calls += clock() - t
        if not leases:
            empty += 1
            time.sleep(0.001)
            continue
        batch = space.draw(args.links * len(leases), rng)
        for at in range(0, len(leases), args.coalesce):
            group = leases[at : at + args.coalesce]
            links = batch[at * args.links : (at + len(group)) * args.links]
            t = clock()
            # the group's links then its completions in one call, as the buffered frontier
            # sends what was queued while its worker was busy (Frontier.apply)
            results, _ = frontier.apply(
                links, [Settlement("finish", x.token, 0.05) for x in group]
            )
            in_calls += clock() - t
            fresh = sum(r.added for r in results)
            new += fresh
            pages += len(group)
            with added.get_lock():
                added.value += fresh
    cpu = time.process_time() - cpu0
    unwatch()
    client.close()
    out.put({"pages": pages, "added": new, "cpu": cpu, "in_calls": in_calls, "empty": empty})


# -- the servers' side ---------------------------------------------------------------------------


def node_clients(cluster: RedisClusterServers) -> list[Any]:
    return [m.client() for m in cluster.masters()]


def cpu_of(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def commandstats(clients: list[Any]) -> dict[str, tuple[int, int]]:
    """command -> (calls, usec), summed over the masters."""
    total: dict[str, tuple[int, int]] = {}
    for c in clients:
        for name, row in c.info("commandstats").items():
            name = name.removeprefix("cmdstat_")
            calls, usec = total.get(name, (0, 0))
            total[name] = (calls + int(row["calls"]), usec + int(row["usec"]))
    return total


def seen_bytes(client: RedisCluster, shards: int) -> int:
    """``MEMORY USAGE`` of every shard's seen SET, exact (every element counted)."""
    keys = CrawlKeys(KEY, shards=shards)
    return sum(int(client.memory_usage(fk.seen, samples=0) or 0) for fk in keys.shards())


# -- one configuration ---------------------------------------------------------------------------


def run_config(
    cluster: RedisClusterServers, masters: int, shards: int, space: UrlSpace,
    args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    nodes = node_clients(cluster)
    for c in nodes:
        c.flushall()
    base_mem = [int(c.info("memory")["used_memory"]) for c in nodes]
    port = cluster.masters()[0].port
    client = RedisCluster(host="127.0.0.1", port=port)
    frontier = build_frontier(client, shards)

    t0 = time.perf_counter()
    seeds = 0
    for first in range(0, space.hosts, 1000):
        chunk = [Entry(url(h, 0), host_name(h), priority=1)
                 for h in range(first, min(space.hosts, first + 1000))]  # fmt: skip
        seeds += sum(r.added for r in frontier.add_many(chunk))
    seed_wall = time.perf_counter() - t0
    print(f"  seeded {seeds:,} hosts in {seed_wall:.0f}s", flush=True)

    ctx = mp.get_context("fork")
    added = ctx.Value("q", seeds)
    start = ctx.Event()
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=worker, args=(port, shards, space, args, 1000 * shards + w, added, start, out)
        )
        for w in range(args.workers)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # connected and listening
    for c in nodes:
        c.config_resetstat()
    cpu0 = [cpu_of(c) for c in nodes]
    wall0 = time.perf_counter()
    start.set()
    reports = [out.get() for _ in procs]
    wall = time.perf_counter() - wall0
    cpu = [cpu_of(c) - x for c, x in zip(nodes, cpu0, strict=True)]
    stats = commandstats(nodes)
    node_calls = [commandstats([c]).get("evalsha", (0, 0))[0] for c in nodes]
    for p in procs:
        p.join()

    mem = [int(c.info("memory")["used_memory"]) - b for c, b in zip(nodes, base_mem, strict=True)]
    counts = frontier.counts()
    seen_mem = seen_bytes(client, shards)
    client.close()
    for c in nodes:
        c.close()

    pages = sum(r["pages"] for r in reports)
    redis_cpu = sum(cpu)
    result = {
        "masters": masters,
        "shards": shards,
        "workers": args.workers,
        "pages": pages,
        "added": int(added.value),
        "seeds": seeds,
        "queued": counts.queued,
        "seen": counts.seen,
        "hosts": counts.hosts,
        "wall": wall,
        "pages_per_s": pages / wall,
        "redis_cpu_us": redis_cpu / pages * 1e6,
        "node_cpu_us": [x / pages * 1e6 for x in cpu],
        "node_script_calls": [x / pages for x in node_calls],
        "busiest_share": max(cpu) / redis_cpu,
        "worker_cpu_us": sum(r["cpu"] for r in reports) / pages * 1e6,
        "worker_calls_us": sum(r["in_calls"] for r in reports) / pages * 1e6,
        "empty_leases": sum(r["empty"] for r in reports),
        "node_mem": mem,
        "mem_per_queued": (sum(mem) - seen_mem) / max(counts.queued, 1),
        "mem_per_seen": seen_mem / max(counts.seen, 1),
        "mem_per_url": sum(mem) / max(counts.seen, 1),
        "busiest_mem_share": max(mem) / max(sum(mem), 1),
        "commands": {k: [v[0] / pages, v[1] / pages] for k, v in stats.items()},
    }
    print_config(result)
    return result


def print_config(r: dict[str, Any]) -> None:
    shares = " ".join(f"{x / r['redis_cpu_us']:.2f}" for x in r["node_cpu_us"])
    calls = " ".join(f"{x:.2f}" for x in r["node_script_calls"])
    print(
        f"  N={r['masters']} S={r['shards']}: {r['pages']:,} pages in {r['wall']:.0f}s "
        f"({r['pages_per_s']:,.0f}/s), {r['added']:,} URLs added, {r['queued']:,} queued, "
        f"{r['seen']:,} seen, {r['hosts']:,} hosts\n"
        f"    Redis CPU {r['redis_cpu_us']:.0f} us/page (node shares {shares}; script calls per "
        f"page by node {calls}), worker CPU "
        f"{r['worker_cpu_us']:.0f} us/page ({r['worker_calls_us']:.0f} in frontier calls)\n"
        f"    memory {r['mem_per_queued']:.0f} B/queued URL + {r['mem_per_seen']:.0f} B/seen URL"
        f" ({sum(r['node_mem']) / 2**20:,.0f} MiB, busiest node {r['busiest_mem_share']:.2f})",
        flush=True,
    )
    top = sorted(r["commands"].items(), key=lambda kv: -kv[1][1])[:8]
    print(
        "    per page: "
        + ", ".join(f"{name} {calls:.2f}x {usec:.0f}us" for name, (calls, usec) in top),
        flush=True,
    )


# -- the tables ----------------------------------------------------------------------------------


def print_tables(results: list[dict[str, Any]]) -> None:
    print(
        "\n| N | S | pages | pages/s | Redis CPU us/page | vs S=1 | busiest node | 1.3/N |"
        " worker CPU us/page | vs S=1 | in calls | B/queued URL | B/seen URL |"
        " script calls/page |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    for r in results:
        one = next((x for x in results if x["masters"] == r["masters"] and x["shards"] == 1), r)
        calls = r["commands"].get("evalsha", [0, 0])[0]
        print(
            f"| {r['masters']} | {r['shards']} | {r['pages']:,} | {r['pages_per_s']:,.0f} | "
            f"{r['redis_cpu_us']:.0f} | {r['redis_cpu_us'] / one['redis_cpu_us']:.2f}x | "
            f"{r['busiest_share']:.2f} | {1.3 / r['masters']:.2f} | {r['worker_cpu_us']:.0f} | "
            f"{r['worker_cpu_us'] / one['worker_cpu_us']:.2f}x | {r['worker_calls_us']:.0f} | "
            f"{r['mem_per_queued']:.0f} | {r['mem_per_seen']:.0f} | {calls:.2f} |"
        )


def print_projection(results: list[dict[str, Any]]) -> None:
    """Masters for a billion URLs and for 10,000 pages/s, from each sharded run's per-node
    figures: the busiest node decides (its share of the memory or CPU, times N)."""
    print(
        f"\nProjection ({USABLE_GB:.0f} GB usable per master; one core per master at "
        f"{HEADROOM:.0%} for the frontier; the busiest node's share kept as measured):\n"
    )
    print(
        "| from N, S | B per URL (queued + seen) | masters for 1e9 URLs | Redis CPU us/page |"
        " masters for 10k pages/s |"
    )
    print("|---|---|---|---|---|")  # fmt: skip
    for r in results:
        if r["shards"] < r["masters"]:
            continue
        per_url = r["mem_per_queued"] + r["mem_per_seen"]
        skew_mem = r["busiest_mem_share"] * r["masters"]
        skew_cpu = r["busiest_share"] * r["masters"]
        for_urls = math.ceil(per_url * URLS_GOAL * skew_mem / (USABLE_GB * 1e9))
        for_pages = math.ceil(r["redis_cpu_us"] * 1e-6 * PAGES_GOAL * skew_cpu / HEADROOM)
        print(
            f"| N={r['masters']}, S={r['shards']} | {per_url:.0f} (skew {skew_mem:.2f}) | "
            f"{for_urls} | {r['redis_cpu_us']:.0f} (skew {skew_cpu:.2f}) | {for_pages} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--hosts", type=int, default=1_000_000)
    parser.add_argument("--shards", default="1,3,6")
    parser.add_argument("--masters", default="3")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--coalesce", type=int, default=1,
        help="pages whose links go in one add_many and completions in one settle_many, as the "
        "buffered frontier joins the calls queued while its worker is busy (1: each page alone)",
    )  # fmt: skip
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--space", type=float, default=3.0, help="URL space / --urls")
    parser.add_argument("--links", type=int, default=50)
    parser.add_argument("--lease", type=int, default=16)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    space = UrlSpace(int(args.space * args.urls), args.hosts, args.zipf)
    top = space.sizes[:3].tolist()
    print(
        f"{space.total:,} URLs of space over {args.hosts:,} hosts (Zipf {args.zipf}: largest "
        f"{top}, median {int(np.median(space.sizes))}); goal {args.urls:,} URLs added; "
        f"{args.workers} workers, {os.cpu_count()} cores",
        flush=True,
    )
    results = []
    for masters in [int(x) for x in args.masters.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            cluster = start_cluster(Path(tmp), masters=masters, replicas=0)
            try:
                for shards in [int(x) for x in args.shards.split(",")]:
                    print(f"N={masters} masters, S={shards} shards", flush=True)
                    results.append(run_config(cluster, masters, shards, space, args))
                    if args.json:
                        Path(args.json).write_text(json.dumps(results, indent=1))
            finally:
                cluster.stop()
    print_tables(results)
    print_projection(results)


if __name__ == "__main__":
    main()
