"""``scrapy frontier <site>`` on a crawl kept in a JOBDIR, and on a Redis that holds no crawl:
it read Redis only, and showed an empty Redis database as a crawl of zeros."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.crawling import PROJECT, serve_pages, write_site
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_crawl_command import scrapy_crawl


def _frontier(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "local", f"-sSITES_DIR={tmp_path / 'sites'}",
         *args],
        cwd=PROJECT, env=dict(os.environ, PYTHONPATH=str(PROJECT)), capture_output=True,
        text=True, timeout=120, check=False,
    )


def test_status_of_a_jobdir_crawl(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    pages = {"/": '<a href="/a">a</a>', "/a": "a"}
    with serve_pages("127.0.0.1", pages) as port:
        write_site(tmp_path / "sites", "local", f'seeds = ["http://127.0.0.1:{port}/"]\n')
        crawl = scrapy_crawl(tmp_path, f"-sJOBDIR={jobdir}", "-sFRONTIER_MIN_DELAY=0")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    out = _frontier(tmp_path, f"-sJOBDIR={jobdir}")
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    assert line.startswith(
        f"crawl local in JOBDIR {jobdir} (finished, as of its last commit): 0 URLs queued, "
    )
    assert line.endswith(" seen, 1 host")
    report = json.loads(_frontier(tmp_path, f"-sJOBDIR={jobdir}", "--json").stdout)
    assert report["queued"] == 0 and report["seen"] >= 2 and report["hosts_total"] == 1


def test_an_empty_jobdir_is_no_crawl(tmp_path: Path) -> None:
    write_site(tmp_path / "sites", "local", "")
    (tmp_path / "job").mkdir()
    out = _frontier(tmp_path, f"-sJOBDIR={tmp_path / 'job'}")
    assert out.returncode == 2
    assert out.stderr.startswith(f"frontier: no crawl here: {tmp_path / 'job'} holds no frontier")
    assert not (tmp_path / "job" / "frontier.sqlite").exists()


def test_an_empty_redis_is_no_crawl(tmp_path: Path, redis_server: RedisServer) -> None:  # noqa: F811
    write_site(tmp_path / "sites", "local", "")
    key = fresh_key()
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    out = _frontier(tmp_path, "-sFRONTIER_BACKEND=redis", f"-sREDIS_URL={url}",
                    f"-sFRONTIER_REDIS_KEY={key}")
    assert out.returncode == 2, out.stdout
    assert out.stderr.startswith(f"frontier: no crawl here: crawl {key!r} in Redis at {url} ")


def test_a_finished_redis_crawl_run_again_says_so(
    tmp_path: Path, redis_server: RedisServer  # noqa: F811
) -> None:
    key = fresh_key()
    shared = ["-sFRONTIER_BACKEND=redis", f"-sREDIS_URL=redis://127.0.0.1:{redis_server.port}/0",
              f"-sFRONTIER_REDIS_KEY={key}"]
    with serve_pages("127.0.0.1", {"/": "<html><body>home</body></html>"}) as port:
        write_site(tmp_path / "sites", "local", f'seeds = ["http://127.0.0.1:{port}/"]\n')
        first = scrapy_crawl(tmp_path, *shared)
        again = scrapy_crawl(tmp_path, *shared)
    assert first.returncode == 0 and "already finished" not in first.stderr, first.stderr
    assert again.returncode == 0, again.stderr
    assert (
        f"crawl local: nothing left to fetch: crawl {key!r} in Redis at "
        f"redis://127.0.0.1:{redis_server.port}/0 had already finished ("
    ) in again.stderr
    assert "add -s FRONTIER_RESET=True" in again.stderr
