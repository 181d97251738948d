"""DNS: names resolved by the crawl's own non-blocking resolver against a real DNS server
(``devsite.dnsserver``, Twisted's own, on loopback), cached by TTL, shared by a fleet through a
real Redis, and a failing name holding its host instead of failing its pages one by one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from twisted.internet.error import DNSLookupError
from twisted.names import dns

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.dns import RedisDnsCache
from crawler.download.dns import follow_chain
from crawler.download.robots_request import robots_request
from crawler.middlewares.dns import DnsMiddleware
from crawler.net.dns import DnsAnswer, DnsCache, TtlBounds
from devsite.named import NamedSites
from tests.crawling import loopback_settings, run_crawl
from tests.dns_support import PROJECT, DnsServer, dns_server, wait_for
from tests.redis_support import RedisServer, redis_server  # noqa: F401

ZONE: dict[str, Any] = {
    "names": {
        "a.test": {"a": "127.0.0.1", "ttl": 1},
        "b.test": {"cname": "c.test", "ttl": 30},
        "c.test": {"cname": "a.test", "ttl": 20},
        "bad.test": {"servfail": True},
        "slow.test": {"timeout": True},
    },
    "suffixes": {".farm.test": {"a": "127.0.0.1", "ttl": 300}},
}


# --- the cache, alone -------------------------------------------------------------------------


def test_answers_are_kept_for_their_ttl_within_the_bounds() -> None:
    now = [1000.0]
    cache = DnsCache(TtlBounds(minimum=10, maximum=100, negative=5), size=2, clock=lambda: now[0])
    cache.put("short.test", DnsAnswer("192.0.2.1", ttl=0))  # a CDN's 0 s: kept 10 s
    cache.put("long.test", DnsAnswer("192.0.2.2", ttl=86400))  # a day: kept 100 s
    assert cache.expires_in("short.test") == 10
    assert cache.expires_in("long.test") == 100
    now[0] += 11
    assert cache.get("short.test") is None
    assert cache.get("long.test") == DnsAnswer("192.0.2.2", ttl=86400)
    cache.put("gone.test", DnsAnswer(error="nxdomain"))
    assert cache.expires_in("gone.test") == 5
    cache.put("third.test", DnsAnswer("192.0.2.3", ttl=50))  # size 2: the oldest goes
    assert cache.get("long.test") is None and len(cache) == 2


def test_a_cname_chain_gives_its_address_and_its_smallest_ttl() -> None:
    records = [
        dns.RRHeader("www.x.test", dns.CNAME, dns.IN, 300, dns.Record_CNAME("edge.cdn.test")),
        dns.RRHeader("edge.cdn.test", dns.CNAME, dns.IN, 60, dns.Record_CNAME("e1.cdn.test")),
        dns.RRHeader("e1.cdn.test", dns.A, dns.IN, 20, dns.Record_A("192.0.2.7")),
    ]
    assert follow_chain("WWW.x.test.", records) == ("192.0.2.7", 20.0, "")
    assert follow_chain("www.x.test", records[:2]) == ("", 60.0, "e1.cdn.test")
    loop = [
        dns.RRHeader("l1.test", dns.CNAME, dns.IN, 9, dns.Record_CNAME("l2.test")),
        dns.RRHeader("l2.test", dns.CNAME, dns.IN, 9, dns.Record_CNAME("l1.test")),
    ]
    assert follow_chain("l1.test", loop)[0] == ""


# --- the service against a real DNS server ----------------------------------------------------


def probe(tmp_path: Path, server: DnsServer, rounds: list[list[str]], **spec: Any) -> Any:
    spec_file = tmp_path / f"probe-{time.monotonic_ns()}.json"
    spec_file.write_text(
        json.dumps({"server": server.address, "rounds": rounds, **spec}), encoding="utf-8"
    )
    return subprocess.Popen(
        [sys.executable, "-m", "tests.dns_probe", str(spec_file)],
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def probe_result(proc: subprocess.Popen[str]) -> Any:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert "error" not in result, result
    return result


def test_one_query_per_name_however_many_requests_ask(tmp_path: Path) -> None:
    with dns_server(tmp_path / "dns", {**ZONE, "latency": 0.1}) as server:
        result = probe_result(probe(tmp_path, server, [["x.farm.test"] * 50 + ["y.farm.test"]]))
        assert {tuple(a) for a in result["rounds"][0]} == {("127.0.0.1", 300.0, "")}
        assert server.queries() == {"x.farm.test": 1, "y.farm.test": 1}
        assert result["stats"]["dns/lookups"] == 2
        assert result["stats"]["dns/coalesced"] == 49


def test_new_hosts_are_looked_up_ahead_within_bounds(tmp_path: Path) -> None:
    names = [f"p{i}.farm.test" for i in range(20)]
    with dns_server(tmp_path / "dns", {**ZONE, "latency": 0.1}) as server:
        result = probe_result(
            probe(tmp_path, server, [names], prefetch=names, concurrency=10, prefetch_max=10)
        )
        # 5 looked up at once (half the concurrency), 10 waiting, the 5 past the bound left to
        # their fetch: when the fetches ask, 15 answers are there already
        assert result["stats"]["dns/prefetched"] == 15
        assert result["stats"]["dns/prefetch_skipped"] == 5
        assert result["stats"]["dns/cache_hits"] == 15
        assert result["answered"][:15] == names[:15]  # in the order the hosts were found
        assert server.queries() == {n: 1 for n in names}


def test_chains_failures_and_negative_caching(tmp_path: Path) -> None:
    with dns_server(tmp_path / "dns", ZONE) as server:
        names = ["b.test", "bad.test", "slow.test", "nope.test"]
        settings = {"DNS_TIMEOUT": 0.5, "TUNING": {"dns_min_ttl": 0, "dns_negative_ttl": 60}}
        result = probe_result(probe(tmp_path, server, [names, names], settings=settings))
        first, second = result["rounds"]
        assert first == [
            ["127.0.0.1", 1.0, ""],  # b -> c -> a: the smallest TTL of the chain
            ["", 0.0, "servfail"],
            ["", 0.0, "timeout"],
            ["", 0.0, "nxdomain"],
        ]
        assert second == first  # from the cache, failures too
        asked = server.queries()
        assert asked["bad.test"] == 1 and asked["nope.test"] == 1
        assert result["stats"]["dns/cache_hits"] >= 3  # b.test's 1 s TTL may have run out


def test_an_expired_answer_is_asked_again_and_a_move_is_followed(tmp_path: Path) -> None:
    root = tmp_path / "dns"
    with dns_server(root, ZONE) as server:
        proc = probe(
            tmp_path,
            server,
            [["a.test"], ["a.test"]],
            pause=2.5,
            settings={"TUNING": {"dns_min_ttl": 0}},
        )
        wait_for(lambda: server.queries()["a.test"] == 1, "the first lookup")
        moved = json.loads((root / "zone.json").read_text())
        moved["names"]["a.test"]["a"] = "127.0.0.9"
        (root / "zone.json").write_text(json.dumps(moved))
        os.utime(root / "zone.json", (time.time() + 5, time.time() + 5))
        result = probe_result(proc)
        assert result["rounds"][0][0][0] == "127.0.0.1"
        assert result["rounds"][1][0][0] == "127.0.0.9"
        assert server.queries()["a.test"] == 2


def test_a_fleet_looks_each_name_up_once(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    names = [f"h{i}.farm.test" for i in range(40)]
    with dns_server(tmp_path / "dns", {**ZONE, "latency": 0.2}) as server:
        url = f"redis://127.0.0.1:{redis_server.port}/0"
        workers = [probe(tmp_path, server, [names], redis_url=url) for _ in range(3)]
        results = [probe_result(w) for w in workers]
        assert all(r["rounds"][0] == [["127.0.0.1", 300.0, ""]] * 40 for r in results)
        assert server.queries() == {n: 1 for n in names}
        assert sum(r["stats"].get("dns/lookups", 0) for r in results) == 40
        assert sum(r["stats"].get("dns/shared_hits", 0) for r in results) == 80


def test_a_claim_outlives_the_wait_for_a_lookup_slot(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A worker's claim on a name lasts a DNS_TIMEOUT unless renewed, and its lookup may wait
    for a slot longer than that (all CONCURRENCY busy on a loaded box): renewed while it
    waits, the claim keeps another worker waiting for its answer rather than asking too."""
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    with dns_server(tmp_path / "dns", ZONE) as server:
        spec = {"held": "w.farm.test", "concurrency": 1, "settings": {"DNS_TIMEOUT": 2.0}}
        result = probe_result(probe(tmp_path, server, [], redis_url=url, **spec))
        assert result["claim_outlived_its_term"]
        assert result["rounds"] == [[["127.0.0.1", 300.0, ""]] * 2]
        assert server.queries() == {"w.farm.test": 1}
        assert result["stats"]["dns/lookups"] == 1
        assert result["second_stats"] == {"dns/shared_hits": 1}


