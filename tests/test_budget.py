"""Budget cut-offs are kept: the URLs a host's page budget (max_pages_per_host) refused are
fetched when a rerun over the same crawl state has a larger budget, and nothing twice."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from devsite import HostSpec, SiteServer, build_site
from tests.crawling import normalized, run_crawl, write_site

pytestmark = pytest.mark.integration

HOST = "127.0.0.2"
PAGES = 20


def _site(tmp_path: Path, budget: int) -> Path:
    sites = tmp_path / "sites"
    write_site(
        sites,
        "one",
        f"[scope]\nhosts = {json.dumps([HOST])}\n[limits]\nmax_pages_per_host = {budget}\n",
    )
    return sites


def _crawl(tmp_path: Path, server: SiteServer, budget: int, state: dict[str, object]):
    return run_crawl(
        tmp_path,
        "one",
        seeds=server.seeds(),
        sites_dir=_site(tmp_path, budget),
        settings={"ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0.02, **state},
    )


@pytest.mark.parametrize("state", ["crawldb", "jobdir"])
def test_urls_cut_by_the_budget_are_fetched_when_it_grows(tmp_path: Path, state: str) -> None:
    graph = build_site([HostSpec(HOST, pages=PAGES)], links_per_page=3, extras=False)
    settings: dict[str, object] = (
        {"CRAWLDB_PATH": tmp_path / "crawldb.sqlite"}
        if state == "crawldb"
        else {"JOBDIR": tmp_path / "job"}
    )
    with SiteServer(graph) as server:
        everything = graph.reachable(graph.seeds())
        first = _crawl(tmp_path, server, 5, settings)
        first_pages = normalized(server.records)
        server.reset()
        second = _crawl(tmp_path, server, 100, settings)
        second_pages = normalized(server.records)
    assert first.returncode == 0, first.log[-3000:]
    assert second.returncode == 0, second.log[-3000:]
    assert len(first_pages) == 5
    assert first.stats["budget/remembered"] >= 1
    assert "cut off by a page budget (max_pages_per_host)" in first.log
    # the rerun fetches what the budget cut off, and what those pages lead to; nothing twice
    assert set(first_pages).isdisjoint(second_pages)
    assert Counter(first_pages + second_pages) == Counter(everything)
