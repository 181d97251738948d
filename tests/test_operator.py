"""What an operator meets steering a Redis crawl with ``scrapy frontier``, each reproduced:
one name for a host everywhere (a host copied with its port blocks the real host; an unknown
host is said to be unknown, blocked in advance, with a did-you-mean); pause and resume leave a
line in the worker's log and show the worker "paused"; a deadline ends the crawl with
``finish_reason`` ``deadline``, a passed deadline reads as passed, and a Redis worker that ends
with URLs queued points at the shared frontier, not at a JOBDIR."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crawler.backends.redis.controls import CrawlControls, host_name
from crawler.commands.crawl import _redis_url_alone
from crawler.commands.frontier_report import closest_hosts, format_report
from crawler.frontier import Entry
from tests.crawling import finish_crawl
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_fleet_crawl import EXTRA, frontier_cmd
from tests.test_frontier_partitioned import partitioned
from tests.test_redis_crawl import site, start_workers, wait_until


def test_a_host_is_named_without_its_port_or_url() -> None:
    assert host_name("127.0.1.3:8080") == "127.0.1.3"
    assert host_name("http://Example.org:8080/a/b?c") == "example.org"
    assert host_name("example.org.") == "example.org"
    assert host_name("[::1]:8080") == "::1"
    assert closest_hosts("127.0.1.3", [["127.0.1.2", "127.0.1.3"]]) == (True, [])
    known, close = closest_hosts("exmple.org", [["example.org", "other.net"]])
    assert not known and close == ["example.org"]


def test_blocking_a_host_given_with_its_port_blocks_the_real_host(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key, client = fresh_key(), redis_server.client()
    f = partitioned(client, key, FakeClock())
    f.add_many([Entry(f"http://127.0.1.3:8080/p{i}", "127.0.1.3") for i in range(4)])
    operator = CrawlControls(client, key)
    operator.block("127.0.1.3:8080", wait=0)
    f.beat()
    assert operator.controls()["blocked_hosts"] == ["127.0.1.3"]
    assert operator.controls()["dropped"] == {"h:127.0.1.3": 4}
    assert f.next() is None
    assert operator.unblock("http://127.0.1.3:8080/") == 1


@pytest.mark.integration
def test_an_operator_steering_a_redis_crawl(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    with site(pages=40) as server:
        (proc,), (folder,), key = start_workers(tmp_path, server, redis_server, 1, **EXTRA)
        wait_until(lambda: len(server.records) >= 10, timeout=60)

        def status() -> dict:
            return json.loads(frontier_cmd(redis_server, key, "--json").stdout)

        # a host the crawl never met: said so, blocked in advance, with a did-you-mean
        unknown = frontier_cmd(redis_server, key, "block", "127.0.0.20:8080")
        assert "127.0.0.20 is not one this crawl has met; did you mean 127.0.0.2" in (
            unknown.stdout
        ), unknown.stdout
        assert "blocked in advance" in unknown.stdout
        # pause: the worker shows as paused, and says so in its log
        assert frontier_cmd(redis_server, key, "pause").returncode == 0
        wait_until(lambda: [w["state"] for w in status()["workers"]] == ["paused"], timeout=60)
        log = folder / "crawl.log"
        wait_until(lambda: "Operator: crawl paused" in log.read_text(), timeout=60)
        assert frontier_cmd(redis_server, key, "resume").returncode == 0
        wait_until(lambda: "Operator: crawl resumed" in log.read_text(), timeout=60)
        # a deadline: the crawl ends with that reason, URLs left in the shared frontier
        assert frontier_cmd(redis_server, key, "deadline", "+0.5s").returncode == 0
        result = finish_crawl(proc, folder)
        text = frontier_cmd(redis_server, key).stdout
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["finish_reason"] == "deadline", result.log[-3000:]
    assert "Crawl web ended (deadline)" in result.log
    assert "Operator: deadline set: the crawl ends at" in result.log
    assert "Operator: host 127.0.0.20 blocked" in result.log
    assert "in None" not in result.log and "JOBDIR" not in result.log
    assert "URLs stay queued in the shared frontier" in result.log
    assert "resume: start a worker with the same settings" in result.log
    assert "(passed " in text and "(in 0.0s)" not in text
    report = status()
    assert "deadline" in format_report(report)


def test_redis_url_without_the_redis_backend_is_refused_not_a_silent_lone_crawl(
    tmp_path: Path,
) -> None:
    from tests.test_crawl_command import refusals, scrapy_crawl

    out = scrapy_crawl(tmp_path, "-sREDIS_URL=redis://127.0.0.1:9/0")
    assert out.returncode == 2, out.stderr
    (line,) = refusals(out)
    assert "REDIS_URL is given but FRONTIER_BACKEND is not" in line
    assert "-s FRONTIER_BACKEND=redis" in line
    # chosen on purpose, it is not refused
    assert _redis_url_alone({}, ["REDIS_URL", "FRONTIER_BACKEND"]) == ""  # type: ignore[arg-type]


def _worker_id_in_a_new_process(jobdir: Path) -> str:
    import subprocess
    import sys

    from tests.crawling import PROJECT

    code = "import sys; from crawler.report.worker import worker_id; print(worker_id(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(jobdir)], cwd=PROJECT,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_process_stopped_and_resumed_from_its_jobdir_is_one_worker(tmp_path: Path) -> None:
    from crawler.report.worker import worker_id

    jobdir = tmp_path / "job"
    first = _worker_id_in_a_new_process(jobdir)
    assert _worker_id_in_a_new_process(jobdir) == first  # resumed: the same worker
    # while a process runs on the JOBDIR, another one started on it is not taken for it
    assert worker_id(jobdir) == first
    assert _worker_id_in_a_new_process(jobdir) != first
    # without a JOBDIR a run cannot be resumed: each is its own worker; a given name wins
    assert _worker_id_in_a_new_process(tmp_path / "other") != first
    assert worker_id(jobdir, "w7") == "w7"


@pytest.mark.integration
def test_a_crawl_starts_with_a_few_lines_and_a_404_is_not_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    from tests.crawling import loopback_settings, run_crawl

    with site(pages=3) as server:
        seeds = [*server.seeds(), server.seeds()[0] + "missing-page"]
        result = run_crawl(tmp_path, seeds=seeds, settings=loopback_settings(LOG_LEVEL="INFO"))
    assert result.returncode == 0, result.log[-3000:]
    log = (tmp_path / "crawl.log").read_text()
    lines = log.splitlines()
    opened = next(i for i, line in enumerate(lines) if "Spider opened" in line)
    assert opened <= 3, "\n".join(lines[:opened + 1])  # was ~75 lines of Scrapy's dump
    assert "Ignoring response" not in log and "Overridden settings" not in log
    assert "missing-page (404)" in log  # the broken link is in the summary
    progress = [line for line in lines if "Crawled " in line and "pages/s" in line]
    assert progress  # the progress line
    # one name for a host: the progress line and the summary name hosts as the frontier and
    # `scrapy frontier` do, without the port
    port = server.port
    assert re.search(r"busiest hosts: 127\.0\.0\.\d+ \d+ pages", log)
    assert f":{port} " not in progress[-1] and f":{port} " not in log.split("busiest hosts:")[1]


def test_the_heartbeats_show_the_controls_the_command_set(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    from crawler.backends.redis.keys import CrawlKeys
    from crawler.backends.redis.status import Fleet

    key = fresh_key()

    def act(*args: str) -> None:
        done = frontier_cmd(redis_server, key, *args)
        assert done.returncode == 0, done.stderr

    act("pause")
    act("block", "spam.example:8080")
    fleet = Fleet(redis_server.client(), key, "w1")
    fleet.beat({}, {"state": "running"})
    assert fleet.controls.get("paused") == "1" and fleet.blocked == ["h:spam.example"]
    assert fleet.workers()["w1"]["state"] == "paused"
    act("resume")
    fleet.beat({}, {"state": "running"})
    assert "paused" not in fleet.controls and fleet.workers()["w1"]["state"] == "running"
    assert CrawlKeys(key).controls.startswith("{" + key + "}")


def test_a_worker_started_again_keeps_its_start_and_every_counter_merges(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A heartbeat is stamped with Redis's clock; a worker started again under its id (its
    JOBDIR kept) keeps the start of its first beat; and a float counter whose change prints
    without a decimal point (1e-05) merges like any other."""
    from crawler.backends.redis.status import Fleet

    key = fresh_key()
    client = redis_server.client()
    started = Fleet(client, key, "w1").beat({"elapsed": 1e-05, "pages/ok": 2}, {"state": "x"})
    again = Fleet(client, key, "w1")
    now = again.beat({"elapsed": 0.5, "pages/ok": 1}, {"state": "running"})
    beat = again.workers()["w1"]
    assert beat["started"] == started and beat["beat"] == now >= started
    assert again.totals() == {"elapsed": pytest.approx(0.50001), "pages/ok": 3}
    client.close()
