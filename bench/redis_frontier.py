"""Redis frontier benchmark: add, lease, complete and acknowledge against a real redis-server.

    .venv/bin/python bench/redis_frontier.py [--urls 200000] [--hosts 3000] [--cycles 20000]
                                             [--port N]

Starts its own ``redis-server`` on a free loopback port (or uses ``--port``; the bench then
works on a fresh key and deletes it at the end). Reports, from one synchronous client:

* add: pages of 50 links per ``add_many`` call (one script call each), links per second;
* cycle: ``next`` + ``complete`` + ``ack`` (three round trips), cycles per second, with no
  politeness delay so the frontier, not the clock, is measured; the same with ``next_many(16)``
  and ``finish``;
* Redis ``used_memory`` per queued URL (~50-character URLs) and per seen URL;
* server CPU (``INFO cpu``, user + system) per script call, and Redis's own ``usec_per_call``
  of ``EVALSHA``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.seen import seen_memory
from crawler.frontier import Entry, PolitenessPolicy
from tests.redis_support import start_redis

POLICY = PolitenessPolicy(min_delay=0.0, delay_factor=0.0, host_concurrency=1)


def links(n: int, hosts: int) -> list[Entry]:
    """50-character URLs, ``n / hosts`` per host, interleaved the way a crawl discovers them."""
    return [
        Entry(
            url=f"https://www.host{i % hosts:05d}.example/a/{i // hosts:013d}.html",
            host=f"www.host{i % hosts:05d}.example",
            priority=i % 3,
        )
        for i in range(n)
    ]


class ServerMeter:
    """Server-side cost of a phase: CPU seconds and EVALSHA calls, from INFO."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        client.config_resetstat()
        self.cpu = self._cpu()

    def _cpu(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def read(self) -> tuple[float, int, float]:
        """(CPU seconds, EVALSHA calls, Redis's usec_per_call of EVALSHA)."""
        stats = self.client.info("commandstats").get("cmdstat_evalsha", {})
        return (
            self._cpu() - self.cpu,
            int(stats.get("calls", 0)),
            float(stats.get("usec_per_call", 0.0)),
        )


def report(name: str, count: int, unit: str, wall: float, meter: ServerMeter) -> None:
    cpu, calls, usec = meter.read()
    print(
        f"{name:<28} {count / wall:>9,.0f} {unit}/s   server CPU {cpu / max(calls, 1) * 1e6:6.0f}"
        f" us/call ({calls:,} script calls, EVALSHA {usec:.0f} us/call)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--hosts", type=int, default=3_000)
    parser.add_argument("--cycles", type=int, default=20_000)
    parser.add_argument("--port", type=int, default=0, help="an existing Redis (default: own)")
    args = parser.parse_args()

    server = None
    tmp = tempfile.TemporaryDirectory()
    if args.port:
        client = redis.Redis(port=args.port)
    else:
        server = start_redis(Path(tmp.name))
        client = server.client()
    key = "bench-" + uuid.uuid4().hex[:8]
    frontier = RedisFrontier(client, key, POLICY, back_queues=1024)
    try:
        entries = links(args.urls, args.hosts)
        assert len(entries[0].url) == 50
        print(
            f"redis {client.info('server')['redis_version']}, {args.urls:,} URLs over "
            f"{args.hosts:,} hosts, one client on loopback"
        )

        base = client.info("memory")["used_memory"]
        meter = ServerMeter(client)
        start = time.perf_counter()
        for i in range(0, len(entries), 50):
            frontier.add_many(entries[i : i + 50])
        report("add (pages of 50 links)", len(entries), "links", time.perf_counter() - start, meter)
        assert len(frontier) == args.urls

        used = client.info("memory")["used_memory"] - base
        seen = seen_memory(client, frontier.keys)
        print(
            f"memory: {(used - seen) / args.urls:.0f} B per queued URL (queues, host table, "
            f"ready set), {seen / args.urls:.0f} B per seen URL (bucketed exact set); "
            f"used_memory {used / 2**20:.1f} MiB"
        )

        cycles = min(args.cycles, args.urls // 2)
        meter = ServerMeter(client)
        start = time.perf_counter()
        for _ in range(cycles):
            lease = frontier.next()
            assert lease is not None
            frontier.complete(lease.token, 0.05)
            frontier.ack(lease.token)
        report("next + complete + ack", cycles, "cycles", time.perf_counter() - start, meter)

        meter = ServerMeter(client)
        start = time.perf_counter()
        done = 0
        while done < cycles:
            leases = frontier.next_many(16)
            assert leases
            for lease in leases:
                frontier.finish(lease.token, 0.05)
            done += len(leases)
        report("next_many(16) + finish", done, "URLs", time.perf_counter() - start, meter)

        meter = ServerMeter(client)
        start = time.perf_counter()
        n = 2_000
        for _ in range(n):
            frontier.counts()
        report("counts()", n, "calls", time.perf_counter() - start, meter)
    finally:
        frontier.reset()
        client.close()
        if server is not None:
            server.stop()
        tmp.cleanup()


if __name__ == "__main__":
    main()
