"""Soft 404s: the judgement (``crawler.content.soft404``) and a crawl of a real server whose
host answers every unknown path with a "not found" page and status 200."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

import crawler.pipelines.soft404 as pipeline_module
from crawler import signals as crawler_signals
from crawler.content.soft404 import (
    answer_of,
    is_probe_path,
    is_soft_404,
    probe_path,
    similarity,
)
from devsite import HostSpec, build_site
from devsite.routed import Answer, RoutedSiteServer
from tests.crawling import loopback_settings, run_crawl

NOT_FOUND = Path(__file__).resolve().parents[1] / "bench" / "soft404_set" / "notfound"


def not_found_page(name: str, path: str, host: str = "example") -> bytes:
    html = (NOT_FOUND / f"{name}.html").read_text(encoding="utf-8")
    return html.replace("{{path}}", path).replace("{{host}}", host).encode("utf-8")


def test_probe_paths_are_random_and_recognisable() -> None:
    a, b = probe_path(), probe_path()
    assert a != b and is_probe_path(a) and a.endswith("-soft404-probe") and len(a) == 39
    assert not is_probe_path("/about-soft404-probe")


def test_a_not_found_page_that_repeats_the_path_still_matches() -> None:
    probe_url = "http://a.example" + probe_path()
    probe = answer_of(200, "Not Found", f"The url {probe_url} could not be found.", probe_url)
    other = "http://a.example/2019/old-post-about-crawlers/"
    page = answer_of(200, "Not Found", f"The url {other} could not be found.", other)
    assert similarity(probe, page) == 1.0 and is_soft_404(probe, page)
    real = answer_of(200, "Crawlers", "A post about crawlers and their frontiers " * 5, other)
    assert not is_soft_404(probe, real)


def test_statuses_and_redirects() -> None:
    probe_url = "http://a.example/x-soft404-probe"
    same = answer_of(200, "Oops", "nothing here", "http://a.example/y")
    assert not is_soft_404(answer_of(404, "Oops", "nothing here", probe_url), same)  # honest
    assert not is_soft_404(answer_of(200, "Oops", "nothing here", probe_url),
                           answer_of(404, "Oops", "nothing here", "http://a.example/y"))
    home = "http://a.example/"
    to_home = answer_of(200, "Home", "welcome", probe_url, home)
    assert is_soft_404(to_home, answer_of(200, "Home", "welcome", "http://a.example/y", home))
    assert not is_soft_404(to_home, answer_of(200, "Home", "welcome", home))  # the home itself
    moved = answer_of(302, "", "", probe_url, home)  # the probe's redirect, not followed
    assert is_soft_404(moved, answer_of(200, "Home", "welcome", "http://a.example/y", home))
    assert not is_soft_404(moved, answer_of(200, "Home", "welcome", home))
    assert not is_soft_404(moved, answer_of(200, "Other", "text", "http://a.example/z"))


@pytest.mark.integration
def test_soft_404_crawl(tmp_path: Path) -> None:
    """One probe per host in the access log; the page a link leads to that does not exist
    (answered 200 with pywb's not-found page, which repeats the path) is flagged, counted and
    not indexed; real pages and the honest host's pages are not flagged. A host redirecting
    unknown paths to one of its pages has its probe's redirect read, not followed: that page
    is crawled as a page. A host whose robots.txt disallows the probe is crawled unjudged."""
    soft, honest, moving, closed = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"
    graph = build_site(
        [
            HostSpec(soft, pages=5),
            HostSpec(honest, pages=3),
            HostSpec(moving, pages=3),
            HostSpec(closed, pages=3, robots="User-agent: *\nDisallow: /*-soft404-probe$\n"),
        ],
        links_per_page=2,
    )

    class SoftServer(RoutedSiteServer):
        def respond(self, handler: Any, spec: HostSpec, default: Any) -> Answer:
            path = handler.path.split("?", 1)[0]
            if path == "/robots.txt":  # none: a plain 404
                return super().respond(handler, spec, default)
            if spec.address == soft and self.graph.resolve(soft, path) is None:
                body = not_found_page("pywb", handler.path, soft)
                return 200, [("Content-Type", "text/html; charset=utf-8")], body
            if spec.address == moving and self.graph.resolve(moving, path) is None:
                return 302, [("Location", "/p/1.html")], b""
            return super().respond(handler, spec, default)

    server = SoftServer(graph, conditional=False)
    settings = loopback_settings(SOFT404_PROBE=True, FRONTIER_MIN_DELAY=0.02)
    with server:
        first = graph.resolve(soft, "/")
        assert first is not None
        server.set_body(soft, "/", first.body.replace(
            b"</main>", b'<a href="/2019/05/an-old-post/">An old post</a></main>'
        ))
        result = run_crawl(
            tmp_path, seeds=[server.url(h) for h in (soft, honest, moving, closed)],
            settings=settings,
        )
    assert result.returncode == 0, result.log[-3000:]
    probes = [(r.host, r.status) for r in server.records if is_probe_path(r.path)]
    assert sorted(probes) == [(soft, 200), (honest, 404), (moving, 302)]
    for host in (soft, honest, moving):  # robots.txt, then the probe, then the host's pages
        paths = [r.path for r in sorted(server.records, key=lambda r: r.start) if r.host == host]
        assert paths[0] == "/robots.txt" and is_probe_path(paths[1]), paths[:3]
    stats = result.stats
    assert stats["soft404/probes"] == 4 and stats["soft404/pages"] == 1
    assert stats["robotstxt/denied"] == 1  # the closed host's probe, never sent
    closed_pages = [r for r in server.records if r.host == closed and r.path != "/robots.txt"]
    assert len(closed_pages) >= 3
    flagged = [i["url"] for i in result.items if i.get("soft_404")]
    assert flagged == [server.url(soft, "/2019/05/an-old-post/")]
    assert not any(is_probe_path(i["url"].split(":", 2)[2].split("/", 1)[-1]) for i in result.items)
    assert sum(1 for i in result.items if i["status"] == 200) >= 6
    moved_to = server.url(moving, "/p/1.html")
    assert [i.get("soft_404") for i in result.items if i["url"] == moved_to] == [None]
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    docs = {u for (u,) in conn.execute("SELECT url FROM pages WHERE has_doc = 1")}
    conn.close()
    assert flagged[0] not in docs and server.url(soft) in docs
    assert stats["index/soft404"] == 1
    assert "soft 404s: 1 pages like their host's not-found page (4 hosts probed" in result.log


def test_the_pipeline_keeps_2xx_answers_of_a_bounded_number_of_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline_module, "MAX_HOSTS", 2)
    crawler = get_crawler(Spider, {"SOFT404_PROBE": True})
    pipeline = pipeline_module.Soft404Pipeline.from_crawler(crawler)
    crawler.stats.open_spider()

    def probed(origin: str, status: int) -> None:
        url = origin + probe_path()
        answer = answer_of(status, "Not found", "Sorry, nothing here.", url)
        crawler.signals.send_catch_log(crawler_signals.soft404_probed, origin=origin, answer=answer)

    probed("http://honest.example", 404)
    for host in ("a", "b", "c"):
        probed(f"http://{host}.example", 200)
    assert list(pipeline.answers) == ["http://b.example", "http://c.example"]
    item = {"url": "http://c.example/gone", "status": 200, "title": "Not found",
            "text": "Sorry, nothing here."}
    assert pipeline.process_item(dict(item)).get("soft_404") is True
    for judged in ("http://a.example/gone", "http://honest.example/gone"):  # nothing kept
        assert "soft_404" not in pipeline.process_item({**item, "url": judged})
    assert crawler.stats.get_value("soft404/pages") == 1
