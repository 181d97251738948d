"""Politeness per server address: host names that resolve to one IP share its budget, in one
worker (memory) and across a fleet (a real Redis), checked on a real crawl of many names served
by one loopback address through a real DNS server."""

from __future__ import annotations

import re
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from crawler.backends.redis.addresses import RedisAddressBudget
from crawler.backends.redis.keys import CrawlKeys
from crawler.frontier.addresses import AddressBudget, AddressPolicy, LocalAddressBudget
from crawler.report.addresses import address_loads, addresses_section
from crawler.report.recordfile import read_records
from devsite.named import NamedSites, Visit
from tests.crawling import (
    finish_crawl,
    loopback_settings,
    run_crawl,
    scrapy_frontier,
    start_crawl,
)
from tests.dns_support import dns_server, wait_for
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

ZONE: dict[str, Any] = {"suffixes": {".shared.test": {"a": "127.0.0.1", "ttl": 300}}}
IP_DELAY = 0.3


@pytest.fixture(params=["memory", "redis"])
def budget_of(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,  # noqa: F811
) -> Any:
    def make(policy: AddressPolicy, shards: int = 1) -> AddressBudget:
        if request.param == "memory":
            return LocalAddressBudget(policy)
        keys = CrawlKeys(fresh_key(), "web", shards)
        return RedisAddressBudget(redis_server.client(), keys, policy)

    return make


def test_one_fetch_at_a_time_and_a_rest_after_it(budget_of: Any) -> None:
    budget = budget_of(AddressPolicy(concurrency=1, delay=IP_DELAY, factor=0, ttl=60))
    assert budget.take("192.0.2.1", "t1", time.monotonic(), "a.test") == 0
    assert budget.take("192.0.2.1", "t2", time.monotonic(), "b.test") > 0  # one in flight
    assert budget.take("192.0.2.2", "t3", time.monotonic(), "c.test") == 0  # another server
    budget.done("192.0.2.1", "t1", time.monotonic(), 0.01)
    assert budget.take("192.0.2.1", "t4", time.monotonic(), "b.test") > 0  # resting
    time.sleep(IP_DELAY + 0.05)
    assert budget.take("192.0.2.1", "t4", time.monotonic(), "b.test") == 0


def test_refused_hosts_wait_in_line_one_gap_apart(budget_of: Any) -> None:
    budget = budget_of(AddressPolicy(concurrency=1, delay=IP_DELAY, factor=0, ttl=60))
    assert budget.take("192.0.2.9", "first", time.monotonic()) == 0
    waits = [budget.take("192.0.2.9", f"t{i}", time.monotonic()) for i in range(5)]
    assert all(b - a >= IP_DELAY - 0.01 for a, b in pairwise(waits)), waits


def test_a_fetch_that_never_left_needs_no_rest(budget_of: Any) -> None:
    budget = budget_of(AddressPolicy(concurrency=1, delay=5.0, factor=0, ttl=60))
    assert budget.take("192.0.2.5", "t1", time.monotonic()) == 0
    budget.done("192.0.2.5", "t1", time.monotonic(), None)
    assert budget.take("192.0.2.5", "t2", time.monotonic()) == 0


def test_a_dead_workers_token_expires(budget_of: Any) -> None:
    budget = budget_of(AddressPolicy(concurrency=1, delay=0.0, factor=0, ttl=0.2))
    assert budget.take("192.0.2.6", "killed", time.monotonic()) == 0
    time.sleep(0.3)
    assert budget.take("192.0.2.6", "next", time.monotonic()) == 0


def test_names_of_one_address_meet_on_one_shard(redis_server: RedisServer) -> None:  # noqa: F811
    policy = AddressPolicy(concurrency=1, delay=IP_DELAY, factor=0, ttl=60)
    keys = CrawlKeys(fresh_key(), "web", 3)
    worker_a = RedisAddressBudget(redis_server.client(), keys, policy)
    worker_b = RedisAddressBudget(redis_server.client(), keys, policy)
    assert worker_a.take("192.0.2.1", "a1", 0) == 0
    assert worker_b.take("192.0.2.1", "b1", 0) > 0
    assert [load.fetches for load in worker_a.busiest(1)] == [1]


# --- crawls -------------------------------------------------------------------------------------


def check_address_polite(visits: list[Visit], gap: float) -> None:
    ordered = sorted(visits, key=lambda v: v.start)
    assert len({v.name for v in ordered}) > 1
    for prev, nxt in pairwise(ordered):
        assert nxt.start >= prev.end, f"{prev.name} and {nxt.name} at once"
        assert nxt.start - prev.end >= gap - 0.02, (prev, nxt)


