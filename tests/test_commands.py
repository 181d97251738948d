"""Our scrapy commands as a shell user runs them: ``scrapy parse`` parses the one URL it is given
(no site crawl, no index write), and output piped into ``head`` ends quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.backends.sqlite.index import SQLiteIndex
from crawler.index import PageDocument
from devsite import HostSpec, SiteServer, build_site
from tests.crawling import PROJECT

HOST = "127.0.0.2"


def _scrapy(*args: str, cwd: Path, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", *args],
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(PROJECT), SCRAPY_SETTINGS_MODULE="crawler.settings"),
        text=True,
        **kw,  # type: ignore[call-overload]
    )


@pytest.mark.integration
def test_parse_fetches_and_parses_only_the_url_given(tmp_path: Path) -> None:
    graph = build_site([HostSpec(HOST, pages=8)], links_per_page=3, cross_host_links=0)
    with SiteServer(graph) as server:
        url = server.url(HOST, "/p/1.html")
        proc = _scrapy(
            "parse", "--spider", "web", url, "-s", "ALLOW_PRIVATE_ADDRESSES=True",
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(timeout=120)
        fetched = sorted(r.path for r in server.records)
    assert proc.returncode == 0, err[-3000:]
    assert fetched == ["/p/1.html", "/robots.txt"]  # not the site: the one page
    assert "# Scraped Items" in out and f"'url': '{url}'" in out
    assert f"<GET {server.url(HOST, '/p/2.html')}>" in out  # its links, printed, not followed
    assert list(tmp_path.iterdir()) == []  # no index, no crawl database
    assert "Crawl web ended" not in err and "Crawled " not in err
    # the answer, not Scrapy's start-up and stats dumps around it
    assert "Dumping Scrapy stats" not in err and "Versions:" not in err, err


def test_parse_of_a_page_not_fetched_is_one_error_and_exit_1(tmp_path: Path) -> None:
    proc = _scrapy(
        "parse", "--spider", "web", "http://127.0.0.1:9/", "-s", "ALLOW_PRIVATE_ADDRESSES=True",
        "-s", "RETRY_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False",
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]
    assert "No response downloaded for: http://127.0.0.1:9/" in err
    assert "Dumping Scrapy stats" not in err and "INFO" not in err, err


def _big_index(path: Path, pages: int = 1500) -> None:
    ix = SQLiteIndex(path)
    for i in range(pages):
        ix.add_page(
            PageDocument(
                f"http://a.test/{i}",
                site="a",
                title=f"Page {i} about the frontier",
                text="The frontier keeps one queue per host. " * 20,
                status=200,
            )
        )
    ix.close()


def test_search_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    index = tmp_path / "ix.sqlite"
    _big_index(index)
    # more output than a pipe holds: the command is still writing when the reader leaves
    proc = _scrapy(
        "search", "--index", str(index), "-n", "1500", "frontier",
        cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert first.startswith("Top 1500 results")
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    assert err == ""
    assert proc.returncode == 0
