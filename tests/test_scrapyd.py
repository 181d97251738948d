"""The project on a real scrapyd: deployed with scrapyd-deploy, crawls run and cancelled as jobs.

One scrapyd (its own port and directories under tmp) and one deploy serve the whole module, since
starting and deploying cost a few seconds each. Every crawl is of a devsite on loopback and is
judged from the server's request record, the job's log, its item feed and its stats file.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from crawler.backends.sqlite.index import SQLiteIndex
from crawler.sites import load_all_sites
from devsite import HostSpec, SiteServer, build_site
from devsite.server import RequestRecord
from tests.crawling import normalized, per_host
from tests.scrapyd_support import PROJECT_NAME, Deployment, Scrapyd, deploy

pytestmark = pytest.mark.integration

VERSION = "r1"
# Settings every test crawl needs: the devsite is on loopback, which address safety refuses.
LOOPBACK = {"ALLOW_PRIVATE_ADDRESSES": "True"}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scrapyd, Deployment]]:
    root = tmp_path_factory.mktemp("scrapyd")
    with Scrapyd(root / "server") as server:
        deployment = deploy(server, root / "project", VERSION)
        yield server, deployment


@pytest.fixture
def server(deployed: tuple[Scrapyd, Deployment]) -> Scrapyd:
    return deployed[0]


def write_seeds(path: Path, seeds: list[str]) -> Path:
    path.write_text("".join(f"{url}\n" for url in seeds), encoding="utf-8")
    return path


def read_stats(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def pages_only(records: list[RequestRecord]) -> list[RequestRecord]:
    """Page fetches: robots.txt is fetched again by every new crawl process, by design."""
    return [r for r in records if r.path != "/robots.txt"]


def test_deploy_puts_the_site_configs_in_the_egg_and_leaves_no_noise(
    deployed: tuple[Scrapyd, Deployment],
) -> None:
    server, deployment = deployed
    assert deployment.answer["status"] == "ok", deployment.output
    assert deployment.answer["project"] == PROJECT_NAME
    assert server.get("listversions.json", project=PROJECT_NAME)["versions"] == [VERSION]

    # scrapyd's own `scrapy list`, run from the egg: every site config travelled in it. Nothing
    # else could have provided them: scrapyd's environment cannot import the working tree.
    assert not server.project_importable()
    sites, errors = load_all_sites()
    assert not errors, errors
    spiders = server.get("listspiders.json", project=PROJECT_NAME)["spiders"]
    assert sorted(spiders) == sorted(sites)
    assert deployment.answer["spiders"] == len(sites)

    # The committed setup.py was used as it is, and what the build wrote is ignored by git.
    assert not deployment.setup_py_changed
    assert deployment.new_files, "expected the build's output (build/, crawler.egg-info/)"
    assert not deployment.not_ignored, deployment.not_ignored


def test_schedule_runs_a_crawl_with_arguments_and_settings(server: Scrapyd, tmp_path: Path) -> None:
    graph = build_site(
        [HostSpec("127.0.0.2", pages=6), HostSpec("127.0.0.3", pages=6)], extras=False
    )
    stats_path = tmp_path / "stats.json"
    job = "crawl-1"
    with SiteServer(graph) as site:
        seeds = write_seeds(tmp_path / "seeds.txt", site.seeds())
        index_path = tmp_path / "index.sqlite"
        settings = {
            **LOOPBACK,
            "FRONTIER_MIN_DELAY": "0.05",
            "STATS_FILE": stats_path,
            "INDEX_PATH": index_path,
        }
        assert server.schedule("web", job=job, args={"seeds": str(seeds)}, settings=settings) == job
        entry = server.wait_for(job, "finished", timeout=40)
        records = pages_only(site.records)
        wanted = graph.reachable(site.seeds())

    # The server saw the whole site, each page once, from the crawler's user agent.
    fetched = normalized(records)
    assert set(fetched) == wanted, sorted(wanted ^ set(fetched))
    assert not [url for url, n in Counter(fetched).items() if n > 1]
    assert all(r.headers.get("User-Agent", "").startswith("crawler-bot/") for r in records)

    # The settings reached the crawl: the stats file and the index exist only because of
    # STATS_FILE and INDEX_PATH. Each host's fetches were spaced by at least its delay. The
    # spider argument gave the seeds.
    for recs in per_host(records).values():
        gaps = [nxt.start - prev.end for prev, nxt in pairwise(recs)]
        assert min(gaps) >= 0.045, gaps
    stats = read_stats(stats_path)
    assert stats["finish_reason"] == "finished"
    assert stats["seeds/valid"] == 2

    # Items: one JSON line per page, in items_dir, also served at the job's items_url.
    items_file = server.job_items("web", job)
    assert items_file.is_file()
    assert entry["items_url"] == f"/items/{PROJECT_NAME}/web/{job}.jl"
    items = [json.loads(line) for line in server.fetch(entry["items_url"]).splitlines() if line]
    assert sorted(item["url"] for item in items) == sorted(wanted)
    assert all(item["site"] == "web" and item["status"] == 200 and item["text"] for item in items)

    # The index the job wrote holds every page, and finds one by the words of its title.
    index = SQLiteIndex(index_path, readonly=True)
    try:
        assert index.stats()["documents"] == len(wanted)
        some = items[0]
        hits = index.search(f'title:"{some["title"].split(" | ")[0]}"')
        assert some["url"] in [hit.url for hit in hits]
    finally:
        index.close()

    # The log: in logs_dir, served at log_url, and it shows the job's arguments and settings.
    assert server.job_log("web", job).is_file()
    assert entry["log_url"] == f"/logs/{PROJECT_NAME}/web/{job}.log"
    log = server.fetch(entry["log_url"])
    assert "Spider closed (finished)" in log
    assert f"Stored jsonlines feed ({len(wanted)} items) in: {items_file.as_uri()}" in log
    assert f"Process finished: project='{PROJECT_NAME}' spider='web' job='{job}'" in (
        server.server_log()
    )


def test_cancel_stops_a_crawl_cleanly_and_scheduling_it_again_resumes_it(
    server: Scrapyd, tmp_path: Path
) -> None:
    hosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    graph = build_site([HostSpec(h, pages=15) for h in hosts], extras=False)
    jobdir = tmp_path / "jobdir"
    first_stats, second_stats = tmp_path / "first.json", tmp_path / "second.json"

    def settings(stats: Path) -> dict[str, object]:
        return {**LOOPBACK, "FRONTIER_MIN_DELAY": "0.3", "JOBDIR": jobdir, "STATS_FILE": stats}

    with SiteServer(graph) as site:
        seeds = write_seeds(tmp_path / "seeds.txt", site.seeds())
        wanted = graph.reachable(site.seeds())
        assert len(wanted) == 3 * 16  # "/" and 15 pages per host: about 5 s of polite crawling

        server.schedule(
            "web", job="first", args={"seeds": str(seeds)}, settings=settings(first_stats)
        )
        deadline = time.monotonic() + 30
        while len(pages_only(site.records)) < 6:  # two pages per host, give or take
            assert time.monotonic() < deadline, server.server_log()[-4000:]
            time.sleep(0.02)
        cancelled_at = time.monotonic()  # the server's records use the same clock
        assert server.cancel("first") == "running"
        server.wait_for("first", "finished", timeout=20)
        first = pages_only(site.records)
        time.sleep(1.0)  # over three of the hosts' 0.3 s delays: a live crawl would fetch more
        assert pages_only(site.records) == first, "requests reached the server after the job ended"

        # A clean stop: Scrapy's graceful shutdown, stats written, process exit status 0; and it
        # stopped when asked, not once the site was done.
        first_log = server.job_log("web", "first").read_text(errors="replace")
        assert "Received SIGINT, shutting down gracefully" in first_log
        assert "Spider closed (shutdown)" in first_log
        assert read_stats(first_stats)["finish_reason"] == "shutdown"
        assert "Process finished: project='crawler' spider='web' job='first'" in (
            server.server_log()
        )
        assert len(first) < len(wanted)
        # Requests that began after the cancel are the ones already leased when the signal
        # arrived: at most one per host (one slot each), never a crawl going on.
        late = [r for r in first if r.start > cancelled_at]
        assert len(late) <= len(hosts), late

        # Resume: the same job again, with the same JOBDIR.
        server.schedule(
            "web", job="second", args={"seeds": str(seeds)}, settings=settings(second_stats)
        )
        server.wait_for("second", "finished", timeout=40)
        records = pages_only(site.records)

    second = records[len(first) :]
    assert read_stats(second_stats)["finish_reason"] == "finished"
    fetched = normalized(records)
    assert set(fetched) == wanted, sorted(wanted - set(fetched))
    # Nothing is fetched twice, except what may have been in flight when the cancel came: with
    # one slot per host, that is each host's last request of the first run (its response may
    # not have been handled yet: loopback transfer plus parsing).
    in_flight = set(normalized([recs[-1] for recs in per_host(first).values()]))
    twice = {url for url, n in Counter(fetched).items() if n > 1}
    assert twice <= in_flight, (
        f"{len(twice - in_flight)} pages fetched again after resuming (of {len(first)} fetched "
        f"before the cancel, {len(second)} after): {sorted(twice - in_flight)[:5]}"
    )


def test_a_refused_job_says_why_in_its_log(server: Scrapyd) -> None:
    job = "refused-1"
    settings = {**LOOPBACK, "FRONTIER_MIN_DELAY": "abc"}
    assert server.schedule("web", job=job, settings=settings) == job
    entry = server.wait_for(job, "finished", timeout=40)
    log = server.fetch(entry["log_url"])
    assert "crawl web refused: FRONTIER_MIN_DELAY: must be a number >= 0, got 'abc'" in log
    assert "Traceback" not in log
