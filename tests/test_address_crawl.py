"""Address safety in real crawls: an allowlist admits one loopback host and port, nothing else;
and the connection itself is checked even when the middleware is taken out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devsite import HostSpec, SiteServer, build_site
from tests.crawling import run_crawl, write_site

pytestmark = pytest.mark.integration

HOSTS = ["127.0.0.2", "127.0.0.3"]


def two_hosts() -> SiteServer:
    graph = build_site([HostSpec(h, pages=4) for h in HOSTS], links_per_page=3, cross_host_links=2)
    return SiteServer(graph)


def site(tmp_path: Path) -> Path:
    sites = tmp_path / "sites"
    write_site(sites, "pair", f'[scope]\nhosts = {json.dumps(HOSTS)}\n')
    return sites


def test_an_allowlisted_host_is_crawled_and_its_neighbour_is_not(tmp_path: Path) -> None:
    with two_hosts() as server:
        port = server.seeds()[0].rsplit(":", 1)[1].strip("/")
        result = run_crawl(
            tmp_path,
            "pair",
            seeds=server.seeds(),
            sites_dir=site(tmp_path),
            settings={"ALLOWED_NETWORKS": f"127.0.0.2/32:{port}", "FRONTIER_MIN_DELAY": 0.05},
        )
        hosts = {r.host for r in server.records}
    assert result.returncode == 0, result.log[-3000:]
    assert hosts == {"127.0.0.2"}
    assert result.stats["address_safety/refused/private_address"] >= 1
    assert "127.0.0.3" in result.log and "ALLOWED_NETWORKS" in result.log


def test_the_connection_is_refused_even_without_the_middleware(tmp_path: Path) -> None:
    middlewares = {"crawler.middlewares.address_safety.AddressSafetyMiddleware": None}
    with two_hosts() as server:
        result = run_crawl(
            tmp_path,
            "pair",
            seeds=server.seeds(),
            sites_dir=site(tmp_path),
            settings={
                "DOWNLOADER_MIDDLEWARES": json.dumps(middlewares),
                "RETRY_TIMES": 0,
                "FRONTIER_MIN_DELAY": 0.05,
            },
        )
        records = server.records
    # every fetch failed at connect: exit status 1 (crawler/commands/crawl.py)
    assert result.returncode == 1, result.log[-3000:]
    assert records == []  # not one request reached the server
    assert result.stats["address_safety/refused/at_connect"] >= 1
    assert "Refused a connection to 127.0.0." in result.log
