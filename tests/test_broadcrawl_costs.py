"""A broad crawl holds its pace: the work of one operation on a worker's per-host and per-origin
structures is the same with 10 times more hosts met (issue 36). Each test counts work (states
looked at, hosts compared), never time, at two sizes 10 times apart."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.test import get_crawler

import crawler.report.tally as report_tally
import crawler.robots.book as book_module
from crawler.extensions.heartbeat import HOSTS_SENT
from crawler.extensions.tally import CrawlTally
from crawler.frontier import Outcome
from crawler.robots import MemoryRobotsCache, RobotsBook, RobotsRecord
from crawler.robots.rules import RULES


class _Counted(book_module.OriginState):
    """An origin state that counts every read of its fields: the states an operation looks at."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            _Counted.reads += 1
        return super().__getattribute__(name)


def _book_with_waiting_origins(waiting: int, monkeypatch: pytest.MonkeyPatch) -> RobotsBook:
    """A book over its bound: ``waiting`` origins met whose robots.txt is queued and not yet
    fetched (the soak's state: far more hosts known than fetched), and a full LRU of settled
    ones read from the cache."""
    monkeypatch.setattr(book_module, "OriginState", _Counted)
    cache = MemoryRobotsCache()
    book = RobotsBook(cache, "bot", max_origins=100)
    for i in range(waiting):
        origin = f"http://w{i}.example"
        book.discovered(origin, f"w{i}.example")
        book.queued(origin)
    for i in range(300):
        origin = f"http://s{i}.example"
        cache.put(RobotsRecord(origin, RULES, 200, 0.0, 1e9, "User-agent: *\nDisallow: /x\n"))
        book.discovered(origin, f"s{i}.example")
    return book


def _reads_to_meet_one_more(book: RobotsBook) -> int:
    """The fields read while the fetcher meets a new origin and queues its robots.txt."""
    _Counted.reads = 0
    origin = "http://new.example"
    book.discovered(origin, "new.example")
    if book.needs_fetch(origin, 0.0):
        book.queued(origin)
    return _Counted.reads


def test_meeting_an_origin_costs_the_same_with_ten_times_more_origins_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The robots book's eviction: with 1,000 then 10,000 origins waiting for their robots.txt
    (unsettled, never dropped), one more origin costs the same. It used to scan up to 4x the
    excess over the bound on every new origin and drop nothing (quadratic in origins met)."""
    small = _reads_to_meet_one_more(_book_with_waiting_origins(1_000, monkeypatch))
    large = _book_with_waiting_origins(10_000, monkeypatch)
    assert _reads_to_meet_one_more(large) == small
    settled = [st for st in large.states() if st.origin.startswith("http://s")]
    assert len(settled) == 100  # the bound holds for the settled ones
    assert len(large.states()) == 10_000 + 100 + 1  # no waiting origin was dropped


class _CountedTally(report_tally.HostTally):
    """A host's tally that counts the reads of its fields: the hosts a view looks at."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            _CountedTally.reads += 1
        return super().__getattribute__(name)


def _tally_of(hosts: int, monkeypatch: pytest.MonkeyPatch) -> CrawlTally:
    """The crawl's tally after ``hosts`` hosts were fetched, a few of them many times."""
    monkeypatch.setattr(report_tally, "HostTally", _CountedTally)
    crawler = get_crawler(Spider)
    crawler.stats = StatsCollector(crawler)
    tally = CrawlTally(crawler)
    clock = iter(range(10**9))
    tally.clock = lambda: float(next(clock))
    for i in range(hosts):
        for _ in range(1 + (i % 97 == 0) * (i % 7)):
            request = Request(f"http://h{i}.example/")
            response = Response(request.url, status=200, request=request)
            tally.fetch_finished(request, Outcome.FETCHED, 0.5, response, status=200)
    return tally


def _reads_of_a_beat(tally: CrawlTally) -> tuple[int, list[str], list[str]]:
    """The fields read by a heartbeat's busiest hosts and the progress line's."""
    _CountedTally.reads = 0
    beat = [host for host, _ in tally.hosts.busiest(HOSTS_SENT, by="fetches")]
    line = [host for host, _, _ in tally.busiest(3)]
    return _CountedTally.reads, beat, line


def test_the_busiest_hosts_cost_the_same_with_ten_times_more_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heartbeat's top-N and the progress line's busiest hosts read a bounded set of
    candidates, not every host met (they used to rank every host on each beat), and they are
    still the busiest."""
    small, _, _ = _reads_of_a_beat(_tally_of(1_000, monkeypatch))
    large = _tally_of(10_000, monkeypatch)
    reads, beat, line = _reads_of_a_beat(large)
    # the candidates number between LEADERS_KEPT and twice that, wherever the last trim left
    # them: the same bound at both sizes (ranking every host read >= 2 fields per host)
    bound = 2 * (2 * report_tally.LEADERS_KEPT + 1) * 2
    assert small <= bound and reads <= bound
    every = sorted(large.hosts, key=lambda kv: (-kv[1].fetches, kv[0]))
    expected = {host for host, t in every if t.fetches >= every[HOSTS_SENT - 1][1].fetches}
    assert set(beat) <= expected and len(beat) == HOSTS_SENT
    assert {t.fetches for h, t in every[:HOSTS_SENT]} == {large.hosts[h].fetches for h in beat}
    assert len(line) == 3 and {large.hosts[h].pages for h in line} == {7}


def test_the_broad_crawl_bench_says_how_many_workers_ran_each_quarter() -> None:
    """``bench/broadcrawl.py`` judges the quarters of one window for every worker, and says per
    quarter how many workers ran through it: its last quarter once fell because one worker had
    stopped (each at its own timeout), which read as the crawl slowing down."""
    from bench.broadcrawl import BroadWebServer, Web, report

    web = Web.build(10, 30, 1)
    samples = [{"t": t + 0.01 * (t % 3), "pages": 10 * t, "ok": 10 * t, "hosts": 10,
                "cpu": t / 10, "rss": 2.0**20, "workers": 2 if t < 52 else 1}
               for t in range(0, 61, 4)]
    result = report(web, BroadWebServer(web, 1.0), samples, [{}, {}], 60.0)
    quarters = result["quarters"]
    assert [q["workers"] for q in quarters] == [2, 2, 2, 1]
    assert [round(q["pages_per_s"]) for q in quarters] == [10, 10, 10, 10]
