"""Real crawls of a real multi-host HTTP server on loopback, judged from the server's records."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from devsite import HostSpec, SiteServer, build_site
from tests.crawling import normalized, per_host, record_url, run_crawl, write_site

pytestmark = pytest.mark.integration

MIN_DELAY = 0.15
FACTOR = 2.0


def test_polite_complete_crawl_of_several_hosts(tmp_path):
    specs = [
        HostSpec("127.0.0.2", pages=12, delay=0.0),
        HostSpec("127.0.0.3", pages=12, delay=0.05),
        HostSpec("127.0.0.4", pages=8, delay=0.12),  # slow: its delay grows past the minimum
    ]
    graph = build_site(specs, links_per_page=4, cross_host_links=1)
    sites = tmp_path / "sites"
    write_site(
        sites,
        "testsite",
        'allow_private_addresses = true\n'
        '[scope]\nhosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]\n'
        '[urls]\ndeny = ["/private/"]\nmax_depth = 10\n'
        f"[politeness]\nmin_delay = {MIN_DELAY}\ndelay_factor = {FACTOR}\n",
    )
    with SiteServer(graph) as server:
        result = run_crawl(tmp_path, "testsite", seeds=server.seeds()[:1], sites_dir=sites)
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["finish_reason"] == "finished"

    fetched = normalized(records)
    wanted = graph.reachable(server.seeds()[:1])
    assert len(wanted) == 12 + 12 + 8 + 3
    assert wanted <= set(fetched), sorted(wanted - set(fetched))[:5]

    twice = [url for url, n in Counter(fetched).items() if n > 1]
    assert not twice, twice

    assert not [u for u in fetched if "/private/" in u]
    trap = Counter(u.split("/trap/")[0] for u in fetched if "/trap/" in u)
    assert set(trap.values()) == {3}  # /trap/a/a/a/a/ repeats a segment a 4th time: a trap
    calendar = Counter(u.split("/cal/")[0] for u in fetched if "/cal/" in u)
    assert 0 < max(calendar.values()) <= 10  # the endless calendar is cut by max_depth

    for host, recs in per_host(records).items():
        assert server.max_concurrency(host) == 1, host
        for prev, nxt in pairwise(recs):
            took = prev.end - prev.start
            wanted_gap = max(MIN_DELAY, FACTOR * took)
            gap = nxt.start - prev.end
            assert gap >= wanted_gap - 0.005, (host, record_url(prev), record_url(nxt), gap)
    # (that the engine is woken when a host comes due, not at its heartbeat: tests/test_waker.py)

    pages = [i for i in result.items if i["url"].endswith(".html") and "/p/" in i["url"]]
    assert len(pages) == 12 + 12 + 8
    assert result.stats["frontier/rejected/denied"] >= 1
    assert result.stats["frontier/rejected/repeated_segments"] >= 1
    # every page was acknowledged by the signals as it left the pipelines, none by the
    # renewal's safety net, and no lease expired
    assert "frontier/acked_late" not in result.stats
    assert "frontier/leases_expired" not in result.stats


def test_bad_hosts_and_bad_urls_do_not_stop_the_crawl(tmp_path):
    specs = [
        HostSpec("127.0.0.2", pages=4),
        HostSpec("127.0.0.3", mode="error"),
        HostSpec("127.0.0.4", mode="hang"),
        HostSpec("127.0.0.5", mode="refuse"),
    ]
    graph = build_site(specs, cross_host_links=0)
    with SiteServer(graph) as server:
        seeds = [*server.seeds(), "http://[::1", "ftp://127.0.0.2/x", "not a url"]
        result = run_crawl(
            tmp_path,
            seeds=seeds,
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_MIN_DELAY": 0.05,
                "DOWNLOAD_TIMEOUT": 1,
                # robots.txt of the failing hosts: no retry rounds
                "TUNING": {"robots_retry_times": 0},
            },
            timeout=90,
        )
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["finish_reason"] == "finished"
    ok_pages = {u for u in normalized(records) if "127.0.0.2" in u}
    assert graph.reachable([server.seeds()[0]]) <= ok_pages
    # each bad seed got one clear line
    for bad in ("http://[::1", "ftp://127.0.0.2/x", "not a url"):
        assert bad in result.log
    assert result.stats.get("frontier/fetch/failed", 0) >= 2  # hang and refuse
    assert result.stats["downloader/response_status_count/500"] >= 1
    # retries and 500s that yield no item were acknowledged at once, not by the safety net
    assert "frontier/acked_late" not in result.stats


def test_private_addresses_are_refused_by_default(tmp_path):
    graph = build_site([HostSpec("127.0.0.2", pages=2)])
    with SiteServer(graph) as server:
        result = run_crawl(tmp_path, seeds=server.seeds())
        records = server.records
    # every request refused: nothing fetched because of errors, exit status 1
    assert result.returncode == 1, result.log[-3000:]
    assert records == []
    assert result.stats["address_safety/refused/private_address"] >= 1  # robots.txt, the seed
    assert "loopback address" in result.log


def test_a_seed_that_redirects_brings_its_target_host_into_scope(tmp_path):
    specs = [
        HostSpec("127.0.0.6", mode="redirect", redirect_to="127.0.0.7"),
        HostSpec("127.0.0.7", pages=3),
        HostSpec("127.0.0.8", pages=3),  # linked from .7 but never a seed: out of scope
    ]
    graph = build_site(specs, cross_host_links=1, extras=False)
    with SiteServer(graph) as server:
        result = run_crawl(
            tmp_path,
            seeds=[server.seeds()[0]],
            settings={"ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0.05},
        )
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    hosts = Counter(r.host for r in records if r.path != "/robots.txt")
    assert hosts["127.0.0.6"] == 1
    assert hosts["127.0.0.7"] == 4
    assert hosts["127.0.0.8"] == 0
    assert result.stats["frontier/rejected/out_of_scope"] >= 1


def test_an_open_scope_follows_links_to_hosts_that_were_no_seeds(tmp_path):
    """``[scope] open = true``: the crawl goes wherever links lead (here a host no seed named,
    two hops away), each host still reading its robots.txt first; the seeds' hosts are not
    written into a scope (nothing to share with other workers)."""
    specs = [HostSpec("127.0.0.6", pages=3), HostSpec("127.0.0.7", pages=3),
             HostSpec("127.0.0.8", pages=3)]  # fmt: skip
    graph = build_site(specs, cross_host_links=1, extras=False)
    sites = tmp_path / "sites"
    sites.mkdir()
    (sites / "open.toml").write_text(
        'name = "open"\nallow_private_addresses = true\n[scope]\nopen = true\n'
    )
    with SiteServer(graph) as server:
        result = run_crawl(
            tmp_path,
            "open",
            seeds=[server.seeds()[0]],
            sites_dir=sites,
            settings={"FRONTIER_MIN_DELAY": 0.05},
        )
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    hosts = Counter(r.host for r in records if r.path != "/robots.txt")
    assert hosts == {"127.0.0.6": 4, "127.0.0.7": 4, "127.0.0.8": 4}, hosts
    robots = Counter(r.host for r in records if r.path == "/robots.txt")
    assert robots == {h: 1 for h in hosts}
    assert "frontier/rejected/out_of_scope" not in result.stats


def test_a_host_with_two_slots_never_gets_a_third_request(tmp_path):
    graph = build_site([HostSpec("127.0.0.2", pages=16, delay=0.15)], links_per_page=6,
                       extras=False)
    with SiteServer(graph) as server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_HOST_CONCURRENCY": 2,
                "FRONTIER_MIN_DELAY": 0.05,
                "FRONTIER_DELAY_FACTOR": 0,
            },
        )
        fetched = normalized(server.records)
        most = server.max_concurrency("127.0.0.2")
    assert result.returncode == 0, result.log[-3000:]
    assert set(fetched) == graph.reachable(server.seeds())
    assert most == 2  # both slots were used, never a third
