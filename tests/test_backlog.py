"""The backlog bound: a worker takes no more work while the pages it fetched and has not yet
acknowledged reach ``FRONTIER_MAX_BACKLOG`` (or ``TUNING``'s ``max_backlog_bytes``), so a worker
killed mid-crawl leaves little fetched work for another to fetch again.

Unit level: the real scheduler on each backend (memory, sqlite, a real Redis) withholds requests
while the backlog is at its bound and hands them out again when it drains. Fault level: two
``scrapy crawl`` workers on a real Redis with a deliberately slow item path, one killed with
SIGKILL mid-crawl; the test site's record of requests says which pages were fetched twice.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.frontier import Entry, MercatorFrontier, Outcome, PolitenessPolicy
from crawler.meta import LEASE_META
from crawler.scheduler.adapter import FrontierScheduler
from crawler.scheduler.leases import BACKLOG_SETTLE_INTERVAL, Backlog, LeaseTracker
from crawler.scheduler.stats import FrontierStats
from crawler.settings import ITEM_PIPELINES
from tests.crawling import finish_crawl, normalized, start_crawl
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_redis_crawl import HOSTS, site, wait_until, worker_settings
from tests.test_scheduler_intake import Stats

BACKENDS = ("memory", "sqlite", "redis")


class PlainSpider(scrapy.Spider):
    name = "plain"
    allowed_domains = ["a.test"]


def backend_settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict:
    if backend == "sqlite":
        return {"JOBDIR": str(tmp_path / "job")}
    if backend == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
            "FRONTIER_REDIS_KEY": fresh_key(),
            "TUNING": {"read_ahead": 2},
        }
    return {}


def bytes_bound(limit: int, settings: dict) -> dict:
    """``settings`` with TUNING's ``max_backlog_bytes`` set (beside any knob already there)."""
    return {**settings, "TUNING": {**settings.get("TUNING", {}), "max_backlog_bytes": limit}}


def open_scheduler(**settings: Any) -> tuple[Any, FrontierScheduler]:
    crawler = get_crawler(
        PlainSpider,
        {"FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_HOST_CONCURRENCY": 8,
         **settings},
    )
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    scheduler = FrontierScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return crawler, scheduler


def take(scheduler: FrontierScheduler, timeout: float = 10.0) -> scrapy.Request:
    """The next request (a shared frontier's leases arrive on its own thread: ask again)."""
    deadline = time.monotonic() + timeout
    while True:
        request = scheduler.next_request()
        if request is not None:
            return request
        assert time.monotonic() < deadline, "no request handed out"
        time.sleep(0.01)


