"""The scheduler adapter over the frontier, without an engine: leases, signals, rejections."""

from __future__ import annotations

import msgpack
import pytest
import scrapy
from scrapy import signals
from scrapy.exceptions import DropItem
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.frontier import Entry, Outcome
from crawler.meta import LEASE_META
from crawler.middlewares.lease import LeaseAckMiddleware
from crawler.scheduler.adapter import FrontierScheduler, lease_ttl_from_settings
from crawler.sites.policy import url_policy_for


class PlainSpider(scrapy.Spider):
    name = "plain"
    allowed_domains = ["a.test", "b.test"]


def open_scheduler(spider_cls: type[scrapy.Spider] = PlainSpider, **settings):
    crawler = get_crawler(spider_cls, {"FRONTIER_MIN_DELAY": 10, **settings})
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


class CrawlingEngine:
    """``engine.crawl`` as Scrapy's: straight into the scheduler's ``enqueue_request``."""

    def __init__(self, scheduler: FrontierScheduler) -> None:
        self.scheduler = scheduler

    def crawl(self, request: scrapy.Request) -> None:
        self.scheduler.enqueue_request(request)


def test_origin_discovered_lets_a_receiver_put_a_first_request_before_the_hosts_others():
    """The signal only notifies: its receiver (the robots.txt fetcher) schedules the first
    request itself with ``engine.crawl``, at once, so it is queued before the host's page."""
    crawler, scheduler = open_scheduler(FRONTIER_MIN_DELAY=0, FRONTIER_DELAY_FACTOR=0)
    crawler.engine = CrawlingEngine(scheduler)
    origins = []

    def first_request(origin, host):
        origins.append((origin, host))
        robots = scrapy.Request(f"{origin}/robots.txt", dont_filter=True)
        robots.meta["frontier_first"] = True
        crawler.engine.crawl(robots)

    crawler.signals.connect(first_request, crawler_signals.origin_discovered)
    for path in ("1", "2"):
        assert scheduler.enqueue_request(scrapy.Request(f"http://a.test:8080/{path}"))
    assert origins == [("http://a.test:8080", "a.test")]
    robots = scheduler.next_request()
    assert robots.url == "http://a.test:8080/robots.txt"
    assert scheduler.next_request() is None  # the host waits for its first request
    finish(crawler, robots)
    assert scheduler.next_request().url == "http://a.test:8080/1"


def test_each_completion_is_announced_with_the_rest_the_frontier_applied():
    crawler, scheduler = open_scheduler(FRONTIER_MIN_DELAY=3)
    completions = []

    def fetch_completed(request, host, delay, outcome):
        completions.append((request.url, host, delay, outcome))

    crawler.signals.connect(fetch_completed, crawler_signals.fetch_completed)
    crawler.signals.send_catch_log(crawler_signals.host_crawl_delay, host="b.test", delay=7.0)
    for url in ("http://a.test/", "http://b.test/", "http://sub.b.test/"):
        assert scheduler.enqueue_request(scrapy.Request(url))
    a, b, sub = (scheduler.next_request() for _ in range(3))
    finish(crawler, a)
    finish(crawler, b, duration=0.2)
    finish(crawler, sub, Outcome.NOT_SENT, None)
    finish(crawler, scrapy.Request("http://a.test/other"))  # not handed out here: nothing
    assert completions == [
        ("http://a.test/", "a.test", pytest.approx(3.0), Outcome.FETCHED),
        ("http://b.test/", "b.test", pytest.approx(7.0), Outcome.FETCHED),  # its Crawl-delay
        ("http://sub.b.test/", "sub.b.test", None, Outcome.NOT_SENT),
    ]


