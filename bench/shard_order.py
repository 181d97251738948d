"""How far a sharded frontier's crawl-wide fetch order departs from a single-shard one on the same
work (issue 23: "the front-queue priority order holds within a shard; measure how far the
crawl-wide order departs").

    .venv/bin/python bench/shard_order.py [--hosts 300] [--pages 40] [--shards 1,3,6]

One worker, simulated time (the frontier's clock is a counter the bench advances), a real
``redis-server`` on a free port: the same seeded graph is crawled to completion with S = 1, 3 and
6 shards; every page links to 8 others (its own host's and other hosts', with priorities 0-2 of
the 3 front queues drawn from a seeded RNG). Reported per S:

* the mean fetch position (0 = first, 1 = last) of each priority's pages;
* Spearman's rank correlation of each URL's fetch position with the single-shard crawl's.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.sharded import ShardedFrontier
from crawler.frontier import Entry, PolitenessPolicy
from tests.frontier_contract import FakeClock
from tests.redis_support import fresh_key, start_redis

POLICY = PolitenessPolicy(min_delay=1.0, delay_factor=0.0, host_concurrency=1)
BACK_QUEUES = 256  # Mercator's B for the whole crawl (RedisFrontier's default)


def graph(hosts: int, pages: int, seed: int = 7) -> dict[str, list[Entry]]:
    rng = random.Random(seed)
    out: dict[str, list[Entry]] = {}
    for h in range(hosts):
        for p in range(pages):
            links = []
            for _ in range(8):
                h2 = h if rng.random() < 0.6 else rng.randrange(hosts)
                p2 = rng.randrange(pages)
                links.append(
                    Entry(f"http://www.h{h2}.com/{p2}", f"www.h{h2}.com", priority=rng.randrange(3))
                )
            out[f"http://www.h{h}.com/{p}"] = links
    return out


def crawl(client: object, links: dict[str, list[Entry]], hosts: int, shards: int) -> list[Entry]:
    clock = FakeClock()
    key = fresh_key()
    parts = [
        RedisFrontier(
            client, key, POLICY, clock=clock, shard=i, shards=shards, front_queues=3,
            back_queues=-(-BACK_QUEUES // shards),  # the crawl's B, shared out as the store does
        )
        for i in range(shards)
    ]
    frontier = parts[0] if shards == 1 else ShardedFrontier(parts, clock=clock)
    frontier.add_many([Entry(f"http://www.h{h}.com/0", f"www.h{h}.com") for h in range(hosts)])
    order: list[Entry] = []
    while True:
        leases = frontier.next_many(4)
        if not leases:
            if len(frontier) == 0 and frontier.in_flight() == 0:
                return order
            clock.now += 0.25
            continue
        for lease in leases:
            order.append(lease.entry)
            frontier.add_many(links.get(lease.entry.url, []))
            frontier.finish(lease.token, 0.1)
        clock.now += 0.01


def spearman(a: list[str], b: list[str]) -> float:
    rank_b = {u: i for i, u in enumerate(b)}
    common = [u for u in a if u in rank_b]
    n = len(common)
    if n < 2:
        return 1.0
    rank_a = {u: i for i, u in enumerate(common)}
    ordered_b = sorted(common, key=rank_b.__getitem__)
    rb = {u: i for i, u in enumerate(ordered_b)}
    d2 = sum((rank_a[u] - rb[u]) ** 2 for u in common)
    return 1 - 6 * d2 / (n * (n * n - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--shards", default="1,3,6")
    args = parser.parse_args()
    links = graph(args.hosts, args.pages)
    with tempfile.TemporaryDirectory() as root:
        server = start_redis(Path(root))
        try:
            client = server.client()
            orders = {
                s: crawl(client, links, args.hosts, s) for s in map(int, args.shards.split(","))
            }
        finally:
            server.stop()
    base = [e.url for e in orders[min(orders)]]
    print(f"{args.hosts} hosts x {args.pages} pages, one worker, simulated time")
    print("shards  pages  mean position of priority 0 / 1 / 2   rank correlation with 1 shard")
    for s, order in orders.items():
        n = max(1, len(order) - 1)
        means = []
        for p in range(3):
            pos = [i / n for i, e in enumerate(order) if e.priority == p]
            means.append(sum(pos) / max(1, len(pos)))
        print(
            f"{s:>6} {len(order):>6}  "
            + " / ".join(f"{m:.3f}" for m in means)
            + f"   {spearman([e.url for e in order], base):.3f}"
        )


if __name__ == "__main__":
    main()