def withheld(scheduler: FrontierScheduler, seconds: float = 0.5) -> bool:
    """Whether the scheduler handed out nothing, asked again and again for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if scheduler.next_request() is not None:
            return False
        time.sleep(0.01)
    return True


def fetched(crawler: Any, request: scrapy.Request, size: int = 100) -> HtmlResponse:
    """The fetch ended with a ``size``-byte response for the spider."""
    response = HtmlResponse(request.url, body=b"x" * size, request=request)
    crawler.signals.send_catch_log(
        crawler_signals.fetch_finished, request=request, outcome=Outcome.FETCHED,
        duration=0.01, response=response,
    )
    return response


def processed(crawler: Any, response: HtmlResponse) -> None:
    """The spider's output for the page ended with no item: the page is acknowledged."""
    crawler.signals.send_catch_log(crawler_signals.page_output_done, response=response, items=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_is_handed_out_while_the_backlog_is_full_and_work_resumes_as_it_drains(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    crawler, scheduler = open_scheduler(
        FRONTIER_MAX_BACKLOG=2, **bytes_bound(0, backend_settings(backend, tmp_path, request))
    )
    try:
        for i in range(6):
            assert scheduler.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
        first, second, third = take(scheduler), take(scheduler), take(scheduler)
        done = [fetched(crawler, first), fetched(crawler, second)]
        assert withheld(scheduler)  # two pages fetched and not processed: the bound
        # a fetch already in flight still lands: the backlog may pass the bound by it
        done.append(fetched(crawler, third))
        processed(crawler, done[0])
        assert withheld(scheduler)  # 2 of 2: still at the bound
        processed(crawler, done[1])
        resumed = take(scheduler)  # 1 of 2: work is handed out again
        assert resumed.url.startswith("http://a.test/") and LEASE_META in resumed.meta
        assert crawler.stats.get_value("frontier/backlog/full") == 1
        assert crawler.stats.get_value("frontier/backlog/full_seconds") >= 1.0
    finally:
        scheduler.close("finished")
    assert crawler.stats.get_value("frontier/backlog/peak_pages") == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_bytes_bound_holds_one_big_page_and_lets_small_ones_through(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    crawler, scheduler = open_scheduler(
        FRONTIER_MAX_BACKLOG=0,
        **bytes_bound(10_000, backend_settings(backend, tmp_path, request)),
    )
    try:
        for i in range(5):
            assert scheduler.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
        small = [fetched(crawler, take(scheduler), size=3_000) for _ in range(3)]
        big_request = take(scheduler)  # 9,000 bytes waiting: under the bound
        big = fetched(crawler, big_request, size=50_000)
        assert withheld(scheduler)
        for response in small:
            processed(crawler, response)
        assert withheld(scheduler)  # the big page alone is over the bound
        processed(crawler, big)
        assert take(scheduler).url.startswith("http://a.test/")
    finally:
        scheduler.close("finished")
    assert crawler.stats.get_value("frontier/backlog/peak_bytes") == 59_000


def test_without_a_bound_the_backlog_is_only_counted() -> None:
    crawler, scheduler = open_scheduler(FRONTIER_MAX_BACKLOG=0, **bytes_bound(0, {}))
    for i in range(20):
        assert scheduler.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
    for _ in range(8):
        fetched(crawler, take(scheduler), size=10_000_000)
    assert scheduler.next_request() is not None
    scheduler.close("finished")
    assert crawler.stats.get_value("frontier/backlog/full") is None
    assert crawler.stats.get_value("frontier/backlog/peak_pages") == 8


# -- the lease tracker's side, without Scrapy -------------------------------------------------


class Page:
    def __init__(self, url: str) -> None:
        self.url = url
        self.meta: dict[str, Any] = {}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tracked(max_pages: int, working: set[str]) -> tuple[LeaseTracker, list[str], list[int]]:
    frontier = MercatorFrontier(PolitenessPolicy(min_delay=0, max_delay=0))
    frontier.add_many([Entry(f"http://h{i}.test/", f"h{i}.test") for i in range(6)])
    stats = FrontierStats(Stats())
    drains: list[int] = []
    clock = Clock()
    backlog = Backlog(
        stats, max_pages=max_pages, drained=lambda: drains.append(backlog.pages), clock=clock
    )
    acked: list[str] = []

    def ack(token: str) -> None:
        acked.append(token)
        frontier.ack(token)

    leases = LeaseTracker(
        frontier, stats, ack=ack, completed=lambda *a: None,
        engine_holds=lambda r: r.url in working, clock=clock, backlog=backlog,
    )
    return leases, acked, drains


def hand_out(leases: LeaseTracker) -> Page:
    lease = leases.frontier.next()
    assert lease is not None
    page = Page(lease.entry.url)
    leases.handed_out(lease.token, page, lease.entry.host)
    return page


def test_the_engine_is_woken_once_each_time_the_backlog_drains_below_its_bound() -> None:
    pages = [f"http://h{i}.test/" for i in range(6)]
    leases, _, drains = tracked(max_pages=2, working=set(pages))
    a, b, c = hand_out(leases), hand_out(leases), hand_out(leases)
    for page in (a, b, c):
        leases.fetch_ended(page, Outcome.FETCHED, 0.1, size=10, for_spider=True)
    failed = hand_out(leases)  # a fetch with nothing for the spider never enters the backlog
    leases.fetch_ended(failed, Outcome.FAILED, 0.1, size=0, for_spider=False)
    assert leases.backlog.pages == 3 and leases.backlog_full()
    leases.page_output_done(a, 0)
    assert drains == [] and leases.backlog_full()
    leases.page_output_done(b, 0)
    assert drains == [1] and not leases.backlog_full()
    leases.page_output_done(c, 0)
    assert drains == [1] and leases.backlog.pages == 0 and leases.backlog.bytes == 0


def test_a_full_backlog_lets_go_of_pages_the_engine_finished_without_a_signal() -> None:
    leases, acked, drains = tracked(max_pages=2, working=set())
    silent, busy = hand_out(leases), hand_out(leases)
    leases.engine_holds = lambda r: r is busy  # the engine still works on ``busy`` only
    for page in (silent, busy):
        leases.fetch_ended(page, Outcome.FETCHED, 0.1, size=10, for_spider=True)
    assert not leases.backlog_full()  # settled at once: the engine let go of ``silent``
    assert acked == [silent.meta[LEASE_META]] and drains == [1]
    assert leases.stats.stats.values["frontier/acked_late"] == 1
    third = hand_out(leases)
    leases.engine_holds = lambda r: True
    leases.fetch_ended(third, Outcome.FETCHED, 0.1, size=10, for_spider=True)
    leases.engine_holds = lambda r: False
    assert leases.backlog_full()  # settled less than BACKLOG_SETTLE_INTERVAL ago: not yet
    leases.clock.now += BACKLOG_SETTLE_INTERVAL  # type: ignore[attr-defined]
    assert not leases.backlog_full() and len(acked) == 3


# -- a worker killed mid-crawl, with a slow item path ---------------------------------------


SLOW_ITEM = 0.05  # seconds per item, one item at a time: ~20 pages/s per worker at most
BOUND = 4  # FRONTIER_MAX_BACKLOG in the fault test
READ_AHEAD = 2  # worker_settings' TUNING read_ahead
KILL_AFTER = 30  # pages the doomed worker fetched before it is killed


class SlowPipeline:
    """One item at a time, ``SLOW_ITEM`` seconds each, without holding the reactor: the item
    path of a worker whose pipelines cannot keep up with its fetches."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()

    async def process_item(self, item: Any) -> Any:
        async with self.lock:
            await asyncio.sleep(SLOW_ITEM)
        return item


def test_a_killed_worker_costs_at_most_read_ahead_in_flight_and_the_backlog_bound(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    in_flight = len(HOSTS)  # host concurrency 1 on each host, CONCURRENT_REQUESTS 16
    extra = {
        "DOWNLOAD_TIMEOUT": 2, "RETRY_TIMES": 0, "FRONTIER_LEASE_TTL": 6,
        "FRONTIER_MIN_DELAY": 0.02,
        "FRONTIER_MAX_BACKLOG": BOUND,
        "ITEM_PIPELINES": json.dumps({**ITEM_PIPELINES, f"{__name__}.SlowPipeline": 950}),
        # the near-duplicate store on Redis is another branch's: the in-process one here
        "BACKEND_CLASSES": {"neardup_store": "crawler.content.neardup.NearDuplicateDetector"},
    }
    key = fresh_key()
    dirs = [tmp_path / "w0", tmp_path / "w1"]
    for d in dirs:
        d.mkdir()

    def settings(i: int) -> dict[str, Any]:
        return worker_settings(redis_server, key, dirs[i], USER_AGENT=f"backlog-w{i}", **extra)

    def pages_of(records: list[Any], agent: str) -> list[str]:
        return normalized([r for r in records if r.headers.get("User-Agent") == agent])

    with site(pages=40) as server:
        # both start at once, with the same seeds (the shared seen-set takes each once), so
        # both are busy from the start
        survivor = start_crawl(dirs[0], seeds=server.seeds(), settings=settings(0))
        doomed = start_crawl(dirs[1], seeds=server.seeds(), settings=settings(1))
        wait_until(lambda: len(pages_of(server.records, "backlog-w1")) >= KILL_AFTER, 60)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        time.sleep(1.0)  # a request sent just before dying may still be read by the server
        killed_pages = set(pages_of(server.records, "backlog-w1"))
        result = finish_crawl(survivor, dirs[0], timeout=180)
        records = server.records
        wanted = server.graph.reachable(server.seeds())
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["finish_reason"] == "finished"
    fetched_urls = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched_urls), sorted(allowed - set(fetched_urls))[:5]  # none lost
    twice = {u for u, n in Counter(fetched_urls).items() if n > 1}
    # each page fetched twice was the killed worker's, fetched again by the survivor
    assert twice <= killed_pages and twice <= set(pages_of(records, "backlog-w0"))
    assert len(killed_pages) >= KILL_AFTER > READ_AHEAD + in_flight + BOUND
    assert len(twice) <= READ_AHEAD + in_flight + BOUND, (len(twice), len(killed_pages))
    # the slow item path did fill the backlog: the bound, not luck, kept the refetches down
    assert result.stats.get("frontier/backlog/full", 0) > 0