def test_a_hosts_penalty_lowers_the_priority_of_its_urls_from_then_on():
    crawler, scheduler = open_scheduler(FRONTIER_HOST_CONCURRENCY=2)
    crawler.signals.send_catch_log(crawler_signals.host_penalty_changed, host="b.test", levels=2)
    assert scheduler.enqueue_request(scrapy.Request("http://b.test/"))
    assert scheduler.enqueue_request(scrapy.Request("http://a.test/"))
    crawler.signals.send_catch_log(crawler_signals.host_penalty_changed, host="b.test", levels=0)
    assert scheduler.enqueue_request(scrapy.Request("http://b.test/later"))
    priorities = {}
    while (lease := scheduler.frontier.next()) is not None:
        priorities[lease.entry.url] = lease.entry.priority
    assert priorities == {"http://b.test/": 2, "http://a.test/": 0, "http://b.test/later": 0}


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


# -- the lease lifecycle through Scrapy's signals ---------------------------------------------


class FakeSlot:
    def __init__(self) -> None:
        self.inprogress: set[scrapy.Request] = set()


class FakeEngine:
    def __init__(self) -> None:
        self._slot = FakeSlot()


def fetched(crawler, request, status=200):
    """The fetch ended with a response that goes on to the spider."""
    response = HtmlResponse(request.url, status=status, body=b"<html></html>", request=request)
    crawler.signals.send_catch_log(
        crawler_signals.fetch_finished,
        request=request,
        outcome=Outcome.FETCHED,
        duration=0.1,
        response=response,
    )
    return response


def leased_scheduler(n=1, **settings):
    crawler, scheduler = open_scheduler(FRONTIER_MIN_DELAY=0, FRONTIER_DELAY_FACTOR=0, **settings)
    for i in range(n):
        assert scheduler.enqueue_request(scrapy.Request(f"http://a.test/{i}"))
    requests = [scheduler.next_request() for _ in range(n)]
    return crawler, scheduler, requests


def test_a_page_is_acknowledged_once_its_output_ended_and_its_items_left_the_pipelines():
    crawler, scheduler, (request,) = leased_scheduler()
    response = fetched(crawler, request)
    frontier = scheduler.frontier
    assert frontier.in_flight() == 1  # fetched, not yet processed
    crawler.signals.send_catch_log(signals.item_scraped, item={"a": 1}, response=response)
    assert frontier.in_flight() == 1  # the spider may still yield another item
    crawler.signals.send_catch_log(crawler_signals.page_output_done, response=response, items=2)
    assert frontier.in_flight() == 1  # one of its two items is still in the pipelines
    crawler.signals.send_catch_log(
        signals.item_dropped, item={"a": 2}, response=response, exception=DropItem("dup")
    )
    assert frontier.in_flight() == 0 and not scheduler.has_pending_requests()


def test_a_page_without_items_is_acknowledged_when_its_output_ends():
    crawler, scheduler, (not_found, spider_error) = leased_scheduler(
        2, FRONTIER_HOST_CONCURRENCY=2
    )
    response = fetched(crawler, not_found, status=404)  # HttpErrorMiddleware yields nothing
    crawler.signals.send_catch_log(crawler_signals.page_output_done, response=response, items=0)
    assert scheduler.frontier.in_flight() == 1
    response = fetched(crawler, spider_error)
    crawler.signals.send_catch_log(
        signals.spider_error, failure=None, response=response, spider=crawler.spider
    )
    assert scheduler.frontier.in_flight() == 0


def test_a_fetch_without_a_response_for_the_spider_is_acknowledged_at_once():
    crawler, scheduler, (request,) = leased_scheduler()
    finish(crawler, request, Outcome.FAILED, 1.0)  # a timeout, or a retry passed on
    assert scheduler.frontier.in_flight() == 0
    assert crawler.stats.get_value("frontier/fetch/failed") == 1