def crawl_settings(server_address: str, **extra: Any) -> dict[str, Any]:
    return loopback_settings(
        DNS_SERVERS=server_address,
        FRONTIER_IP_DELAY=IP_DELAY,
        FRONTIER_IP_CONCURRENCY=1,
        CLOSESPIDER_TIMEOUT=90,
        **extra,
    )


def test_names_on_one_server_share_its_budget(tmp_path: Path) -> None:
    names = [f"n{i}.shared.test" for i in range(8)]
    with NamedSites(names, pages=2) as sites, dns_server(tmp_path / "dns", ZONE) as server:
        record = tmp_path / "record.jsonl"
        result = run_crawl(
            tmp_path,
            seeds=[sites.url(n) for n in names],
            settings=crawl_settings(server.address, RECORD_PATH=record),
        )
        assert result.returncode == 0, result.log[-3000:]
        assert len(sites.visits) == len(names) * 4  # robots.txt, home, 2 pages
        check_address_polite(sites.visits, IP_DELAY)
        assert result.stats["frontier/address/refused"] > 0
        assert "busiest addresses: 127.0.0.1: " in result.log  # the end summary
        check_report_addresses([record], names, len(sites.visits))


def test_names_of_one_server_take_turns_home_pages_first(tmp_path: Path) -> None:
    """Each name's own delay is the address's: the name that just fetched is due again the
    moment the address frees, yet the address goes to the names that have waited, best URL
    first (depth order): every name's robots.txt and home page before any name's second
    page."""
    names = [f"t{i}.shared.test" for i in range(10)]
    with NamedSites(names, pages=2) as sites, dns_server(tmp_path / "dns", ZONE) as server:
        result = run_crawl(
            tmp_path,
            seeds=[sites.url(n) for n in names],
            # depth order (the web site's own policy is OPIC, where the cash decides, and a
            # home page has no claim to come before another host's second page)
            settings=crawl_settings(
                server.address, FRONTIER_MIN_DELAY=IP_DELAY, FRONTIER_PRIORITY_POLICY="depth"
            ),
        )
        assert result.returncode == 0, result.log[-3000:]
        visits = sorted(sites.visits, key=lambda v: v.start)
    assert len(visits) == len(names) * 4  # robots.txt, home, 2 pages
    second = next(i for i, v in enumerate(visits) if v.path.startswith("/p/"))
    before = [(v.name, v.path) for v in visits[:second]]
    assert sorted(before) == sorted((n, p) for n in names for p in ("/robots.txt", "/")), before
    check_address_polite(visits, IP_DELAY)


def check_report_addresses(records: list[Path], names: list[str], fetches: int) -> None:
    """The report's address table: every name under the one address, each fetch counted, one
    at a time and no gap below the IP delay as the crawl itself measured them."""
    record = read_records(records)
    (load,) = address_loads(record)
    assert (load.address, sorted(load.names)) == ("127.0.0.1", sorted(names))
    assert load.fetches == fetches
    assert (load.most_at_once, load.short) == (1, 0)
    html = addresses_section(record)
    assert f'data-address="127.0.0.1" data-names="{len(names)}"' in html


def test_a_fleet_shares_the_budget_of_an_address(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    names = [f"f{i}.shared.test" for i in range(8)]
    key = fresh_key()
    client = redis_server.client()
    with NamedSites(names, pages=2) as sites, dns_server(tmp_path / "dns", ZONE) as server:
        procs = []
        for i in range(2):
            d = tmp_path / f"w{i}"
            d.mkdir()
            settings = crawl_settings(
                server.address,
                FRONTIER_BACKEND="redis",
                REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/0",
                FRONTIER_REDIS_KEY=key,
                INDEX_PATH=d / "index.sqlite",
                RECORD_PATH=d / "record.jsonl",
            )
            seeds = [sites.url(n) for n in names] if i == 0 else None
            procs.append((start_crawl(d, seeds=seeds, settings=settings), d))
            if i == 0:  # the second worker joins a crawl that exists, as an operator's would
                wait_for(lambda: bool(client.keys("{" + key + "}*")), "the crawl in Redis")
        results = [finish_crawl(p, d, timeout=180) for p, d in procs]
        assert all(r.returncode == 0 for r in results), [r.log[-2000:] for r in results]
        assert len(sites.visits) == len(names) * 4
        check_address_polite(sites.visits, IP_DELAY)
        check_report_addresses([d / "record.jsonl" for _, d in procs], names, len(sites.visits))
        status = scrapy_frontier(
            {"REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0", "FRONTIER_REDIS_KEY": key,
             "FRONTIER_BACKEND": "redis"},
            "status",
        )
        # fetches granted: at least every request served (a grant whose request never left,
        # e.g. handed back at a worker's close, counts too)
        granted = re.search(r"busiest addresses: 127\.0\.0\.1 (\d+) fetches", status.stdout)
        assert granted is not None, status.stdout + status.stderr
        assert int(granted.group(1)) >= len(names) * 4
