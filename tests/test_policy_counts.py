"""Operators see per crawl policy counts: a real crawl of a small site config with two
policies, on Redis with OPIC (the open web's order), whose end summary, HTML report
(``scrapy report``) and ``scrapy frontier <site> status`` all say how many pages each policy
fetched and how many URLs it queued, as the crawl's stats counted them."""

from __future__ import annotations

import json
from pathlib import Path

from crawler.report.policies import policy_counts, policy_line
from devsite import HostSpec, build_site
from devsite.routed import RoutedSiteServer
from tests.crawling import run_crawl, scrapy_frontier, write_site
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_report import _report

FAVOURED, PLAIN = "127.0.0.2", "127.0.0.3"


def test_summary_report_and_frontier_status_count_pages_per_policy(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    sites = tmp_path / "sites"
    write_site(
        sites, "web",
        "allow_private_addresses = true\n"
        "[priority]\npolicy = \"opic\"\n"
        "[policies.favor]\nmultiplier = 4.0\n"
        "[policies.slow]\nmultiplier = 0.5\ndampening = 0.5\n",
    )  # fmt: skip
    key = fresh_key()
    redis = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "FRONTIER_REDIS_KEY": key,
        "SITES_DIR": sites,
    }
    graph = build_site([HostSpec(FAVOURED, pages=6), HostSpec(PLAIN, pages=5)],
                       links_per_page=3, cross_host_links=0)
    with RoutedSiteServer(graph) as server:
        home = dict(zip((FAVOURED, PLAIN), server.seeds(), strict=True))
        result = run_crawl(
            tmp_path, "web", sites_dir=sites,
            seeds=[f"{home[FAVOURED]} favor", f"{home[PLAIN]} slow"],
            settings={**redis, "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0.05,
                      "FRONTIER_DELAY_FACTOR": 0, "LOG_LEVEL": "INFO",
                      "TUNING": {"record_interval": 0.5, "heartbeat_interval": 0.5}},
        )
    assert result.returncode == 0, result.log[-3000:]
    stats = result.stats
    fav, slow = stats["policies/pages/favor"], stats["policies/pages/slow"]
    fav_q, slow_q = stats["frontier/policy/favor"], stats["frontier/policy/slow"]
    pages = {host: sum(1 for i in result.items if f"//{host}:" in i["url"])
             for host in (FAVOURED, PLAIN)}
    # each host's pages came under its seed's policy (no cross-host links): every HTML page
    # the spider analysed is counted (not the binary file)
    assert 0 < pages[FAVOURED] - 1 <= fav <= pages[FAVOURED]
    assert 0 < pages[PLAIN] - 1 <= slow <= pages[PLAIN]
    assert fav_q > 0 and slow_q > 0
    counts = {c.name: (c.pages, c.queued) for c in policy_counts(stats)}
    assert counts == {"favor": (fav, fav_q), "slow": (slow, slow_q)}
    expected = f"favor {fav} pages ({fav_q} URLs queued), slow {slow} pages ({slow_q} URLs queued)"

    # the end summary
    assert f"  crawl policies: {expected}" in result.log
    assert policy_line(stats) == expected

    # the HTML report of the crawl's record
    out = _report(tmp_path / "stats.record.jsonl", out=tmp_path / "report.html")
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "report.html").read_text()
    assert '<table data-table="policies" data-count="2">' in html
    assert f'<tr data-policy="favor"><td>favor</td><td>{fav}</td><td>{fav_q}</td></tr>' in html
    assert f'<tr data-policy="slow"><td>slow</td><td>{slow}</td><td>{slow_q}</td></tr>' in html

    # scrapy frontier <site> status: the workers' merged counts
    status = scrapy_frontier(redis, "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["policies"] == [
        {"policy": "favor", "pages": fav, "queued": fav_q},
        {"policy": "slow", "pages": slow, "queued": slow_q},
    ]
    text = scrapy_frontier(redis)
    assert f"crawl policies: {expected}" in text.stdout, text.stdout


def test_no_policy_line_without_policies() -> None:
    assert policy_line({"pages/ok": 3, "frontier/rejected/seen": 2}) == ""
    assert policy_counts({"frontier/policy/default": 4}) == [
        policy_counts({"frontier/policy/default": 4})[0]
    ]