def test_the_lease_middleware_reports_each_leased_pages_output_with_its_item_count():
    crawler, _, (request,) = leased_scheduler()
    response = fetched(crawler, request)
    mw = LeaseAckMiddleware.from_crawler(crawler)
    reports = []

    def on_done(response, items):
        reports.append((response.url, items))

    crawler.signals.connect(on_done, crawler_signals.page_output_done)
    output = [{"a": 1}, scrapy.Request("http://a.test/link"), {"b": 2}]
    assert list(mw.process_spider_output(response, iter(output))) == output
    assert reports == [(request.url, 2)]

    def failing():
        yield {"a": 1}
        raise ValueError("spider bug")

    with pytest.raises(ValueError):
        list(mw.process_spider_output(response, failing()))
    assert reports[-1] == (request.url, 1)  # the output ended, with an error
    unleased = HtmlResponse("http://a.test/x", body=b"", request=scrapy.Request("http://a.test/x"))
    assert list(mw.process_spider_output(unleased, iter(output))) == output
    assert len(reports) == 2  # not a frontier request: nothing to report


def test_renewal_keeps_what_the_engine_works_on_and_acknowledges_what_it_is_done_with():
    crawler, scheduler, (working, done, _lost) = leased_scheduler(3, FRONTIER_HOST_CONCURRENCY=3)
    engine = FakeEngine()
    engine._slot.inprogress.add(working)
    crawler.engine = engine
    fetched(crawler, done)  # its response went through a path that sent no signal we know of
    scheduler.renew_leases()
    assert scheduler.frontier.in_flight() == 2  # working, renewed; lost, left to expire
    assert crawler.stats.get_value("frontier/acked_late") == 1


def test_a_clean_stop_hands_back_what_never_reached_the_downloader():
    crawler, scheduler, (started, unstarted) = leased_scheduler(2, FRONTIER_HOST_CONCURRENCY=2)
    crawler.signals.send_catch_log(
        signals.request_reached_downloader, request=started, spider=crawler.spider
    )
    frontier = scheduler.frontier
    scheduler.close("shutdown")
    assert frontier.in_flight() == 1 and len(frontier) == 1
    assert crawler.stats.get_value("frontier/leases_released_at_close") == 1
    lease = frontier.next()
    assert lease is not None and lease.entry.url == unstarted.url


def test_the_lease_ttl_outlasts_a_fetch_with_all_its_retries(caplog):
    settings = {"DOWNLOAD_TIMEOUT": 20, "RETRY_TIMES": 2, "RETRY_ENABLED": True}
    assert lease_ttl_from_settings(Settings(settings), 300, given=True) == 300
    assert not caplog.records
    assert lease_ttl_from_settings(Settings(settings), 120) == 120  # the default fits the project's
    assert not caplog.records
    slow = {**settings, "DOWNLOAD_TIMEOUT": 60}  # the default follows longer downloads quietly
    assert lease_ttl_from_settings(Settings(slow), 120) == 360
    assert not caplog.records
    assert lease_ttl_from_settings(Settings(settings), 50, given=True) == 120
    assert "FRONTIER_LEASE_TTL" in caplog.text


def test_queued_requests_on_disk_are_msgpack_without_secrets(tmp_path):
    _, scheduler = open_scheduler(JOBDIR=str(tmp_path))
    request = scrapy.Request(
        "http://a.test/form",
        method="POST",
        body=b"\x00\xffbinary",
        headers={"Authorization": "Basic c2VjcmV0", "X-Kept": "yes"},
        meta={"depth": 2, "note": "kept", "unpicklable": object()},
        priority=3,
    )
    assert scheduler.enqueue_request(request)
    lease = scheduler.frontier.next()
    payload = lease.entry.payload
    assert isinstance(payload, bytes) and not payload.startswith(b"\x80")  # not a pickle
    data = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    assert data["body"] == b"\x00\xffbinary"
    assert b"Authorization" not in data["headers"]
    assert "unpicklable" not in data["meta"]
    assert scheduler.frontier.release([lease.token]) == 1
    rebuilt = scheduler.next_request()
    assert (rebuilt.method, rebuilt.body, rebuilt.priority) == ("POST", b"\x00\xffbinary", 3)
    assert rebuilt.headers[b"X-Kept"] == b"yes" and b"Authorization" not in rebuilt.headers
    assert rebuilt.meta["note"] == "kept" and rebuilt.meta["depth"] == 2
    scheduler.close("finished")


