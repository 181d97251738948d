"""No noise a user cannot act on: third-party deprecation warnings stay out of a crawl's output,
and a one-URL ``scrapy parse`` prints what it found, not Scrapy's start-up dump."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.crawling import PROJECT

_INDEX_A_WARC = """
import io, sys
from pathlib import Path
from warcio.warcwriter import WARCWriter
from warcio.statusandheaders import StatusAndHeaders
folder = Path(sys.argv[1])
with open(folder / "a.warc.gz", "wb") as out:
    writer = WARCWriter(out, gzip=True)
    headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(
        "http://127.0.0.1/", "response", payload=io.BytesIO(b"<p>hi</p>"), http_headers=headers))
from crawler.archive.cdxj import write_cdxj
write_cdxj([folder / "a.warc.gz"], folder / "a.cdxj")
"""


def test_indexing_a_warc_says_nothing_about_pkg_resources(tmp_path: Path) -> None:
    """cdxj-indexer imports pyamf, which tries ``pkg_resources`` and setuptools warns: three
    lines at the end of every WARC crawl. Python's default filters show a UserWarning once."""
    out = subprocess.run(
        [sys.executable, "-c", _INDEX_A_WARC, str(tmp_path)],
        cwd=PROJECT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "a.cdxj").read_text().startswith("1,0,0,127)/ ")
    assert out.stderr == ""


def test_counts_of_one_read_in_the_singular() -> None:
    """The summary said "pages from 1 hosts", ``scrapy report`` "1 workers"."""
    from crawler.commands import counted
    from crawler.extensions.summary import summary_lines
    from tests.test_summary import _Settings

    stats = {"finish_reason": "finished", "robotstxt/response_count": 1, "pages/ok": 1}
    lines = summary_lines(
        "web", stats, statuses={200: 1}, broken=[], busiest=[], hosts=1, settings=_Settings()
    )
    assert any(line.endswith("pages from 1 host (1 robots.txt fetch)") for line in lines), lines
    assert [counted(n, "worker") for n in (0, 1, 2)] == ["0 workers", "1 worker", "2 workers"]
    assert counted(1200, "fetch", "fetches") == "1,200 fetches"


def test_frontier_help_keeps_its_lines() -> None:
    """``scrapy frontier -h`` printed the module's docstring refilled into one block: RST
    markup, bullets run together."""
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "-h"],
        cwd=PROJECT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "* pause, resume: every worker stops handing out requests, then goes on." in lines
    assert "Subcommands (none: status):" in lines
    assert "``" not in out.stdout and ":func:" not in out.stdout
