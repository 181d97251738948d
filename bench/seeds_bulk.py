"""A seeds file of a million documentation URLs loaded into a paused Redis crawl, as an operator
seeding a broad crawl would: ``scrapy crawl <site> -a seeds=FILE`` with the default settings
(``FRONTIER_BACKEND=redis``), the crawl paused first (``scrapy frontier <site> pause``), on its
own ``redis-server`` on a free port.

Run from the project root::

    .venv/bin/python bench/seeds_bulk.py                       # 1,000,000 URLs, 10,000 hosts
    .venv/bin/python bench/seeds_bulk.py --urls 100000 --hosts 1000 --shards 3
    git archive main | tar -x -C /tmp/base                     # the same load on main's code
    .venv/bin/python bench/seeds_bulk.py --urls 100000 --hosts 1000 --project /tmp/base

The URLs: the link shapes of real documentation trees (every HTML file of the Rust toolchain's
docs and of /usr/share/doc, each tree's paths as its server would serve them), one tree per
host, hosts named after Debian packages over several TLDs, a version prefix (``/latest``,
``/v2``...) where a tree has fewer files than a host needs. It prints the load rate (URLs/s from
the first URL queued to the last; and from the process start) and Redis's ``used_memory`` delta
per URL (everything the crawl wrote: queues, seen-set, host table, scope, robots.txt state),
split by ``MEMORY USAGE`` into the seen-set and the rest; and the CPU seconds the worker process
(all threads) and redis-server spent on the load, for a machine shared with other work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from tests.redis_support import start_redis  # noqa: E402

DOC_ROOTS = [
    *sorted(Path.home().glob(".rustup/toolchains/*/share/doc/rust/html"))[:1],
    Path("/usr/share/doc"),
]
SITE = "seedbench"
VERSIONS = ["", "/latest", "/stable", "/v2", "/en", "/docs", "/manual", "/1.0"]
TLDS = ["org", "com", "net", "io", "dev", "de", "fr", "info"]
SUBS = ["docs", "www", "doc", "api", "manual", "help"]


def doc_trees() -> dict[str, list[str]]:
    """Tree -> its HTML files' paths as served from its root (``/std/vec/struct.Vec.html``):
    a Rust book or crate, or a /usr/share/doc package's html folder."""
    trees: dict[str, list[str]] = {}
    for root in DOC_ROOTS:
        if not root.is_dir():
            continue
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not name.endswith((".html", ".htm")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                top = rel.split("/", 1)[0]
                trees.setdefault(f"{root}:{top}", []).append("/" + rel)
    return {k: sorted(v) for k, v in trees.items() if len(v) >= 5}


def host_names(n: int, rng: random.Random) -> list[str]:
    packages = sorted(p.name for p in Path("/usr/share/doc").iterdir())
    names: set[str] = set()
    while len(names) < n:
        word = rng.choice(packages).lower().replace("+", "").replace(".", "-").strip("-")
        word = "".join(c for c in word if c.isalnum() or c == "-")[:30] or "site"
        names.add(f"{rng.choice(SUBS)}.{word}{rng.randrange(1000)}.{rng.choice(TLDS)}")
    return sorted(names)


def seed_urls(urls: int, hosts: int, seed: int = 7) -> list[str]:
    """``urls`` URLs over ``hosts`` hosts: each host serves one tree (and, for a small tree,
    more versions of it); its URLs are a random part of them."""
    rng = random.Random(seed)
    trees = list(doc_trees().values())
    per_host = urls // hosts
    out: list[str] = []
    for i, host in enumerate(host_names(hosts, rng)):
        tree = trees[rng.randrange(len(trees))]
        want = per_host + (1 if i < urls - per_host * hosts else 0)
        needed = -(-want // len(tree))  # a small tree is served in several versions
        versions = (VERSIONS + [f"/v{k}" for k in range(3, needed + 3)])[:needed]
        paths = [v + p for v in versions for p in tree]
        scheme = "https" if rng.random() < 0.9 else "http"
        picked = rng.sample(paths, min(want, len(paths)))
        out += [f"{scheme}://{host}{p}" for p in picked]
    rng.shuffle(out)
    return out


def scrapy(
    project: Path, settings: dict[str, Any], *args: str, profile: str = ""
) -> list[str]:
    """The command line of ``scrapy ARGS`` with ``settings`` (under cProfile, writing
    ``profile``, when one is given)."""
    prefix = ["-m", "cProfile", "-o", profile] if profile else []
    cmd = [sys.executable, *prefix, "-m", "scrapy", *args]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"] + info["used_cpu_sys"])


def data_memory(client: redis.Redis) -> int:
    """``used_memory`` less client buffers and the script cache: what the crawl's keys cost."""
    info = client.info("memory")
    return info["used_memory"] - info["mem_clients_normal"] - info["used_memory_scripts"]


def key_bytes(client: redis.Redis, pattern: str) -> tuple[int, int]:
    """Keys matching ``pattern`` and their ``MEMORY USAGE`` (all samples) summed."""
    n = total = 0
    for key in client.scan_iter(match=pattern, count=1000):
        n += 1
        total += client.memory_usage(key, samples=0) or 0
    return n, total


def run(args: argparse.Namespace) -> dict[str, Any]:
    project = Path(args.project).resolve()
    work = Path(tempfile.mkdtemp(prefix="seeds_bulk_"))
    urls = seed_urls(args.urls, args.hosts)
    seeds = work / "seeds.txt"
    seeds.write_text("".join(u + "\n" for u in urls), encoding="utf-8")
    mean_len = sum(map(len, urls)) / len(urls)
    sites = work / "sites"
    sites.mkdir()
    (sites / f"{SITE}.toml").write_text(f'name = "{SITE}"\n', encoding="utf-8")
    (work / "redis").mkdir()
    server = start_redis(work / "redis")
    try:
        client = server.client()
        settings: dict[str, Any] = {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
            "SITES_DIR": sites,
            "FRONTIER_SHARDS": args.shards,
            "INDEX_PATH": work / "index.sqlite",
            **dict(item.split("=", 1) for item in args.set),
        }
        env = dict(os.environ, PYTHONPATH=str(project))
        subprocess.run(
            scrapy(project, settings, "frontier", SITE, "pause"),
            cwd=project, env=env, check=True, capture_output=True, timeout=120,
        )
        client.execute_command("MEMORY", "PURGE")
        base = client.info("memory")["used_memory"]
        data_base = data_memory(client)
        log = work / "crawl.log"
        crawl = {**settings, "LOG_FILE": log, "LOG_LEVEL": "INFO"}
        started = time.monotonic()
        proc = subprocess.Popen(
            scrapy(project, crawl, "crawl", SITE, "-a", f"seeds={seeds}", profile=args.profile),
            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        first = last = None
        cpu_first = cpu_last = redis_first = redis_last = 0.0
        expected = len(set(urls))
        queued = 0
        while proc.poll() is None:
            now = time.monotonic()
            count = _queued(client)
            if count != queued:
                queued, last = count, now
                cpu_last, redis_last = process_cpu(proc.pid), server_cpu(client)
                if first is None:
                    first = now
                    cpu_first, redis_first = cpu_last, redis_last
            # the seeds and each host's robots.txt entry are in once the count stops moving
            elif queued >= expected and now - last > 2.0:
                break
            if now - started > args.timeout:
                break
            time.sleep(0.1)
        used = client.info("memory")["used_memory"] - base
        data = data_memory(client) - data_base
        part = "{" + SITE + ":*}"  # the partitions' tags (crawler.backends.redis.keys)
        parts = {
            # the Bloom filter (:s), or the exact buckets (:s:<b>) and their count
            "seen": _sum(key_bytes(client, part + ":s"), key_bytes(client, part + ":s:*")),
            "front queues": key_bytes(client, part + ":f:*"),
            "back queues (lists)": key_bytes(client, part + ":b:*"),
            "URLs out of the lists": key_bytes(client, part + ":o"),
            "host states": key_bytes(client, part + ":h"),
        }
        everything = key_bytes(client, "{" + SITE + "*")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        errors = [line for line in lines if " ERROR" in line][:5]
        seen_bytes = parts["seen"][1]
        result = {
            "project": str(project),
            "urls": len(urls),
            "distinct": expected,
            "hosts": args.hosts,
            "shards": args.shards,
            "settings": args.set,
            "mean_url_chars": round(mean_len, 1),
            "queued": queued,
            "load_s": None if first is None or last is None else round(last - first, 2),
            "wall_s": None if last is None else round(last - started, 2),
            "urls_per_s": None if first is None or last is None else round(
                expected / max(last - first, 1e-9)
            ),
            "urls_per_s_wall": None if last is None else round(expected / (last - started)),
            # what the load cost the worker (all its threads) and Redis, first URL to last:
            # the rate this machine would give them if nothing else ran on it
            "worker_cpu_s": round(cpu_last - cpu_first, 2),
            "redis_cpu_s": round(redis_last - redis_first, 2),
            "urls_per_worker_cpu_s": round(expected / max(cpu_last - cpu_first, 1e-9)),
            "urls_per_redis_cpu_s": round(expected / max(redis_last - redis_first, 1e-9)),
            "used_memory_delta": used,
            "data_memory_delta": data,
            "bytes_per_url": round(used / expected, 1),
            "data_bytes_per_url": round(data / expected, 1),
            "data_bytes_per_url_without_seen": round((data - seen_bytes) / expected, 1),
            "seen_bytes_per_url": round(seen_bytes / expected, 1),
            "memory_usage_all_keys": everything,
            "parts": {k: {"keys": n, "bytes": b, "per_url": round(b / expected, 1)}
                      for k, (n, b) in parts.items()},
            "errors": errors,
        }
        return result
    finally:
        server.process.terminate()
        server.process.wait(timeout=30)


def _sum(*parts: tuple[int, int]) -> tuple[int, int]:
    return sum(n for n, _ in parts), sum(b for _, b in parts)


def _queued(client: redis.Redis) -> int:
    """URLs the crawl holds: in its partitions' front queues, back-queue lists and out of them
    (two pipelines)."""
    from crawler.backends.redis.frontier_store import PARTITIONS
    from crawler.backends.redis.keys import PartitionKeys
    from crawler.frontier.mercator import FRONT_QUEUES

    parts = [PartitionKeys(SITE, i, PARTITIONS) for i in range(PARTITIONS)]
    pipe = client.pipeline(transaction=False)
    for keys in parts:
        for q in range(FRONT_QUEUES):
            pipe.llen(keys.front(q))
        pipe.hlen(keys.out)
        pipe.smembers(keys.back_hosts)
    replies = pipe.execute()
    total = sum(r for r in replies if isinstance(r, int))
    hosts = [r for r in replies if isinstance(r, set)]  # one per partition, in order
    pipe = client.pipeline(transaction=False)
    for keys, names in zip(parts, hosts, strict=True):
        for host in names:
            pipe.llen(keys.back(host.decode()))
    return total + sum(pipe.execute())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--project", default=str(ROOT), help="the checkout whose code loads")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--profile", default="", metavar="FILE",
                        help="run the crawl under cProfile, its stats written to FILE")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the crawl (e.g. to see what robots.txt costs)")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