def test_an_unreadable_payload_is_dropped_not_fatal(tmp_path):
    _, scheduler = open_scheduler(JOBDIR=str(tmp_path))
    scheduler.frontier.add(Entry("http://a.test/old", "a.test", payload=b"\x80\x05garbage"))
    assert scheduler.next_request() is None
    assert scheduler.frontier.in_flight() == 0 and len(scheduler.frontier) == 0
    scheduler.close("finished")


class TrapDomainSpider(scrapy.Spider):
    name = "trapdomain"
    allowed_domains = ["trap.co.uk"]


def test_hosts_per_domain_budget_survives_a_resume(tmp_path):
    """Generated subdomains share one budget per registered domain, kept across a resume: the
    frontier's host table (JOBDIR) says which hosts were admitted before."""
    settings = {"JOBDIR": str(tmp_path), "URL_MAX_HOSTS_PER_DOMAIN": 3}
    crawler, scheduler = open_scheduler(TrapDomainSpider, **settings)
    for i in range(3):
        assert scheduler.enqueue_request(scrapy.Request(f"http://h{i}.trap.co.uk/"))
    assert not scheduler.enqueue_request(scrapy.Request("http://h3.trap.co.uk/"))
    assert crawler.stats.get_value("frontier/rejected/domain_hosts") == 1
    scheduler.close("shutdown")
    crawler, resumed = open_scheduler(TrapDomainSpider, **settings)
    assert not resumed.enqueue_request(scrapy.Request("http://h4.trap.co.uk/"))
    assert crawler.stats.get_value("frontier/rejected/domain_hosts") == 1
    # the hosts admitted before keep their place
    assert resumed.enqueue_request(scrapy.Request("http://h1.trap.co.uk/more"))
    resumed.close("shutdown")


def _take_links(crawler, urls, forms=None, depth=0):
    page = scrapy.Request("http://a.test/page", meta={"depth": depth})
    response = HtmlResponse(page.url, body=b"", request=page)
    crawler.signals.send_catch_log(
        crawler_signals.links_extracted, response=response, urls=urls, spider=crawler.spider,
        demote=0, forms=forms,
    )


def _frontier_state(crawler, scheduler):
    stats = {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("frontier/")}
    queued = []
    while (request := scheduler.next_request()) is not None:
        queued.append((request.url, request.meta.get("depth")))
        finish(crawler, request, duration=0.0)
    return stats, queued, scheduler.frontier.counts()


def _prepared(policy, urls, skip=()):
    return {url: policy.link_form(url) for url in urls if url not in skip}


def test_links_prepared_on_another_thread_are_taken_as_unprepared_ones():
    """The content thread prepares a page's links with the crawl's URL policy
    (``url_policy_for``, ``UrlPolicy.link_form``) and hands the forms over with the links: the
    same URLs are queued, at the same depths, with the same counts, also when the raw-link
    cache took some of them or was cleared in between."""
    pages = [
        [f"http://a.test/{i}" for i in range(30)] + ["http://c.test/out", "ftp://a.test/x"],
        [f"http://a.test/{i}" for i in range(20, 50)] + ["http://A.test:80/1#f", "http://b.test/"],
        ["http://a.test/late", "http://a.test/0", "http://[::1/x", "http://b.test/1"],
    ]
    outcomes = []
    for prepared in (False, True):
        crawler, scheduler = open_scheduler(FRONTIER_MIN_DELAY=0)
        policy = url_policy_for(crawler.spider, crawler.settings)  # the content thread's own
        forms = [_prepared(policy, urls) if prepared else None for urls in pages[:2]]
        _take_links(crawler, pages[0], forms[0])
        _take_links(crawler, pages[1], forms[1])  # prepared before page 0's links were taken
        # prepared without the links its own cache had seen
        last = _prepared(policy, pages[2], skip={"http://a.test/0"}) if prepared else None
        scheduler.intake.forget()  # the raw-link cache forgets what page 2's forms skipped
        _take_links(crawler, pages[2], last, depth=1)
        outcomes.append(_frontier_state(crawler, scheduler))
    assert outcomes[1] == outcomes[0]
    stats, queued, _ = outcomes[0]
    assert len(queued) == 53 and stats == {
        "frontier/enqueued": 53,
        "frontier/links_repeated": 10, "frontier/rejected/seen": 2,
        "frontier/rejected/out_of_scope": 1, "frontier/rejected/scheme": 1,
        "frontier/rejected/invalid_url": 1,
    }