def test_a_claim_finds_an_answer_shared_since_the_last_look(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Looking for the fleet's answer and claiming the name are one step: an answer another
    worker shared in between is found, not asked for again."""
    settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0"})
    first, second = (RedisDnsCache(redis_client(settings), "dnsclaim") for _ in range(2))
    try:
        assert first.claim("x.test", 10.0) is True
        assert second.claim("x.test", 10.0) is False  # the first worker is at it
        first.put("x.test", DnsAnswer("127.0.0.1", 300.0), 300.0)
        found = second.claim("x.test", 10.0)
        assert isinstance(found, tuple) and found[0] == DnsAnswer("127.0.0.1", 300.0)
        assert 0 < found[1] <= 300
    finally:
        first.close()
        second.close()


# --- a crawl ------------------------------------------------------------------------------------


def test_a_crawl_resolves_each_name_once_and_fetches_every_page(tmp_path: Path) -> None:
    names = [f"s{i}.farm.test" for i in range(12)]
    with NamedSites(names, pages=3) as sites, dns_server(tmp_path / "dns", ZONE) as server:
        result = run_crawl(
            tmp_path,
            seeds=[sites.url(n) for n in names],
            settings=loopback_settings(DNS_SERVERS=server.address, CLOSESPIDER_TIMEOUT=60),
        )
        assert result.returncode == 0, result.log[-3000:]
        fetched = {(v.name, v.path) for v in sites.visits}
        for name in names:
            assert {(name, "/"), (name, "/p/0.html"), (name, "/p/2.html")} <= fetched
        assert server.queries() == {n: 1 for n in names}
        assert result.stats["dns/lookups"] == len(names)
        assert f"DNS: {len(names)} lookups" in result.log  # the end summary says so


def test_a_name_that_fails_holds_its_host_then_gives_up(tmp_path: Path) -> None:
    names = [f"s{i}.farm.test" for i in range(3)]
    with NamedSites(names, pages=2) as sites, dns_server(tmp_path / "dns", ZONE) as server:
        result = run_crawl(
            tmp_path,
            seeds=[*(sites.url(n) for n in names), f"http://bad.test:{sites.port}/"],
            settings=loopback_settings(
                DNS_SERVERS=server.address,
                ROBOTSTXT_ENABLED=False,
                TUNING={"dns_negative_ttl": 0.3, "dns_hold_times": 2},
            ),
        )
        assert result.returncode == 0, result.log[-3000:]
        assert "Host bad.test: DNS servfail; holding it" in result.log
        assert result.stats["dns/held"] == 2
        assert result.stats["dns/gave_up"] == 1
        assert server.queries()["bad.test"] == 3  # one lookup per hold, not one per retry
        assert {(n, "/p/1.html") for n in names} <= {(v.name, v.path) for v in sites.visits}


def test_a_name_on_a_private_address_is_refused_by_default(tmp_path: Path) -> None:
    with NamedSites(["inside.farm.test"]) as sites, dns_server(tmp_path / "dns", ZONE) as server:
        result = run_crawl(
            tmp_path,
            seeds=[sites.url("inside.farm.test")],
            settings={"DNS_SERVERS": server.address, "FRONTIER_MIN_DELAY": 0.05},
        )
        assert sites.visits == [], result.log[-3000:]
        assert result.stats["address_safety/refused/private_address"] >= 1
        assert server.queries()["inside.farm.test"] == 1


def test_robots_txt_is_told_by_the_request_not_by_its_path() -> None:
    """A name that does not resolve for a robots.txt redirect hop (any path) is left to the
    robots.txt middleware, which holds the host its own way; a page that happens to be at
    /robots.txt holds its host like any page."""
    middleware = DnsMiddleware.from_crawler(get_crawler())
    hop = robots_request("http://a.test", "http://elsewhere.test/rules.txt", 1)
    assert middleware.process_exception(hop, DNSLookupError("no")) is None
    assert middleware.holds == {}
    middleware.process_exception(Request("http://b.test/robots.txt"), DNSLookupError("no"))
    assert middleware.holds == {"b.test": 1}
