"""A partition's seen-set (crawler/backends/redis/seenset.py) at 1 million URLs: its bytes per
URL and the rate of ``add_many`` for both kinds, each on a fresh server of its own.

    .venv/bin/python bench/seenset.py [--urls 1000000] [--batch 50] [--error 0.01]
    .venv/bin/python bench/seenset.py --exact-server valkey     # the exact kind on Valkey 8.1
    .venv/bin/python bench/seenset.py --capacity 250000         # 4 times past capacity

The exact kind runs on Debian's redis-server 7.0 (or ``--exact-server``), the bloom kind on the
same with RedisBloom loaded (the ``redis-bloom`` kind of tests/redis_support.py). One partition
of ``--capacity`` (default: ``--urls``); the keys are ``url_key`` of distinct synthetic URLs,
added by one client in batches of ``--batch`` (one round trip each). Reported: ``MEMORY USAGE``
of the seen-set's keys and the growth of ``used_memory`` per URL, adds/s (URLs through
``add_many`` per wall second: the machine may be shared), redis-server's CPU time per URL
(which a loaded machine does not inflate), the exact buckets' encodings, and the false
positives measured on 100,000 keys never added.

Measured (1 million keys of distinct URLs added in batches of 50 by one client over loopback,
error 0.01; "CPU": redis-server's CPU time per URL, which the shared machine does not inflate;
"FP": keys never added that ``contains_many`` calls seen, of 100,000)::

    .venv/bin/python bench/seenset.py
    .venv/bin/python bench/seenset.py --kinds exact --exact-server valkey
    .venv/bin/python bench/seenset.py --capacity 250000

==================================  =============  ============  ======  ======  =====
kind (server)                       MEMORY USAGE   used_memory   adds/s  CPU     FP
==================================  =============  ============  ======  ======  =====
exact (Debian's Redis 7.0)          4.71 B/URL     4.92 B/URL    113 k   1.7 us  0
exact (Valkey 8.1)                  4.23 B/URL     4.42 B/URL    131 k   1.3 us  0
bloom (Redis 7.0 + RedisBloom)      1.38 B/URL     1.65 B/URL    320 k   0.9 us  522
exact, 4 x past capacity (Redis)    49.7 B/URL     57.8 B/URL    117 k   1.6 us  1
bloom, 4 x past capacity            2.86 B/URL     3.09 B/URL    343 k   0.9 us  748
==================================  =============  ============  ======  ======  =====

At capacity every one of the 4,096 exact buckets was an intset; 4 times past it every bucket
was a hash table. The bloom kind took 743 of the million new URLs for seen (0.07 %) while
filling to capacity, and 4,799 when filled 4 times past it (its later layers are larger and
tighter).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.redis.keys import PartitionKeys, glob_escape
from crawler.backends.redis.seenset import SeenSet, SeenSetConfig, has_bloom_module
from crawler.frontier.store import url_key
from tests.redis_support import start_redis

HELD_OUT = 100_000


def keys_of(n: int, salt: str) -> list[int]:
    return [url_key(f"https://h{i % 9973}.example/{salt}/p/{i}?q={i * 7}") for i in range(n)]


def server_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def run(
    kind: str, server_kind: str, urls: int, capacity: int, batch: int, error: float
) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as root:
        server = start_redis(Path(root), kind=server_kind)
        try:
            client = server.client()
            bloom = kind == "bloom"
            if bloom and not has_bloom_module(client):
                raise SystemExit(f"{server_kind} has no BF.* commands")
            keys = PartitionKeys("bench", 0, 1)
            seen = SeenSet(client, keys, SeenSetConfig(capacity, error, bloom))
            added = keys_of(urls, "a")
            held_out = keys_of(HELD_OUT, "never")
            before, cpu_before = int(client.info("memory")["used_memory"]), server_cpu(client)
            start = time.perf_counter()
            new = 0
            for i in range(0, urls, batch):
                new += sum(seen.add_many(added[i : i + batch]))
            elapsed = time.perf_counter() - start
            cpu = server_cpu(client) - cpu_before
            seen.count()  # (it sends what it owes: the counter is measured with the rest)
            used = int(client.info("memory")["used_memory"]) - before
            own = 0
            encodings: Counter[str] = Counter()
            for key in client.scan_iter(match=glob_escape(keys.prefix) + "*", count=1000):
                own += client.memory_usage(key, samples=0) or 0
                if client.type(key) == b"set":
                    encodings[client.object("encoding", key).decode()] += 1
            false = sum(
                sum(seen.contains_many(held_out[i : i + 1000])) for i in range(0, HELD_OUT, 1000)
            )
            return {
                "kind": f"{kind} ({server_kind})",
                "new": new,
                "count": seen.count(),
                "keys B/URL": own / urls,
                "used_memory B/URL": used / urls,
                "adds/s": urls / elapsed,
                "server CPU us/URL": cpu / urls * 1e6,
                "encodings": dict(encodings),
                "false positives": f"{false}/{HELD_OUT}",
            }
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--capacity", type=int, default=0, help="default: --urls")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--error", type=float, default=0.01)
    parser.add_argument("--exact-server", default="redis", choices=("redis", "valkey"))
    parser.add_argument("--kinds", default="exact,bloom")
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        server = args.exact_server if kind == "exact" else "redis-bloom"
        row = run(kind, server, args.urls, args.capacity or args.urls, args.batch, args.error)
        print(
            "  ".join(
                f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items()
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
