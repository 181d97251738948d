"""A frontier-level crawl of a synthetic site graph by several worker threads on a real Redis
Cluster, for the fault tests: what each worker fetched, when, and what the frontier said.

No HTTP: a fetch is a short sleep, so a test can crawl a thousand pages in seconds while an
operator's action (a reshard, a master killed) happens underneath. Each worker has its own
cluster client and partitioned frontier, built by the ``redis`` backend's store as a worker
process builds it (:meth:`~crawler.backends.redis.frontier_store.RedisFrontierStore.
partitioned_frontier`), and retries a call that failed because Redis was away, as the buffered
frontier does (``BufferedFrontier._guard``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, TypeVar

from redis.cluster import RedisCluster
from scrapy.settings import Settings

from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.backends.redis.outage import is_transient
from crawler.backends.redis.partitioned import PartitionedFrontier
from crawler.frontier import Entry

T = TypeVar("T")


def page_url(host: int, page: int) -> str:
    return f"http://www.site{host}.test/p{page}.html"


def host_name(host: int) -> str:
    return f"www.site{host}.test"


@dataclass(frozen=True)
class Graph:
    """``hosts`` sites of ``pages`` pages; page p links to p+1..p+3 of its site and to page 0
    and p of two other sites: every page is reachable from the seeds (page 0 of each site)."""

    hosts: int = 24
    pages: int = 40

    def links(self, url: str) -> list[Entry]:
        host, page = _parse(url)
        out = [(host, q) for q in (page + 1, page + 2, page + 3) if q < self.pages]
        out += [((host + 1) % self.hosts, 0), ((host + 7) % self.hosts, page)]
        return [Entry(page_url(h, q), host_name(h)) for h, q in out]

    def seeds(self) -> list[Entry]:
        return [Entry(page_url(h, 0), host_name(h)) for h in range(self.hosts)]

    def all_urls(self) -> set[str]:
        return {page_url(h, p) for h in range(self.hosts) for p in range(self.pages)}


def _parse(url: str) -> tuple[int, int]:
    rest = url.split("://www.site", 1)[1]
    host, path = rest.split(".test/p", 1)
    return int(host), int(path.split(".")[0])


@dataclass
class CrawlRecord:
    fetches: list[tuple[str, str, float, float, int]] = field(default_factory=list)
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    marks: list[float] = field(default_factory=list)
    ended: bool = False  # every worker found the crawl done (none was stopped at the timeout)

    def mark(self) -> None:
        """A moment of the fault (its start, its end): :meth:`after_mark` and
        :meth:`between_marks` count the fetches after the last one and between the first two."""
        self.marks.append(time.monotonic())

    def after_mark(self) -> int:
        return sum(1 for f in self.fetches if self.marks and f[2] >= self.marks[-1])

    def between_marks(self) -> int:
        start, end = self.marks[0], self.marks[1]
        return sum(1 for f in self.fetches if start <= f[2] < end)

    def fetched(self) -> Counter[str]:
        return Counter(url for url, *_ in self.fetches)

    def overlaps(self) -> int:
        """Pairs of fetches of one host that overlapped in time (host concurrency 1)."""
        by_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for _, host, start, end, _ in self.fetches:
            by_host[host].append((start, end))
        n = 0
        for spans in by_host.values():
            spans.sort()
            n += sum(1 for a, b in pairwise(spans) if b[0] < a[1])
        return n


def make_frontier(
    client: RedisCluster, key: str, worker: str, lease_ttl: float = 5.0, replicas: int = 0
) -> PartitionedFrontier:
    """Worker ``worker``'s frontier on crawl ``key``: no delay, one fetch per host at a time;
    each write waits for ``replicas`` replicas (``FRONTIER_REPLICA_WAIT``)."""
    settings = Settings({
        "FRONTIER_MIN_DELAY": 0.0, "FRONTIER_DELAY_FACTOR": 0.0, "FRONTIER_HOST_CONCURRENCY": 1,
        "RECORD_WORKER_ID": worker, "FRONTIER_REPLICA_WAIT": replicas,
    })  # fmt: skip
    store = RedisFrontierStore(settings, key)
    return store.partitioned_frontier(client, lease_ttl=lease_ttl, max_pages_per_host=None)


def retrying(record: CrawlRecord, call: Callable[[], T], give_up: float = 60.0) -> T:
    """``call`` until it goes through: Redis away (a failover) is waited out."""
    deadline = time.monotonic() + give_up
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            with record.lock:
                record.retries += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def crawl(
    make_client: Callable[[], RedisCluster],
    key: str,
    graph: Graph,
    *,
    workers: int = 3,
    fetch_time: float = 0.004,
    during: Callable[[CrawlRecord], None] | None = None,
    timeout: float = 120.0,
    replicas: int = 0,
) -> CrawlRecord:
    """Crawl ``graph`` to completion with ``workers`` threads; ``during`` runs on the calling
    thread once a tenth of the pages are fetched (the fault)."""
    record = CrawlRecord()
    seeder = make_frontier(make_client(), key, "seeder", replicas=replicas)
    retrying(record, lambda: seeder.add_many(graph.seeds()))
    retrying(record, seeder.close)  # its partitions go to the workers at once
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(wid: int) -> None:
        frontier = make_frontier(make_client(), key, f"w{wid}", replicas=replicas)
        idle_since: float | None = None
        try:
            while not stop.is_set():
                leases = retrying(record, lambda: frontier.next_many(2))
                if not leases:
                    done = retrying(record, lambda: not frontier.has_work(0.0))
                    if done:
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since > 1.5:
                            return
                    else:
                        idle_since = None
                    time.sleep(0.02)
                    continue
                idle_since = None
                for lease in leases:
                    start = time.monotonic()
                    time.sleep(fetch_time)
                    end = time.monotonic()
                    with record.lock:
                        record.fetches.append(
                            (lease.entry.url, lease.entry.host, start, end, wid)
                        )
                    links = graph.links(lease.entry.url)
                    retrying(record, lambda links=links: frontier.add_many(links))
                    retrying(record, lambda lease=lease: frontier.finish(lease.token, 0.0))
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        finally:
            with contextlib.suppress(Exception):  # the cluster may be gone (a timed-out run)
                frontier.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    total = len(graph.all_urls())
    if during is not None:
        deadline = time.monotonic() + timeout
        while len(record.fetches) < total // 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        during(record)
    for t in threads:
        t.join(timeout)
    record.ended = not any(t.is_alive() for t in threads)
    stop.set()
    if errors:
        raise errors[0]
    return record


def frontier_state(frontier: Any) -> tuple[int, int]:
    return len(frontier), frontier.in_flight()
