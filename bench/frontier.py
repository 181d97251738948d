"""Frontier microbenchmark: add, pop and complete over many hosts, in memory and on disk.

    .venv/bin/python bench/frontier.py [--urls 200000] [--hosts 2000]

Reports URLs per second for the whole cycle (add every URL, then hand out, complete and
acknowledge them all with no politeness delay, on a simulated clock), memory per queued URL and
per seen URL (tracemalloc, so Python objects only), and disk bytes per URL with a JOBDIR store.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.sqlite.frontier import SqliteQueueStore
from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy

POLICY = PolitenessPolicy(min_delay=0.0, delay_factor=0.0, host_concurrency=1)


def urls(n: int, hosts: int) -> list[tuple[str, str]]:
    """Realistic lengths: ~60-character URLs of documentation-like paths."""
    return [
        (
            f"https://docs{i % hosts}.example.org/en/latest/section-{i // hosts}/page.html",
            f"docs{i % hosts}.example.org",
        )
        for i in range(n)
    ]


class Clock:
    """A simulated clock: the cycle advances it by 1 ms whenever nothing is due."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(kind: str, tmp: Path, clock: Clock) -> MercatorFrontier:
    store = SqliteQueueStore(tmp / "frontier.sqlite", 8) if kind == "disk" else None
    return MercatorFrontier(POLICY, store=store, clock=clock, back_queues=48)


def cycle(kind: str, data: list[tuple[str, str]], tmp: Path) -> dict[str, float]:
    clock = Clock()
    f = make(kind, tmp, clock)
    t0 = time.perf_counter()
    for url, host in data:
        f.add(Entry(url, host, depth=1))
    t1 = time.perf_counter()
    result: dict[str, float] = {}
    if kind == "disk":
        f.store.commit()  # type: ignore[attr-defined]
        result["disk_bytes_per_queued_url"] = disk_size(tmp) / len(data)
        t1 = time.perf_counter()
    done = 0
    while done < len(data):
        lease = f.next()
        if lease is None:
            clock.now += 0.001
            continue
        f.finish(lease.token, 0.0)
        done += 1
    t2 = time.perf_counter()
    result |= {
        "add_per_s": len(data) / (t1 - t0),
        "pop_complete_per_s": len(data) / (t2 - t1),
        "cycle_per_s": len(data) / (t2 - t0),
    }
    if kind == "disk":
        f.close()
        result["disk_bytes_per_seen_url"] = disk_size(tmp) / len(data)
    return result


def disk_size(tmp: Path) -> int:
    return sum(p.stat().st_size for p in tmp.glob("frontier.sqlite*"))


def memory(data: list[tuple[str, str]]) -> dict[str, float]:
    """Bytes per queued URL (URLs built inside the measurement, as links arrive in a crawl) and
    per seen URL (after the queue is drained: only the seen-set is left)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    clock = Clock()
    f = MercatorFrontier(POLICY, clock=clock, back_queues=48)
    for url, host in data:
        f.add(Entry("".join((url,)), host, depth=1))  # a fresh string, as a parsed link is
    queued = tracemalloc.get_traced_memory()[0] - base
    while len(f):
        lease = f.next()
        if lease is None:
            clock.now += 0.001
            continue
        f.finish(lease.token, 0.0)
    gc.collect()
    seen = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {"bytes_per_queued_url": queued / len(data), "bytes_per_seen_url": seen / len(data)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--hosts", type=int, default=2_000)
    args = parser.parse_args()
    data = urls(args.urls, args.hosts)
    print(f"{args.urls} URLs over {args.hosts} hosts, mean URL length "
          f"{sum(len(u) for u, _ in data) / len(data):.0f} characters")
    for kind in ("memory", "disk"):
        with tempfile.TemporaryDirectory() as tmp:
            r = cycle(kind, data, Path(tmp))
        print(f"{kind:7} " + "  ".join(f"{k} {v:,.0f}" for k, v in r.items()))
    m = memory(data)
    print("memory  " + "  ".join(f"{k} {v:,.0f}" for k, v in m.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
