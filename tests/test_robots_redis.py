"""The robots.txt fetch state the workers of a crawl share through one Redis
(:class:`~crawler.backends.redis.robots.RedisRobotsCache`): one claim at a time, a failure
holds the origin for every worker until its retry, a worker's end without an outcome drops
only its claim, and a stored copy clears it all."""

from __future__ import annotations

import time
from typing import Any

import redis
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.robots import RedisRobotsCache
from crawler.robots.rules import RobotsRecord
from tests.redis_support import fresh_key, redis_client, redis_server  # noqa: F401
from tests.test_robots_unit import answer, discover, middleware, run  # noqa: F401


def test_one_claim_a_shared_retry_and_a_stored_copy_clears_the_state(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    key = fresh_key()
    a, b = RedisRobotsCache(redis_client, key), RedisRobotsCache(redis_client, key)
    origin = "http://a.test"
    assert a.peek(origin) is None
    assert a.claim(origin, 60).claimed
    fetching = b.claim(origin, 60)
    assert not fetching.claimed and 59 < fetching.fetching_for <= 60
    a.unclaim(origin)  # refused: nothing learned, the next worker fetches at once
    assert b.peek(origin) is None and b.claim(origin, 60).claimed
    b.failed(origin, 30.0, 1)
    a.unclaim(origin)  # a stale end: b's failure is not a claim, it stays
    held = a.claim(origin, 60)
    assert not held.claimed and 29 < (held.retry_in or 0) <= 30 and held.failures == 1
    b.failed(origin, 0.05, 2)
    deadline = time.monotonic() + 10
    while (due := a.peek(origin)) is not None and due.retry_in and time.monotonic() < deadline:
        time.sleep(0.01)  # until Redis lets the hold lapse
    assert due is not None and due.retry_in == 0 and due.failures == 2  # the retry is due
    again = a.claim(origin, 60)
    assert again.claimed and again.failures == 2
    a.failed(origin, None, 3)
    assert b.claim(origin, 60).gave_up and b.peek(origin).gave_up  # type: ignore[union-attr]
    b.put(RobotsRecord(origin, "rules", 200, 1.0, 2.0, "User-agent: *\nDisallow: /x\n"))
    assert a.peek(origin) is None and a.claim(origin, 60).claimed
    a.put(RobotsRecord(origin, "rules", 200, 1.0, 2.0, ""))
    prefix = CrawlKeys(key).prefix
    assert {k.decode() for k in redis_client.scan_iter(match=prefix + "*")} == {prefix + ":robots"}


def test_a_retry_another_worker_fetched_ends_the_wait_of_requests_parked_here(
    middleware: Any,  # noqa: F811
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A worker parks a page of an origin whose robots.txt failed and queues the retry; in a
    shared crawl the frontier hands that retry to the worker owning the host now, which
    fetches it and gives up. This worker heard nothing of it: its crawl went idle and never
    ended (DontCloseSpider for ever). Idle, it now reads the shared state of the origins it
    still waits for, and gives up its parked requests too."""
    mw, crawler, timers, _ = middleware
    key = fresh_key()
    fetcher = mw.fetcher
    fetcher.book.cache = RedisRobotsCache(redis_client, key)
    origin = "http://a.example"
    first = discover(crawler, origin)
    run(mw.process_request(first))
    run(mw.process_response(first, answer(first, 503)))
    leased = Request(f"{origin}/page", meta={"frontier_lease": 1, "depth": 1})
    assert isinstance(run(mw.process_request(leased)).result, IgnoreRequest)  # parked
    redis_client.delete(CrawlKeys(key).robots_hold + origin)  # the retry delay is over
    _, retry, args = timers[0]
    retry(*args)
    assert crawler.engine.crawled[-1].meta["robotstxt_retry"]  # queued: another worker's now
    other = RedisRobotsCache(redis_client, key)  # that worker: its fetch fails, it gives up
    assert other.claim(origin, 60).claimed
    other.failed(origin, None, 3)
    fetcher._spider_idle(crawler.spider)  # idle: may close (raised DontCloseSpider before)
    assert fetcher.book.state(origin).gave_up
    assert crawler.stats.get_value("robotstxt/dropped") == 1
