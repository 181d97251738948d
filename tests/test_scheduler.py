"""The scheduler adapter over the frontier, without an engine: leases, signals, rejections."""

from __future__ import annotations

import scrapy
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.frontier import Outcome
from crawler.scheduler import LEASE_META, FrontierScheduler


class PlainSpider(scrapy.Spider):
    name = "plain"
    allowed_domains = ["a.test", "b.test"]


def open_scheduler(**settings):
    crawler = get_crawler(PlainSpider, {"FRONTIER_MIN_DELAY": 10, **settings})
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    scheduler = FrontierScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return crawler, scheduler


def finish(crawler, request, outcome=Outcome.FETCHED, duration=0.1):
    crawler.signals.send_catch_log(
        crawler_signals.fetch_finished, request=request, outcome=outcome, duration=duration
    )


def test_leases_are_released_by_fetch_finished_and_foreign_requests_ignored():
    crawler, scheduler = open_scheduler()
    for path in ("1", "2"):
        assert scheduler.enqueue_request(scrapy.Request(f"http://a.test/{path}"))
    first = scheduler.next_request()
    assert first is not None and LEASE_META in first.meta
    assert scheduler.next_request() is None  # one request in flight per host
    finish(crawler, scrapy.Request("http://a.test/other"))  # never handed out: ignored
    assert scheduler.frontier.in_flight() == 1
    finish(crawler, first, Outcome.NOT_SENT, None)  # e.g. denied before the network
    second = scheduler.next_request()
    assert second is not None and second.url == "http://a.test/2"
    finish(crawler, second)
    assert scheduler.frontier.in_flight() == 0
    assert scheduler.next_request() is None  # the host rests 10 s now
    assert scheduler.has_pending_requests() is False  # nothing queued, nothing in flight


def test_a_retry_copy_drops_its_parents_lease_and_skips_the_seen_test():
    crawler, scheduler = open_scheduler()
    assert scheduler.enqueue_request(scrapy.Request("http://a.test/x"))
    request = scheduler.next_request()
    retry = request.replace(dont_filter=True)
    assert retry.meta[LEASE_META] == request.meta[LEASE_META]
    assert scheduler.enqueue_request(retry)
    assert LEASE_META not in retry.meta
    assert not scheduler.enqueue_request(scrapy.Request("http://a.test/x"))
    assert crawler.stats.get_value("frontier/rejected/seen") == 1


def test_rejections_are_counted_by_reason():
    crawler, scheduler = open_scheduler()
    assert not scheduler.enqueue_request(scrapy.Request("http://c.test/"))
    assert not scheduler.enqueue_request(scrapy.Request("http://a.test/x/x/x/x/"))
    assert scheduler.enqueue_request(scrapy.Request("http://sub.b.test/"))
    stats = crawler.stats.get_stats()
    assert stats["frontier/rejected/out_of_scope"] == 1
    assert stats["frontier/rejected/repeated_segments"] == 1
    assert stats["frontier/enqueued"] == 1


def test_seed_hosts_join_the_scope():
    _, scheduler = open_scheduler()
    assert scheduler.enqueue_request(scrapy.Request("http://seed.test/", meta={"seed": True}))
    assert scheduler.enqueue_request(scrapy.Request("http://seed.test/page"))


def test_origin_discovered_puts_a_first_request_before_the_hosts_others():
    crawler, scheduler = open_scheduler(FRONTIER_MIN_DELAY=0, FRONTIER_DELAY_FACTOR=0)
    origins = []

    def first_request(origin, host):
        origins.append((origin, host))
        return scrapy.Request(f"{origin}/robots.txt", dont_filter=True)

    crawler.signals.connect(first_request, crawler_signals.origin_discovered)
    for path in ("1", "2"):
        assert scheduler.enqueue_request(scrapy.Request(f"http://a.test:8080/{path}"))
    assert origins == [("http://a.test:8080", "a.test")]
    robots = scheduler.next_request()
    assert robots.url == "http://a.test:8080/robots.txt"
    assert scheduler.next_request() is None  # the host waits for its first request
    finish(crawler, robots)
    assert scheduler.next_request().url == "http://a.test:8080/1"


def test_host_crawl_delay_signal_reaches_the_frontier():
    crawler, scheduler = open_scheduler(FRONTIER_MAX_CRAWL_DELAY=30)
    crawler.signals.send_catch_log(crawler_signals.host_crawl_delay, host="a.test", delay=60)
    assert not scheduler.enqueue_request(scrapy.Request("http://a.test/"))
    assert crawler.stats.get_value("frontier/rejected/host_skipped") == 1


def test_hosts_seeds_brought_into_scope_survive_a_resume(tmp_path):
    _, scheduler = open_scheduler(JOBDIR=str(tmp_path))
    assert scheduler.enqueue_request(scrapy.Request("http://seed.test/", meta={"seed": True}))
    scheduler.close("shutdown")
    _, resumed = open_scheduler(JOBDIR=str(tmp_path))
    assert resumed.enqueue_request(scrapy.Request("http://seed.test/page"))  # no seed this time
    assert not resumed.enqueue_request(scrapy.Request("http://other.test/"))
    resumed.close("finished")
