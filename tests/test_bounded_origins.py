"""The last per-origin and per-address structures of a worker are bounded (issue 36): admission's
origins met, the robots fetcher's origins announced, the soft-404 prober's origins probed (each
an LRU of a fixed size), and the address budget (idle addresses pruned). For each, one
operation does the same work with 10 times more origins met, and the structure stays at its
bound after many more origins than that. A repeated announcement is harmless: the sitemap
reader skips the files it asked for, quietly."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

import crawler.backends.redis.addresses as redis_addresses_module
import crawler.frontier.addresses as addresses_module
import crawler.middlewares.soft404 as soft404_module
from crawler import signals as crawler_signals
from crawler.backends.redis.addresses import RedisAddressBudget
from crawler.backends.redis.keys import CrawlKeys
from crawler.frontier import Prioritizer, UrlPolicy
from crawler.frontier.addresses import AddressPolicy, LocalAddressBudget
from crawler.frontier.scope import ScopeRegistry
from crawler.middlewares.robots_outcomes import OriginOutcomes
from crawler.middlewares.sitemaps import SitemapMiddleware
from crawler.middlewares.soft404 import Soft404ProbeMiddleware
from crawler.robots import MemoryRobotsCache, RobotsBook, RobotsRecord
from crawler.robots.book import OriginState
from crawler.robots.rules import RULES
from crawler.scheduler.admission import Admission
from tests.redis_support import fresh_key, redis_server  # noqa: F401

BOUND = 100  # each structure's bound in these tests (the module constants are 100,000)


def calls_made(operation: Callable[..., Any], *args: Any) -> int:
    """The Python and C function calls ``operation(*args)`` makes: its work, untimed."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        operation(*args)
    finally:
        sys.setprofile(None)
    return calls


# -- admission's origins ----------------------------------------------------------------------


def admission_having_met(origins: int, heard: list[str]) -> Admission:
    admission = Admission(
        UrlPolicy(),
        Prioritizer("depth", 4),
        ScopeRegistry(),
        lambda origin, host: heard.append(origin),
        max_origins=BOUND,
    )
    for i in range(origins):
        admission.entry(f"https://h{i}.test/", f"h{i}.test", 1)
    return admission


def test_admission_remembers_a_bounded_number_of_origins_most_recent_first() -> None:
    heard: list[str] = []
    admission = admission_having_met(10 * BOUND, heard)
    assert len(heard) == 10 * BOUND
    assert len(admission._origins) == BOUND
    # an origin whose links keep coming stays known; one met long ago is announced again
    recent = f"https://h{10 * BOUND - 1}.test/"
    for i in range(BOUND - 1):
        admission.entry(recent, "recent.test", 1)
        admission.entry(f"https://n{i}.test/", f"n{i}.test", 1)
    heard.clear()
    admission.entry(recent, "recent.test", 1)
    admission.entry("https://h0.test/", "h0.test", 1)
    assert heard == ["https://h0.test"]


def test_admitting_a_url_costs_the_same_with_ten_times_more_origins_met() -> None:
    work = []
    for met in (10 * BOUND, 100 * BOUND):
        admission = admission_having_met(met, [])
        work.append(calls_made(admission.entry, "https://new.test/a", "new.test", 1))
        work.append(calls_made(admission.entry, "https://new.test/b", "new.test", 1))
        assert len(admission._origins) == BOUND
    assert work[0:2] == work[2:4]


# -- the robots fetcher's announced origins and the sitemap reader --------------------------------


def settled_origin(book: RobotsBook, cache: MemoryRobotsCache, i: int) -> OriginState:
    origin = f"https://h{i}.test"
    body = f"User-agent: *\nDisallow: /x\nSitemap: {origin}/map.xml\n"
    cache.put(RobotsRecord(origin, RULES, 200, 0.0, 1e12, body))
    return book.discovered(origin, f"h{i}.test")


def outcomes_having_announced(origins: int) -> tuple[OriginOutcomes, list[str], Any]:
    """Robots outcomes that announced ``origins`` origins; the origins heard, and (the book,
    its cache, the receiver: held, as signals keep weak references)."""
    crawler = get_crawler()
    heard: list[str] = []

    def receive(origin: str, host: str, urls: list[str]) -> None:
        heard.append(origin)

    crawler.signals.connect(receive, crawler_signals.robots_sitemaps)
    cache = MemoryRobotsCache()
    book = RobotsBook(cache, "bot", max_origins=10)
    waits: Any = None  # announcing waits for nothing
    outcomes = OriginOutcomes(crawler, book, waits, lambda o: None, lambda *a: None, lambda: 0.0)
    outcomes.max_announced = BOUND
    for i in range(origins):
        outcomes.announce(settled_origin(book, cache, i))
    return outcomes, heard, (book, cache, receive)


