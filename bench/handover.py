"""How fast workers that join a running crawl get their share of its partitions, and fetch.

    .venv/bin/python bench/handover.py [--hosts 40] [--pages 20] [--hang 0] [--join-after 30]

Three real ``scrapy crawl`` workers on one Redis (started here) and a multi-host site on
loopback (``--hosts`` hosts of ``--pages`` pages; the first ``--hang`` of them read each request
and never answer, so their fetches end only at ``DOWNLOAD_TIMEOUT``: a busy owner's slow
leases). The first worker gets the seeds; the two others join once the site has answered
``--join-after`` requests. Printed: each change of the partitions' owners (from their leases,
polled every 0.1 s; ``-``: no owner), and for each joiner how long after its spider opened it
owned a partition and fetched a page (the server's record, by the worker's user agent).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import finish_crawl, start_crawl
from tests.partition_support import partition_keys
from tests.redis_support import fresh_key, start_redis
from tests.test_redis_crawl import fetched_by, spider_opened, worker_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--hang", type=int, default=0)
    parser.add_argument("--join-after", type=int, default=30)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="handover-"))
    (root / "redis").mkdir()
    redis = start_redis(root / "redis")
    hosts = [f"127.0.1.{i}" for i in range(1, args.hosts + 1)]
    specs = [
        HostSpec(h, pages=args.pages, mode="hang" if i < args.hang else "ok")
        for i, h in enumerate(hosts)
    ]
    key, client = fresh_key(), redis.client()
    try:
        with RoutedSiteServer(build_site(specs, links_per_page=4, cross_host_links=1)) as server:
            dirs = [root / f"w{i}" for i in range(3)]
            for d in dirs:
                d.mkdir()
            t0 = time.monotonic()
            procs = [start_crawl(dirs[0], seeds=server.seeds(),
                                 settings=worker_settings(redis, key, dirs[0]))]  # fmt: skip
            while len(server.records) < args.join_after:
                time.sleep(0.05)
            procs += [start_crawl(d, settings=worker_settings(redis, key, d)) for d in dirs[1:]]
            worker_of = {f":{p.pid}/": i for i, p in enumerate(procs)}
            opened: dict[int, float] = {}
            owns: dict[int, float] = {}
            fetched: dict[int, float] = {}
            last = None
            while any(p.poll() is None for p in procs):
                now = time.monotonic()
                shares: Counter[str] = Counter()
                for keys in partition_keys(key):
                    lease = (client.get(keys.lease) or b"").decode()
                    owner = next((f"w{i}" for m, i in worker_of.items() if m in lease), "-")
                    shares[owner] += 1
                for i in (1, 2):
                    if i not in opened and spider_opened(dirs[i]):
                        opened[i] = now
                    if i not in owns and shares[f"w{i}"]:
                        owns[i] = now
                    if i not in fetched and fetched_by(server, dirs[i]):
                        fetched[i] = now
                if shares != last:
                    print(f"{now - t0:7.2f} s  owners {dict(sorted(shares.items()))}", flush=True)
                    last = shares
                time.sleep(0.1)
            results = [finish_crawl(p, d, timeout=60) for p, d in zip(procs, dirs, strict=True)]
            for i in (1, 2):
                start = opened.get(i, float("nan"))
                print(f"joiner w{i}: owned a partition {owns.get(i, float('nan')) - start:.2f} s "
                      f"and fetched {fetched.get(i, float('nan')) - start:.2f} s after its "
                      "spider opened")  # fmt: skip
            scraped = [r.stats.get("item_scraped_count", 0) for r in results]
            print(f"pages scraped per worker {scraped}; requests {len(server.records)}; "
                  f"{time.monotonic() - t0:.1f} s")  # fmt: skip
    finally:
        client.close()
        redis.stop()


if __name__ == "__main__":
    main()
