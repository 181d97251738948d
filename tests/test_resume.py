"""A crawl with a JOBDIR survives Ctrl-C and kill -9: a rerun goes on where it stopped."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from devsite import HostSpec, SiteServer, build_site
from tests.crawling import finish_crawl, normalized, per_host, run_crawl, start_crawl

pytestmark = pytest.mark.integration

HOSTS = [HostSpec(f"127.0.0.{i}", pages=20) for i in (2, 3, 4)]


def crawl_settings(jobdir):
    return {
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.08,
        "FRONTIER_DELAY_FACTOR": 0,
        "JOBDIR": jobdir,
    }


def stop_after(server: SiteServer, proc, pages: int, how: int) -> None:
    """Send ``how`` to the crawl once the server has answered ``pages`` requests."""
    deadline = time.monotonic() + 60
    while len(server.records) < pages:
        assert proc.poll() is None, "the crawl ended before it could be stopped"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(how)


def test_ctrl_c_and_a_rerun_lose_nothing_and_fetch_nothing_twice(tmp_path):
    graph = build_site(HOSTS, links_per_page=4, cross_host_links=1, extras=False)
    jobdir = tmp_path / "job"
    with SiteServer(graph) as server:
        seeds = server.seeds()
        proc = start_crawl(tmp_path, seeds=seeds, settings=crawl_settings(jobdir))
        stop_after(server, proc, 15, signal.SIGINT)
        first = finish_crawl(proc, tmp_path)
        assert first.stats["finish_reason"] == "shutdown", first.log[-2000:]
        assert "run the crawl again with the same JOBDIR" in first.log
        before = len(normalized(server.records))
        assert before < len(graph.reachable(seeds))

        second = run_crawl(tmp_path, seeds=seeds, settings=crawl_settings(jobdir))
        assert second.returncode == 0, second.log[-2000:]
        assert second.stats["finish_reason"] == "finished"
        assert "Resuming the frontier" in second.log
        fetched = normalized(server.records)
    assert set(fetched) == graph.reachable(seeds)
    assert [u for u, n in Counter(fetched).items() if n > 1] == []
    assert len(fetched) - before == len(second.items)


def test_kill_9_and_a_rerun_refetch_only_what_was_in_flight(tmp_path):
    graph = build_site(HOSTS, links_per_page=4, cross_host_links=1, extras=False)
    jobdir = tmp_path / "job"
    with SiteServer(graph) as server:
        seeds = server.seeds()
        proc = start_crawl(tmp_path, seeds=seeds, settings=crawl_settings(jobdir))
        stop_after(server, proc, 25, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        before = server.records

        second = run_crawl(tmp_path, seeds=seeds, settings=crawl_settings(jobdir))
        assert second.returncode == 0, second.log[-2000:]
        assert "Resuming the frontier" in second.log
        records = server.records
    fetched = normalized(records)
    assert set(fetched) == graph.reachable(seeds)
    twice = {u for u, n in Counter(fetched).items() if n > 1}
    # Only requests in flight at the kill come again: at most one per host (one slot each),
    # and that host's last request before the kill.
    assert len(twice) <= len(HOSTS), twice
    pages = [r for r in before if r.path != "/robots.txt"]
    in_flight = set(normalized([recs[-1] for recs in per_host(pages).values()]))
    assert twice <= in_flight, (sorted(twice - in_flight), sorted(in_flight))
