"""A real crawl through a Redis Cluster (issue 23): is the crawl on a cluster as polite?

    .venv/bin/python bench/cluster_crawl.py [--runs 1] [--configs single,cluster]
                                            [--min-delay 0.25] [--shards 6] [--workers 3]
                                            [--trees nodejs/api,...] [--set KEY=VALUE]
                                            [--json out.json] [--keep]

Serves Debian's documentation trees (``/usr/share/doc``: nodejs's API, the Python 3.11 library
docs without their ``_sources`` text copies, git's manual, valgrind's, libffi's, GLib's three
books) with nginx, one loopback host per tree (``bench/redis_workers.py``'s ``Nginx``), and
crawls the same finite site set to completion with ``--workers`` ``scrapy crawl`` processes

* ``single``: on one ``redis-server`` (``FRONTIER_SHARDS=1``, the single-Redis layout);
* ``cluster``: through a real Redis Cluster of 3 masters with a replica each
  (``tests/redis_cluster_support.py``), ``REDIS_URL`` naming one node, ``FRONTIER_SHARDS``
  ``--shards``,

both with a politeness delay (the site's ``politeness.min_delay``, no delay factor, one fetch
per host at a time). The first worker gets the seeds; the others join once nginx has seen the
crawl's first request. Every verdict comes from nginx's access log, which this bench extends
with ``$request_time``: a request's start is ``$msec - $request_time`` (millisecond precision).
Per configuration: pages; overlapping requests per host (two requests of one host whose
[start, end] overlap); the smallest gap per host between one request's end and the next one's
start, and how many gaps fall below the delay less 10 ms (with and without the gap after
robots.txt); duplicate fetches (one URL twice); robots.txt fetches per host; the URL set
compared between the configurations (differences listed); wall time; worker CPU per page
(``os.wait4``); Redis CPU per page summed over the masters (``INFO cpu`` deltas, the replicas'
apart) and each master's share of it, beside the share of the pages its shards' hosts had.

Nothing leaves loopback. Needs ``nginx``, ``redis-server`` and ``redis-cli`` on the PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import redis

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.redis_workers import SITE, Nginx, Worker, redis_cpu  # noqa: E402
from crawler.backends.redis.keys import CrawlKeys  # noqa: E402
from crawler.backends.redis.shards import ShardMap  # noqa: E402
from tests.redis_cluster_support import RedisClusterServers, start_cluster  # noqa: E402
from tests.redis_support import free_port, start_redis  # noqa: E402

DOC = "/usr/share/doc"
DEFAULT_TREES = (
    "nodejs/api,python3.11-doc/html,git/html,valgrind/html,libffi-dev/html,"
    "libglib2.0-doc/glib,libglib2.0-doc/gio,libglib2.0-doc/gobject"
)
DENY = ["/_sources/"]  # the Python docs' plain-text copy of every page: twice the pages, no HTML
TOLERANCE = 0.010  # seconds: a gap this much below the delay is still counted as kept


class TimedNginx(Nginx):
    """``Nginx`` whose access log also says how long each request took (``$request_time``),
    so a request's span at the server is [``$msec - $request_time``, ``$msec``]: a second log,
    added to the parent's configuration and picked up by a reload before any crawl starts."""

    def __init__(self, root: Path, trees: list[tuple[str, str]], port: int) -> None:
        super().__init__(root, trees, port)
        self.timed_log = root / "timed.log"
        conf = root / "nginx.conf"
        text = conf.read_text()
        timed = (
            "    log_format timed '$msec $request_time $server_addr $status $body_bytes_sent "
            "$request_uri';\n"
            f"    access_log {self.timed_log} timed buffer=64k flush=1s;\n"
        )
        conf.write_text(text.replace("    access_log ", timed + "    access_log ", 1))
        self.process.send_signal(signal.SIGHUP)  # reload: new workers open the new log
        deadline = time.monotonic() + 10
        while not self.timed_log.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("nginx did not reload: " + (root / "error.log").read_text())
            time.sleep(0.05)
        time.sleep(0.5)  # the old worker has gone once the new ones serve

    def timed_offset(self) -> int:
        return self.timed_log.stat().st_size

    def timed_requests(self, offset: int) -> list[Fetch]:
        time.sleep(1.5)  # the log buffer flushes every second
        with self.timed_log.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode().splitlines()
        out = []
        for line in lines:
            msec, took, host, status, size, uri = line.split(" ", 5)
            end = float(msec)
            out.append(Fetch(host, uri, int(status), int(size), end - float(took), end))
        return out


