"""What a Redis Cluster failover costs a sharded crawl, with and without FRONTIER_REPLICA_WAIT.

    .venv/bin/python bench/cluster_failover.py [--runs 5] [--hosts 24] [--pages 60]

Each run starts a real 3-master cluster with a replica each (``tests/redis_cluster_support``),
crawls a synthetic graph with three worker threads and six shards (``tests/cluster_crawl``: no
HTTP, a fetch is a sleep), SIGKILLs a master once a tenth of the pages are fetched (its replica
stopped ``--lag`` seconds before, so it is behind as a loaded replica is), lets the replica take
over, and counts URLs never fetched (lost) and pages fetched twice. A second crawl
without a fault, on the same cluster, gives the cost of waiting for replicas: wall time and
Redis CPU (all masters, ``INFO cpu``) per page with ``WAIT 1`` after every write and without.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cluster_crawl import CrawlRecord, Graph, crawl
from tests.redis_cluster_support import RedisClusterServers, start_cluster
from tests.redis_support import fresh_key


def redis_cpu(cluster: RedisClusterServers) -> float:
    total = 0.0
    for node in cluster.masters():
        with node.client() as c:
            info = c.info("cpu")
        total += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return total


def one_run(graph: Graph, replica_wait: int, fault: bool, lag: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as root:
        cluster = start_cluster(Path(root), masters=3, replicas=1)
        try:

            def failover(record: CrawlRecord) -> None:
                cluster.kill_master(cluster.masters_with_replicas()[0], replica_lag=lag)
                record.mark()

            cpu = redis_cpu(cluster)
            started = time.monotonic()
            record = crawl(
                cluster.client, fresh_key(), graph, shards=6, replica_wait=replica_wait,
                during=failover if fault else None, fetch_time=0.0,
            )  # fmt: skip
            wall = time.monotonic() - started
            cpu = redis_cpu(cluster) - cpu if not fault else float("nan")
        finally:
            cluster.stop()
    fetched = record.fetched()
    return {
        "lost": len(graph.all_urls() - set(fetched)),
        "twice": sum(n - 1 for n in fetched.values()),
        "pages": len(fetched),
        "wall": wall,
        "redis_ms_per_page": 1000 * cpu / max(1, len(fetched)),
        "pages_per_s": len(fetched) / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=24)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument(
        "--lag", type=float, default=0.3,
        help="seconds the killed master's replica is stopped before the kill (0: none)",
    )  # fmt: skip
    args = parser.parse_args()
    graph = Graph(hosts=args.hosts, pages=args.pages)
    print(
        f"graph: {args.hosts} hosts x {args.pages} pages; 3 masters + 3 replicas; 6 shards; "
        f"replica behind by {args.lag}s at the kill"
    )
    for wait in (0, 1):
        faults = [one_run(graph, wait, True, args.lag) for _ in range(args.runs)]
        clean = [one_run(graph, wait, False, 0.0) for _ in range(max(1, args.runs // 2))]
        print(
            f"FRONTIER_REPLICA_WAIT={wait}: failover runs {args.runs}: lost "
            f"{[int(f['lost']) for f in faults]}, fetched twice {[int(f['twice']) for f in faults]}"
            f"; no fault: {statistics.median(c['pages_per_s'] for c in clean):.0f} pages/s, "
            f"Redis {statistics.median(c['redis_ms_per_page'] for c in clean):.3f} ms CPU/page"
        )


if __name__ == "__main__":
    main()
