"""Separate crawls keep separate records: two runs of a crawl that cannot be resumed (no
JOBDIR) appended their sessions to one record file, and ``scrapy report`` merged them into one
crawl ("2 workers, sessions: 2"). A JOBDIR crawl resumed still adds its session to its record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from crawler.report.recordfile import read_records
from tests.crawling import PROJECT, serve_pages, write_site
from tests.test_crawl_command import scrapy_crawl


def _report(record: Path, tmp_path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "report", str(record), "-o", str(tmp_path / "r.html")],
        cwd=PROJECT, env=dict(os.environ, PYTHONPATH=str(PROJECT)), capture_output=True,
        text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_two_runs_keep_two_records_and_a_resumed_crawl_one(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"  # scrapy_crawl's RECORD_PATH
    with serve_pages("127.0.0.1", {"/": "<html><body>home</body></html>"}) as port:
        write_site(tmp_path / "sites", "local", f'seeds = ["http://127.0.0.1:{port}/"]\n')
        for _ in range(2):
            assert scrapy_crawl(tmp_path).returncode == 0
        [earlier] = tmp_path.glob("record.jsonl.*")
        assert len(read_records([record]).sessions) == 1
        assert len(read_records([earlier]).sessions) == 1
        assert _report(record, tmp_path).endswith(" fetches, 1 worker, 1 record file)\n")

        jobdir = tmp_path / "job"
        for _ in range(2):  # its record: JOBDIR/record.jsonl
            assert scrapy_crawl(tmp_path, f"-sJOBDIR={jobdir}", "-sRECORD_PATH=").returncode == 0
    resumed = read_records([jobdir / "record.jsonl"])
    assert len(resumed.sessions) == 2 and len(resumed.workers) == 1
    assert list(jobdir.glob("record.jsonl.*")) == []