@dataclass(frozen=True)
class Fetch:
    host: str
    uri: str
    status: int
    bytes: int
    start: float
    end: float


def politeness(fetches: list[Fetch], delay: float) -> dict[str, Any]:
    """Overlaps and gaps per host, from the server's spans."""
    by_host: dict[str, list[Fetch]] = defaultdict(list)
    for f in fetches:
        by_host[f.host].append(f)
    overlaps = below = below_pages = 0
    min_gap: dict[str, float] = {}
    min_gap_pages: dict[str, float] = {}
    worst: list[tuple[float, str, str, str]] = []
    for host, spans in by_host.items():
        spans.sort(key=lambda f: (f.start, f.end))
        for a, b in pairwise(spans):
            gap = b.start - a.end
            overlaps += gap < 0
            min_gap[host] = min(min_gap.get(host, gap), gap)
            if gap < delay - TOLERANCE:
                below += 1
                worst.append((gap, host, a.uri, b.uri))
            if a.uri != "/robots.txt":  # the gap after robots.txt is its own question
                min_gap_pages[host] = min(min_gap_pages.get(host, gap), gap)
                below_pages += gap < delay - TOLERANCE
    return {
        "overlaps": overlaps,
        "gaps_below_delay": below,
        "gaps_below_delay_pages": below_pages,
        "min_gap": min(min_gap.values(), default=None),
        "min_gap_pages": min(min_gap_pages.values(), default=None),
        "min_gap_per_host": {h: round(g, 4) for h, g in sorted(min_gap.items())},
        "worst_gaps": sorted(worst)[:10],
    }


# ---------------------------------------------------------------- the Redis side


class Store:
    """The Redis a configuration crawls on: its ``REDIS_URL``, its masters' and replicas' CPU,
    and which master holds which shard."""

    def __init__(self, name: str, root: Path, shards: int) -> None:
        self.name, self.shards = name, shards
        self.cluster: RedisClusterServers | None = None
        if name == "cluster":
            (root / "cluster").mkdir()
            self.cluster = start_cluster(root / "cluster", masters=3, replicas=1)
            self.url = self.cluster.url
        else:
            (root / "redis").mkdir()
            self.server = start_redis(root / "redis", timeout=30)
            self.url = f"redis://127.0.0.1:{self.server.port}/0"

    def nodes(self) -> dict[str, tuple[str, redis.Redis]]:
        """address -> (role, client) of every live node."""
        if self.cluster is None:
            return {"single": ("master", self.server.client())}
        out = {}
        for node in self.cluster.live():
            client = node.client()
            role = client.info("replication")["role"]
            out[node.address] = ("master" if role == "master" else "replica", client)
        return out

    def cpu(self) -> dict[str, float]:
        return {address: redis_cpu(c) for address, (_, c) in self.nodes().items()}

    def roles(self) -> dict[str, str]:
        return {address: role for address, (role, _) in self.nodes().items()}

    def shard_nodes(self, key: str) -> list[str]:
        """The master of each shard's hash tag (the per-address keys')."""
        if self.cluster is None:
            return ["single"] * self.shards
        client = self.cluster.client()
        try:
            return [
                client.get_node_from_key(prefix + ":ip").name
                for prefix in CrawlKeys(key, shards=self.shards).shard_prefixes()
            ]
        finally:
            client.close()

    def crawl_node(self, key: str) -> str:
        """The master of the crawl's own tag: controls, totals, heartbeats, the shared
        near-duplicate store."""
        if self.cluster is None:
            return "single"
        client = self.cluster.client()
        try:
            return str(client.get_node_from_key("{" + key + "}:stats").name)
        finally:
            client.close()

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        else:
            self.server.stop()


# ---------------------------------------------------------------- crawl


