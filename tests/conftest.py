"""Session guard: the test suite never writes into the user's checkout.

Tests run from the checkout, and a crawl without ``INDEX_PATH`` (or a crawl database without
``CRAWLDB_PATH``) writes ``crawl-index.sqlite`` or ``crawldb-<site>.sqlite`` in the current
directory: the user's own index then answers ``scrapy search`` with the tests' pages. Every
file the session leaves in the checkout that was not there before fails the run, with its name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
# Folders that tools keep for themselves (caches, the virtualenv, git's own).
_SKIPPED = frozenset(
    {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".import_linter_cache"}
)
_BEFORE_KEY = pytest.StashKey[set[str]]()


def checkout_files(root: Path = CHECKOUT) -> set[str]:
    """Every file under ``root`` outside the tools' own folders, as relative paths."""
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIPPED and not d.startswith(".venv")]
        rel = os.path.relpath(folder, root)
        found.update(os.path.normpath(os.path.join(rel, f)) for f in files)
    return found


# Tests that take 20 s or more on CI's two cores (``--durations``), longest first, by name.
# They are handed out first, one at a time (pyproject's --maxschedchunk=1): pytest-xdist gives
# tests out in collection order, and one of them started last would keep the whole run waiting
# for it while the other workers sit idle.
LONG_FIRST = (
    "tests/test_readme.py::test_the_readme_commands_run_as_written",
    "tests/test_redis_outage.py::test_a_page_is_judged_alone_once_redis_stays_away_past_the_wait",
    "tests/test_redis_crawl.py::test_workers_ride_out_a_redis_restart_and_lose_nothing",
    "tests/test_backlog.py::test_a_killed_worker_costs_at_most_read_ahead_in_flight_and_the_backlog_bound",
    "tests/test_redis_outage.py::test_every_redis_user_rides_out_a_restart_and_loses_nothing",
    "tests/test_redis_outage.py::test_every_redis_user_rides_out_a_cluster_failover",
    "tests/test_fleet_crawl.py::test_a_blocked_host_gets_no_further_request_from_any_worker",
    "tests/test_fleet_crawl.py::test_pause_holds_every_worker_and_resume_releases_them",
    "tests/test_cluster_crawl.py::test_three_workers_crawl_through_a_cluster_in_shards_once_and_politely",
    "tests/test_redis_crawl.py::test_an_unreachable_robots_txt_is_held_for_every_worker",
    "tests/test_shared_crawl.py::test_two_workers_share_postgres_and_recrawl_together",
    "tests/test_redis_crawl.py::test_a_killed_worker_loses_nothing_and_a_stopped_one_hands_back_at_once",
    "tests/test_redis_crawl.py::test_a_silent_workers_leases_come_back_long_before_their_ttl",
    "tests/test_redis_crawl.py::test_workers_crawl_one_site_once_and_politely",
    "tests/test_fleet_crawl.py::test_frontier_status_agrees_with_the_servers_record",
    "tests/test_address_politeness.py::test_names_on_one_server_share_its_budget",
    "tests/test_metrics_fleet.py::test_the_crawl_wide_exporter_serves_the_merged_totals_of_every_worker",
    "tests/test_cluster_faults.py::test_a_master_fails_over_mid_crawl",
    "tests/test_redis_outage.py::test_the_dns_cache_and_the_address_budget_ride_out_a_restart",
    "tests/test_metrics_prometheus.py::test_prometheus_scraping_a_crawl_reads_back_its_final_stats",
    "tests/test_redis_cluster_users.py::test_workers_crawl_through_a_cluster_once_and_politely",
    "tests/test_warc_replay.py::test_a_crawl_replays_in_pywb_from_the_archive_alone",
    "tests/test_install.py::test_the_wheel_installs_and_crawls_from_an_empty_folder",
    "tests/test_cluster_faults.py::test_slots_move_mid_crawl_and_nothing_is_lost",
)


def long_rank(nodeid: str) -> int:
    """Where a test goes in the run: its place in ``LONG_FIRST``, or after all of them."""
    name = nodeid.partition("[")[0]  # every parametrized case of a listed test
    return LONG_FIRST.index(name) if name in LONG_FIRST else len(LONG_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: long_rank(item.nodeid))  # stable: the rest keep their order


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE_KEY] = checkout_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE_KEY, None)
    if before is None:
        return
    new = sorted(checkout_files() - before)
    if not new:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = (
        f"the tests left {len(new)} new file(s) in the checkout {CHECKOUT} "
        f"(give each crawl INDEX_PATH / CRAWLDB_PATH / JOBDIR under tmp_path): "
        + ", ".join(new[:20])
    )
    if reporter is not None:
        reporter.write_line(f"ERROR: {message}", red=True, bold=True)
    else:  # pragma: no cover - pytest always has one outside of -p no:terminal
        print(f"ERROR: {message}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED



@pytest.fixture(autouse=True)
def _reap_crawls():  # type: ignore[no-untyped-def]
    """A crawl a test started and did not collect (it failed first) is killed when the test
    ends: a worker of a shared crawl left running waits forever and loads the machine for
    every later test."""
    yield
    crawling = sys.modules.get("tests.crawling")  # only a test that imported it starts crawls
    if crawling is not None:
        crawling.reap_crawls()