def test_a_page_of_many_links_is_taken_in_slices_and_acknowledged_after_its_last():
    """Over TUNING's link_slice links, a page's links go in one slice per reactor turn, after
    the pages before them; meanwhile the crawl is not idle and the page's lease is not
    acknowledged; closing takes what is left. The frontier ends as with the page taken whole."""
    outcomes = []
    for sliced in (False, True):
        crawler, scheduler = open_scheduler(FRONTIER_MIN_DELAY=0, TUNING={"link_slice": 10})
        turns: list = []
        if sliced:
            scheduler.intake.later = _turns(turns)
        acked: list = []
        scheduler.frontier.ack = _recording(scheduler.frontier.ack, acked)
        assert scheduler.enqueue_request(scrapy.Request("http://a.test/page"))
        request = scheduler.next_request()
        token = request.meta[LEASE_META]
        response = HtmlResponse(request.url, body=b"", request=request)
        crawler.signals.send_catch_log(crawler_signals.fetch_finished, request=request,
                                       outcome=Outcome.FETCHED, duration=0.0, response=response)
        urls = [f"http://a.test/{i}" for i in range(35)] + ["http://c.test/", "http://a.test/0"]
        crawler.signals.send_catch_log(crawler_signals.links_extracted, response=response,
                                       urls=urls, spider=crawler.spider)
        _take_links(crawler, ["http://b.test/after", "http://a.test/36"])  # another page
        crawler.signals.send_catch_log(crawler_signals.page_output_done, response=response,
                                       items=0)
        if sliced:
            assert acked == [] and scheduler.has_pending_requests() and scheduler.intake.pending
            assert crawler.stats.get_value("frontier/enqueued") == 1 + 10  # the first slice
            for _ in range(2):
                turns.pop(0)()
            assert acked == [] and len(turns) == 1  # 30 of the page's 37 links are in
            turns.pop(0)()  # the page's last 7, the other page's 2
            assert acked == [token] and turns == [] and not scheduler.intake.pending
        assert acked == [token] and not scheduler.intake.pending
        outcomes.append(_frontier_state(crawler, scheduler))
    assert outcomes[1] == outcomes[0]
    stats, queued, _ = outcomes[0]
    assert {"http://b.test/after", "http://a.test/36"} <= {u for u, _ in queued}
    assert stats["frontier/enqueued"] == 38 and stats["frontier/links_repeated"] == 1


def test_closing_takes_the_links_still_waiting():
    crawler, scheduler = open_scheduler(TUNING={"link_slice": 10})
    turns: list = []
    scheduler.intake.later = _turns(turns)
    _take_links(crawler, [f"http://a.test/{i}" for i in range(25)])
    assert len(turns) == 1 and crawler.stats.get_value("frontier/enqueued") == 10
    scheduler.close("shutdown")
    assert crawler.stats.get_value("frontier/enqueued") == 25
    assert crawler.stats.get_value("frontier/queued_at_close") == 25


class _NoCall:
    def cancel(self) -> None:
        pass


def _turns(turns: list):
    """A ``call_later`` for a test without a reactor: the test runs each turn itself."""
    def later(delay, fn):
        turns.append(fn)
        return _NoCall()
    return later


def _recording(ack, acked: list):
    def recorded(token):
        acked.append(token)
        return ack(token)
    return recorded
