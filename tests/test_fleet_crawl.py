"""Running a fleet: ``scrapy frontier <site>`` acting on real workers of one Redis crawl, judged
from the test site's record of requests. A blocked host gets no further request from any
worker; pause holds every worker and resume releases them; the status report agrees with what
the server saw."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crawling import finish_crawl, normalized, scrapy_frontier
from tests.redis_support import RedisServer, redis_server  # noqa: F401
from tests.test_redis_crawl import HOSTS, check_polite, site, start_workers, wait_until

pytestmark = pytest.mark.integration

EXTRA = {
    "TUNING": {"heartbeat_interval": 0.5},
}
ACTS_WITHIN = 1.0  # seconds: "acts on every worker within a second"


def frontier_cmd(
    redis: RedisServer, key: str, *args: str, **extra: Any
) -> subprocess.CompletedProcess[str]:
    settings = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
        "FRONTIER_REDIS_KEY": key,
        **extra,
    }
    return scrapy_frontier(settings, *args)


def gate_host(server: Any, host: str, after: int) -> threading.Event:
    """Hold every page request to ``host`` past its first ``after`` until the returned event
    is set (or the server stops): the host cannot be finished before the test acts on it."""
    gate, lock, seen = threading.Event(), threading.Lock(), [0]
    respond = server.respond

    def gated(handler: Any, spec: Any, default: Any) -> Any:
        if spec.address == host and not handler.path.startswith("/robots.txt"):
            with lock:
                seen[0] += 1
                held = seen[0] > after
            while held and not gate.wait(0.05) and not server.stopping.is_set():
                pass
        return respond(handler, spec, default)

    server.respond = gated
    return gate


def test_a_blocked_host_gets_no_further_request_from_any_worker(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Event-based: the target's fourth page is held at the server until every worker has
    said in its log that the host is blocked, so the host can neither finish before the
    block lands (a loaded machine) nor be asked again after it. The host is given as the
    progress line and the URLs show it, with its port: the real host is blocked."""
    target = HOSTS[2]
    with site(pages=20) as server:
        gate = gate_host(server, target, after=3)
        procs, dirs, key = start_workers(tmp_path, server, redis_server, 2, **EXTRA)
        wait_until(lambda: sum(r.host == target for r in server.records) >= 3, timeout=60)
        done = frontier_cmd(redis_server, key, "block", f"{target}:{server.port}")
        heard = f"host {target} blocked"  # "Operator: ..." or, for a late starter, "(in force)"

        def logged(d: Path) -> str:
            path = d / "crawl.log"
            return path.read_text() if path.exists() else ""

        wait_until(lambda: all(heard in logged(d) for d in dirs), timeout=60)
        released_at = time.monotonic()
        gate.set()
        results = [finish_crawl(p, d, timeout=120) for p, d in zip(procs, dirs, strict=True)]
        records = server.records
        status = frontier_cmd(redis_server, key, "--json")
    assert done.returncode == 0, done.stderr
    assert f"blocked host {target}:" in done.stdout, done.stdout
    assert f"given as {target}:{server.port}" in done.stdout
    dropped = int(re.search(r"blocked host \S+: (\d+) queued", done.stdout).group(1))
    for r in results:
        assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
    late = [r for r in records if r.host == target and r.start > released_at]
    assert late == [], late
    before = [r for r in records if r.host == target]
    wanted = {u for u in server.graph.reachable(server.seeds()) if f"//{target}:" in u}
    assert dropped > 0 and len(before) < len(wanted)  # it was cut, and its queue dropped
    # the other hosts are crawled to the end, politely, each page once
    fetched = normalized(records)
    assert not [u for u, n in Counter(fetched).items() if n > 1]
    check_polite(records)
    report = json.loads(status.stdout)
    assert report["controls"]["blocked_hosts"] == [target]
    assert report["hosts"]["blocked"] == 1
    assert report["dropped"]["host_blocked"] >= dropped


def test_pause_holds_every_worker_and_resume_releases_them(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with site(pages=14) as server:
        procs, dirs, key = start_workers(tmp_path, server, redis_server, 2, **EXTRA)
        wait_until(lambda: len(server.records) >= 10, timeout=60)
        paused = frontier_cmd(redis_server, key, "pause")
        paused_at = time.monotonic()
        time.sleep(ACTS_WITHIN + 3.0)  # longer than the refresh interval: no drift in
        held = [r for r in server.records if r.start > paused_at + ACTS_WITHIN]
        alive = [p.poll() is None for p in procs]
        status = json.loads(frontier_cmd(redis_server, key, "--json").stdout)
        resumed = frontier_cmd(redis_server, key, "resume")
        resumed_at = time.monotonic()
        results = [finish_crawl(p, d, timeout=120) for p, d in zip(procs, dirs, strict=True)]
        records = server.records
        wanted = server.graph.reachable(server.seeds())
    assert paused.returncode == 0 and resumed.returncode == 0, paused.stderr + resumed.stderr
    assert held == [], held  # no worker sent a request while paused
    assert alive == [True, True]  # ... and none took the pause for the end of the crawl
    assert status["halt"] == "paused" and status["controls"]["paused"]
    assert status["queued"] > 0 and {w["state"] for w in status["workers"]} == {"paused"}
    after = [r for r in records if r.start > resumed_at]
    assert after, "nothing was fetched after resume"
    for r in results:
        assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
    fetched = normalized(records)
    allowed = {u for u in wanted if "/private/" not in u}
    assert allowed <= set(fetched), sorted(allowed - set(fetched))[:5]
    assert not [u for u, n in Counter(fetched).items() if n > 1]
    check_polite(records)


def test_frontier_status_agrees_with_the_servers_record(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with site(pages=10) as server:
        procs, dirs, key = start_workers(tmp_path, server, redis_server, 2, **EXTRA)
        results = [finish_crawl(p, d, timeout=120) for p, d in zip(procs, dirs, strict=True)]
        records = server.records
        status = frontier_cmd(redis_server, key, "--json", "--top", "20")
        text = frontier_cmd(redis_server, key)
    for r in results:
        assert r.returncode == 0 and r.stats["finish_reason"] == "finished", r.log[-3000:]
    assert status.returncode == 0, status.stderr
    report: dict[str, Any] = json.loads(status.stdout)
    pages = [r for r in records if r.path != "/robots.txt"]
    by_status = Counter(r.status for r in pages)
    totals = report["totals"]
    # the merged counters of both workers are the server's count of answers, by status
    assert {
        int(k.rsplit("/", 1)[1]): v for k, v in totals.items() if k.startswith("pages/status/")
    } == dict(by_status)
    assert totals["robotstxt/request_count"] == len(HOSTS)
    assert report["queued"] == 0 and report["inbox"] == 0  # nothing queued, leased or mailed
    # fetches per host, robots.txt included, as the server counted them
    per_host = Counter(r.host for r in records)
    assert {b["host"]: b["fetches"] for b in report["busiest_hosts"]} == dict(per_host)
    # both workers beat, both ended, their pages add up to the whole crawl
    workers = report["workers"]
    assert len(workers) == 2 and {w["state"] for w in workers} == {"ended"}
    assert sum(w["pages"] for w in workers) == totals["pages/ok"]
    assert any("Whole crawl" in r.log for r in results)  # the last worker's summary
    assert "workers (2):" in text.stdout and "ended" in text.stdout