def write_site(sites_dir: Path, nginx: Nginx, trees: list[str], args: Any) -> Path:
    sites_dir.mkdir(parents=True, exist_ok=True)
    allow = [
        f"'^http://{h.replace('.', '[.]')}:{nginx.port}/{p}/'"
        for h, p in zip(nginx.hosts, trees, strict=True)
    ]
    deny = ", ".join(f"'{d}'" for d in DENY)
    (sites_dir / f"{SITE}.toml").write_text(
        f'''name = "{SITE}"
allow_private_addresses = true
[scope]
hosts = [{", ".join(f'"{h}"' for h in nginx.hosts)}]
[urls]
allow = [{", ".join(allow)}]
deny = [{deny}]
max_depth = 10000
[politeness]
min_delay = {args.min_delay}
delay_factor = 0
host_concurrency = 1
'''
    )
    seeds = sites_dir / "seeds.txt"
    seeds.write_text(
        "".join(
            f"http://{h}:{nginx.port}/{p}/index.html\n"
            for h, p in zip(nginx.hosts, trees, strict=True)
        )
    )
    return seeds


def run_config(
    name: str, i: int, root: Path, sites_dir: Path, seeds: Path, nginx: TimedNginx, args: Any
) -> dict[str, Any]:
    shards = args.shards if name == "cluster" else 1
    run_root = root / f"{name}-{i}"
    run_root.mkdir()
    store = Store(name, run_root, shards)
    key = f"bench-cluster-{name}-{i}"
    try:
        settings: dict[str, Any] = dict(kv.split("=", 1) for kv in args.set)
        settings |= {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": store.url,
            "FRONTIER_REDIS_KEY": key,
            "FRONTIER_SHARDS": shards,
            "ALLOW_PRIVATE_ADDRESSES": True,
        }
        roles = store.roles()
        cpu0 = store.cpu()
        load0 = os.getloadavg()[0]
        offset = nginx.timed_offset()
        t0 = time.monotonic()
        workers = [Worker(run_root / "w0", sites_dir, settings, seeds)]
        deadline = time.monotonic() + 120
        while nginx.timed_offset() == offset:  # the crawl exists: its first request was logged
            if workers[0].done.is_set() or time.monotonic() > deadline:
                raise RuntimeError(f"the first worker did not start: {run_root / 'w0'}")
            time.sleep(0.1)
        workers += [
            Worker(run_root / f"w{k}", sites_dir, settings, None) for k in range(1, args.workers)
        ]
        for w in workers:
            w.join(args.timeout)
        wall = max(w.end for w in workers) - t0
        cpu1 = store.cpu()
        load1 = os.getloadavg()[0]
        shard_nodes = store.shard_nodes(key)
        crawl_node = store.crawl_node(key)
    finally:
        store.stop()
    fetches = nginx.timed_requests(offset)
    pages = [f for f in fetches if f.uri != "/robots.txt"]
    urls = Counter((f.host, f.uri) for f in pages)
    node_cpu = {a: cpu1.get(a, 0.0) - cpu0.get(a, 0.0) for a in cpu0}
    masters = {a: c for a, c in node_cpu.items() if roles[a] == "master"}
    redis_total = sum(masters.values())
    ok = sum(1 for f in pages if f.status == 200)
    shard_map = ShardMap(shards)
    pages_per_node: Counter[str] = Counter(shard_nodes[shard_map(f.host)] for f in pages)
    logs = [(w.dir / "crawl.log").read_text(errors="replace") for w in workers]
    result: dict[str, Any] = {
        "config": name,
        "run": i,
        "shards": shards,
        "wall": wall,
        "load": (load0, load1),
        "fetches": len(pages),
        "pages": ok,
        "statuses": dict(Counter(f.status for f in pages)),
        "distinct": len(urls),
        "twice": sum(1 for n in urls.values() if n > 1),
        "twice_urls": sorted(f"{h}{u}" for (h, u), n in urls.items() if n > 1)[:20],
        "robots_per_host": dict(Counter(f.host for f in fetches if f.uri == "/robots.txt")),
        **politeness(fetches, args.min_delay),
        "worker_cpu": sum(w.cpu for w in workers),
        "worker_cpus": [round(w.cpu, 2) for w in workers],
        "worker_pages": [w.stats.get("pages/ok", 0) for w in workers],
        "redis_cpu": redis_total,
        "master_cpu": {a: round(c, 3) for a, c in masters.items()},
        "master_share": {a: round(c / redis_total, 3) for a, c in masters.items()}
        if redis_total
        else {},
        "replica_cpu": round(sum(c for a, c in node_cpu.items() if roles[a] != "master"), 3),
        "page_share": {a: round(n / len(pages), 3) for a, n in pages_per_node.items()},
        "shard_nodes": shard_nodes,
        "crawl_node": crawl_node,
        "redis_cpu_per_s": redis_total / wall,  # at a polite pace, much of it is per second
        "finish": [w.stats.get("finish_reason") for w in workers],
        "exit": [w.status for w in workers],
        "tracebacks": [log.count("Traceback") for log in logs],
        "urls": sorted(f"{h}{u}" for h, u in urls),
    }
    return result


