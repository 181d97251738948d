"""``scrapy crawl`` refuses a crawl whose backend settings are wrong: one line, exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.crawling import PROJECT, write_site


def test_an_unknown_backend_is_refused_before_any_request(tmp_path: Path) -> None:
    sites = tmp_path / "sites"
    # a loopback seed on a port nothing listens on: even a broken check sends nothing outside
    write_site(sites, "local", 'seeds = ["http://127.0.0.1:9/"]\n')
    settings = [f"SITES_DIR={sites}", "FRONTIER_BACKEND=mongo", "LOG_LEVEL=ERROR"]
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "local", *(f"-s{s}" for s in settings)],
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if "refused" in line]
    assert lines == [
        "crawl local refused: FRONTIER_BACKEND: unknown backend 'mongo'; "
        "choose one of memory, redis"
    ]
    assert "Traceback" not in out.stderr
