"""OPIC and crawl policies through Scrapy: a real ``scrapy crawl`` of a web graph served on
loopback (``devsite/webgraph.py``), the spam seed's domain distrusted by a site config's domain
list, a favoured seed named in the seeds file. The cash and the policy ride on the requests'
meta and come back with the pages' links; the crawl still fetches every page."""

from __future__ import annotations

from pathlib import Path

from devsite.webgraph import WebGraphServer, build_webgraph
from tests.crawling import loopback_settings, run_crawl, write_site


def test_an_opic_crawl_with_policies_fetches_every_page_and_counts_per_policy(
    tmp_path: Path,
) -> None:
    graph = build_webgraph(5, hosts=30, pages=300, farms=1, farm_hosts=4, farm_pages=40,
                           good_seeds=3, farm_only=1)
    with WebGraphServer(graph, paragraphs=["Some documentation text for the page."]) as server:
        spam_host = graph.hosts[graph.host_of[graph.spam_seed]]
        sites = tmp_path / "sites"
        sites.mkdir()
        (sites / "spam.txt").write_text(f"# the spam seed\n{spam_host}\n")
        hosts = ", ".join(f'"{h}"' for h in graph.hosts)
        write_site(sites, "wg", (
            'allow_private_addresses = true\ndistrusted_domains = "spam.txt"\n'
            f"[scope]\nhosts = [{hosts}]\n"
            "[policies.favor]\nmultiplier = 4.0\n"
            "[policies.distrust]\nmultiplier = 0.001\ndampening = 0.5\n"
        ))
        seeds_file = tmp_path / "seeds.txt"
        lines = [f"{graph.url(graph.seeds[0])} favor"]
        lines += [graph.url(p) for p in [*graph.seeds[1:], graph.spam_seed]]
        seeds_file.write_text("\n".join(lines) + "\n")
        result = run_crawl(
            tmp_path, "wg", sites_dir=sites, args={"seeds": str(seeds_file)}, timeout=900,
            settings=loopback_settings(
                FRONTIER_PRIORITY_POLICY="opic", NEARDUP_ENABLED=False, INDEX_ENABLED=False,
                LOG_LEVEL="INFO",
            ),
        )
        del server
    assert result.returncode == 0, result.log[-3000:]
    fetched = {item["url"] for item in result.items}
    assert fetched == {graph.url(p) for p in range(graph.pages)}  # coverage unchanged
    stats = result.stats
    assert stats["frontier/policy/distrust"] > 0 and stats["frontier/policy/favor"] > 0
    assert stats["frontier/policy/default"] > 0
    assert stats["policies/pages/distrust"] > 0 and stats["policies/pages/favor"] > 0