def test_the_robots_fetcher_remembers_a_bounded_number_of_announced_origins() -> None:
    outcomes, heard, (book, cache, _) = outcomes_having_announced(10 * BOUND)
    assert len(heard) == 10 * BOUND
    assert len(outcomes._announced) == BOUND
    last = settled_origin(book, cache, 10 * BOUND - 1)
    outcomes.announce(last)  # recent: not again
    assert len(heard) == 10 * BOUND
    outcomes.announce(settled_origin(book, cache, 0))  # forgotten: again
    assert heard[-1] == "https://h0.test"


def test_announcing_an_origin_costs_the_same_with_ten_times_more_announced() -> None:
    work = []
    for met in (10 * BOUND, 100 * BOUND):
        outcomes, _, (book, cache, _receiver) = outcomes_having_announced(met)
        st = settled_origin(book, cache, 10**9)
        work.append(calls_made(outcomes.announce, st))
        work.append(calls_made(outcomes.announce, st))
        assert len(outcomes._announced) == BOUND
    assert work[0:2] == work[2:4]


def test_the_sitemap_reader_takes_an_origin_announced_again_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawler = get_crawler(settings_dict={"SITEMAPS_ENABLED": True, "SITEMAPS_PROBE": True})
    crawler.stats.open_spider()  # type: ignore[union-attr]
    engine = _Engine()
    crawler.engine = engine  # type: ignore[assignment]
    reader = SitemapMiddleware(crawler)
    listed = ["https://a.test/map.xml", "https://a.test/news.xml#x"]
    reader._robots_sitemaps("https://a.test", "a.test", listed)
    assert len(reader.book.asked) == 3  # the two listed, and the probe
    with caplog.at_level(logging.INFO):
        reader._robots_sitemaps("https://a.test", "a.test", listed)  # the announcer forgot it
        reader._robots_sitemaps("http://a.test", "a.test", listed[:1])  # another origin's
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []
    stats = crawler.stats.get_stats()  # type: ignore[union-attr]
    assert stats["sitemaps/announced_again"] == 4
    assert "sitemaps/refused/loop" not in stats
    assert len(reader.book.asked) == 4  # the other origin's probe is new
    assert len(engine.requests) == 4


# -- the soft-404 prober's origins ----------------------------------------------------------------


class _Engine:
    """What the prober asks of the engine: to schedule a request."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def crawl(self, request: Request) -> None:
        self.requests.append(request)


def prober_having_met(origins: int) -> tuple[Soft404ProbeMiddleware, _Engine]:
    crawler = get_crawler(settings_dict={"SOFT404_PROBE": True})
    engine = _Engine()
    crawler.engine = engine  # type: ignore[assignment]
    prober = Soft404ProbeMiddleware(crawler)
    prober.max_probed = BOUND
    for i in range(origins):
        prober._origin_discovered(f"https://h{i}.test", f"h{i}.test")
    return prober, engine


def test_the_soft404_prober_remembers_a_bounded_number_of_origins() -> None:
    prober, engine = prober_having_met(10 * BOUND)
    assert len(engine.requests) == 10 * BOUND
    assert len(prober._probed) == BOUND
    prober._origin_discovered(f"https://h{10 * BOUND - 1}.test", "recent")  # recent: not again
    assert len(engine.requests) == 10 * BOUND
    prober._origin_discovered("https://h0.test", "h0.test")  # forgotten: probed again
    assert engine.requests[-1].meta["soft404_probe"] == "https://h0.test"


def test_probing_an_origin_costs_the_same_with_ten_times_more_origins_probed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(soft404_module, "probe_path", lambda: "/p-soft404-probe")  # one length
    work = []
    for met in (10 * BOUND, 100 * BOUND):
        prober, _ = prober_having_met(met)
        work.append(calls_made(prober._origin_discovered, "https://h.test", "h.test"))
        work.append(calls_made(prober._origin_discovered, "https://h.test", "h.test"))
        assert len(prober._probed) == BOUND
    assert work[0:2] == work[2:4]


# -- the address budget -----------------------------------------------------------------------


class _CountedAddress(addresses_module._Address):
    """An address's state that counts the reads of its fields: the addresses a take looks at."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            _CountedAddress.reads += 1
        return super().__getattribute__(name)