def summarize(results: list[dict[str, Any]], delay: float) -> None:
    print(f"\nper run (delay {delay}s; gaps below delay - {TOLERANCE * 1000:.0f} ms counted):")
    for r in results:
        print(
            f"{r['config']:8} #{r['run']} shards {r['shards']} pages {r['pages']} "
            f"(fetches {r['fetches']}, distinct {r['distinct']}, twice {r['twice']}, statuses "
            f"{r['statuses']}) wall {r['wall']:.1f}s overlaps {r['overlaps']} gaps<delay "
            f"{r['gaps_below_delay']} (after a page {r['gaps_below_delay_pages']}) min gap "
            f"{r['min_gap']:.3f}s (after a page {r['min_gap_pages']:.3f}s) robots.txt/host "
            f"{sorted(set(r['robots_per_host'].values()))} over {len(r['robots_per_host'])} "
            f"hosts; worker CPU {r['worker_cpu']:.1f}s {r['worker_cpus']} "
            f"({1000 * r['worker_cpu'] / r['pages']:.2f} ms/page; pages {r['worker_pages']}) "
            f"redis CPU (masters) {r['redis_cpu']:.2f}s "
            f"({1000 * r['redis_cpu'] / r['pages']:.3f} ms/page, "
            f"{1000 * r['redis_cpu_per_s']:.1f} ms/s; replicas {r['replica_cpu']}s) "
            f"master share {r['master_share']} page share {r['page_share']} crawl's tag on "
            f"{r['crawl_node']} "
            f"load {r['load'][0]:.1f}->{r['load'][1]:.1f} finish {r['finish']} exit "
            f"{r['exit']} tracebacks {r['tracebacks']}"
        )
        if r["worst_gaps"]:
            print("   gaps below the delay:", r["worst_gaps"][:5])
    by_config: dict[str, list[set[str]]] = defaultdict(list)
    for r in results:
        by_config[r["config"]].append(set(r["urls"]))
    sets = [(name, s) for name, runs in by_config.items() for s in runs]
    base_name, base = sets[0]
    for name, s in sets[1:]:
        print(
            f"URL set {name} vs {base_name}: {'same' if s == base else 'DIFFERENT'} "
            f"({len(s)} vs {len(base)}; only in {name}: {sorted(s - base)[:10]}, only in "
            f"{base_name}: {sorted(base - s)[:10]})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--configs", default="single,cluster")
    parser.add_argument("--min-delay", type=float, default=0.25)
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--trees", default=DEFAULT_TREES, help="folders under /usr/share/doc")
    parser.add_argument("--port", type=int, default=0, help="nginx's port (0: a free one)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", default="")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    trees = [t for t in args.trees.split(",") if os.path.isfile(f"{DOC}/{t}/index.html")]
    root = Path(tempfile.mkdtemp(prefix="bench-cluster-crawl-"))
    (root / "nginx").mkdir()
    nginx = TimedNginx(root / "nginx", [(DOC, t) for t in trees], args.port or free_port())
    results = []
    try:
        sites_dir = root / "sites"
        seeds = write_site(sites_dir, nginx, trees, args)
        print("trees:", ", ".join(f"{h}=/{p}/" for h, p in zip(nginx.hosts, trees, strict=True)))
        for i in range(args.runs):
            for name in args.configs.split(","):
                r = run_config(name, i, root, sites_dir, seeds, nginx, args)
                results.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "urls"}), flush=True)
        summarize(results, args.min_delay)
    finally:
        nginx.stop()
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("kept", root)


if __name__ == "__main__":
    main()