def budget_having_met(addresses: int, busy: int = 0) -> tuple[LocalAddressBudget, float]:
    """A budget (1 s between fetches at an address) that met ``addresses`` addresses, one fetch
    each, a fetch every 10 ms; the first ``busy`` of them still fetching."""
    budget = LocalAddressBudget(AddressPolicy(concurrency=1, delay=1.0, max_delay=1.0))
    now = 0.0
    for i in range(addresses):
        now += 0.01
        assert budget.take(f"10.0.{i // 250}.{i % 250}", f"t{i}", now, f"h{i}") == 0.0
        if i >= busy:
            budget.done(f"10.0.{i // 250}.{i % 250}", f"t{i}", now + 0.005, 0.005)
    return budget, now


def test_idle_addresses_are_pruned_and_busy_ones_kept() -> None:
    budget, _ = budget_having_met(100 * BOUND, busy=5)
    # those fetching (5) or still in their rest (1 s: the last 100 met) stay, with at most as
    # many idle ones met since the pruning last passed them by; the rest went
    assert len(budget._addresses) <= 2 * (5 + 100)
    assert all(f"10.0.0.{i}" in budget._addresses for i in range(5))
    # the pruned addresses' counts: the busiest kept
    assert len(budget._retired) <= addresses_module.RETIRED_KEPT
    assert [load.fetches for load in budget.busiest(3)] == [1, 1, 1]


def test_politeness_holds_at_an_address_met_again_after_pruning() -> None:
    budget, now = budget_having_met(10 * BOUND)
    address = min(budget._retired)  # pruned long ago, its counts kept
    assert address not in budget._addresses
    assert budget.take(address, "a", now + 1, "x") == 0.0
    assert budget._addresses[address].fetches == 2  # its count came back
    assert budget.take(address, "b", now + 1.1, "y") > 0  # one at a time, still
    budget.done(address, "a", now + 1.2, 0.1)
    assert budget.take(address, "b", now + 1.3, "y") > 0  # its rest: 1 s after the fetch
    assert budget.take(address, "b", now + 2.25, "y") == 0.0


def test_a_take_at_a_new_address_costs_the_same_with_ten_times_more_addresses_met(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(addresses_module, "_Address", _CountedAddress)
    work = []
    for met in (10 * BOUND, 100 * BOUND):
        budget, now = budget_having_met(met, busy=5)
        _CountedAddress.reads = 0
        budget.take("192.0.2.1", "new", now + 0.01, "new.test")
        work.append(_CountedAddress.reads)
    assert work[0] == work[1]


def test_the_robots_fetcher_remembers_a_bounded_number_of_crawl_delays() -> None:
    """Origins whose robots.txt has a Crawl-delay: the delay is sent once per origin among the
    most recently sent; a forgotten origin's is sent again (the frontier sets it again)."""
    crawler = get_crawler()
    sent: list[str] = []

    def receive(host: str, delay: float) -> None:
        sent.append(host)

    crawler.signals.connect(receive, crawler_signals.host_crawl_delay)
    cache = MemoryRobotsCache()
    book = RobotsBook(cache, "bot", max_origins=10)
    outcomes = OriginOutcomes(crawler, book, None, lambda o: None, lambda *a: None, lambda: 0.0)
    outcomes.max_announced = BOUND

    def delayed(i: int) -> OriginState:
        origin = f"https://d{i}.test"
        body = "User-agent: *\nCrawl-delay: 2\nDisallow: /x\n"
        cache.put(RobotsRecord(origin, RULES, 200, 0.0, 1e12, body))
        return book.discovered(origin, f"d{i}.test")

    for i in range(10 * BOUND):
        outcomes.send_delay(delayed(i))
    assert len(sent) == 10 * BOUND and len(outcomes._delays) == BOUND
    outcomes.send_delay(delayed(10 * BOUND - 1))  # recent: not again
    assert len(sent) == 10 * BOUND
    outcomes.send_delay(delayed(0))  # forgotten: again
    assert sent[-1] == "d0.test"


def test_a_redis_workers_address_list_for_the_summary_is_bounded(redis_server) -> None:  # noqa: F811
    """The Redis address budget remembers the addresses this worker used, for the end
    summary's busiest addresses: the most recent SEEN_KEPT, not every address met."""
    client = redis_server.client()
    budget = RedisAddressBudget(
        client, CrawlKeys(fresh_key(), "web", 1), AddressPolicy(delay=0.0, concurrency=1),
        lambda: 0.0,
    )
    kept = redis_addresses_module.SEEN_KEPT
    for i in range(kept + 50):
        budget.take(f"10.0.{i // 250}.{i % 250}", f"t{i}", 0.0)
    assert len(budget._seen) == kept
    assert "10.0.0.0" not in budget._seen and f"10.0.{(kept + 49) // 250}.{(kept + 49) % 250}" in (
        budget._seen
    )
    client.close()
