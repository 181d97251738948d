"""Per-host failure handling for a broad crawl (issue 36), in one real crawl of a hostile server:
a host answering 503 to half its pages and a host that accepts and never answers are held
longer at each failure, then given up and counted; a normal host next to them is crawled whole.
Judged from the server's record, the crawl's stats and its log."""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import pytest

from tests import hostile as h
from tests.crawling import finish_crawl, loopback_settings, run_crawl, start_crawl
from tests.test_metrics import free_port, samples, scrape

HALF, HANG, NORMAL = "127.0.0.161", "127.0.0.162", "127.0.0.163"
ONE_HANGS = "127.0.0.164"  # one page never answers, the others do: the host is kept
PAGES = 30
MIN_DELAY = 0.2
MAX_FAILURES = 3  # in a row
WINDOW, RATIO = 10, 0.5  # or 5 of the last 10


def half_failing(req: h.Req, conn: h.Conn) -> None:
    """Odd pages answer 503 (Retry-After 0: the server asks for no wait), even pages 200."""
    n = int(req.path.rsplit("/", 1)[1].split(".")[0])
    if n % 2:
        conn.answer(503, [*h.HTML, ("Retry-After", "0")], b"<html>busy</html>")
    else:
        conn.answer(200, h.HTML, h.links_page([], f"page {n}"))


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("host_failures")
    server = h.HostileServer()
    robots = h.page("User-agent: *\nAllow: /\n", headers=[("Content-Type", "text/plain")])
    home = h.page(h.links_page([f"/p/{i}.html" for i in range(PAGES)], "home"))
    for address in (HALF, HANG):
        server.route(address, "/robots.txt", robots)
        server.route(address, "/", home)
    server.route(HALF, "/p/", half_failing, prefix=True)
    server.route(HANG, "/p/", h.silent(), prefix=True)
    normal = h.normal_site(server, NORMAL, pages=5)
    h.normal_site(server, ONE_HANGS, pages=4)
    server.route(ONE_HANGS, "/p/0.html", h.silent())
    with server:
        result = run_crawl(
            tmp,
            seeds=[server.url(a) for a in (HALF, HANG, NORMAL, ONE_HANGS)],
            settings=loopback_settings(
                FRONTIER_MIN_DELAY=MIN_DELAY,
                FRONTIER_HOST_MAX_FAILURES=MAX_FAILURES,
                TUNING={"host_failure_window": WINDOW, "host_failure_ratio": RATIO},
                DOWNLOAD_TIMEOUT=1,
                RETRY_TIMES=1,  # a 503 asked again once too
            ),
            timeout=120,
        )
        server.wait_idle()
        yield result, server, normal


def page_hits(server: h.HostileServer, address: str) -> list[h.Hit]:
    return sorted(server.hits_of(address, "/p/"), key=lambda x: x.start)


def test_a_host_answering_503_to_half_its_pages_is_given_up(crawl) -> None:
    """Each 503 counts as a failed fetch (it used to count as an answer, so such hosts were
    never given up): the 5th failure among the last 10 fetches ends the host long before its
    30 pages, and the rests after its failures grow."""
    result, server, _ = crawl
    assert result.returncode == 0, result.log[-3000:]
    hits = page_hits(server, HALF)
    failures = [x for x in hits if x.status == 503]
    assert len(failures) <= WINDOW * RATIO + 1  # given up at the rule's threshold
    assert len({x.path for x in hits}) < PAGES // 2
    assert [x.status for x in hits].count(503) >= MAX_FAILURES
    # the rest after a failure: the delay, plus min_delay x 2^(failures - 1)
    rests = [b.start - a.end for a, b in pairwise(hits) if a.status == 503]
    assert rests and rests[-1] >= MIN_DELAY * 2 - 0.02
    assert max(rests) > min(rests)


def test_a_hanging_host_is_backed_off_then_given_up(crawl) -> None:
    """A host that accepts and never answers: each timeout holds it longer (it stops taking a
    download slot at every turn), and MAX_FAILURES timeouts in a row give it up."""
    _, server, _ = crawl
    hits = page_hits(server, HANG)
    assert len(hits) == MAX_FAILURES, [(x.path, x.start, x.end) for x in hits]
    rests = [b.start - a.end for a, b in pairwise(hits)]
    # after the 1st failure: 0.2 + 0.2; after the 2nd: 0.2 + 0.4 (the server's end stamp is
    # when the client hung up, a hair after its timeout)
    assert rests[0] >= 2 * MIN_DELAY - 0.05 and rests[1] >= 3 * MIN_DELAY - 0.05


def test_both_are_counted_not_logged_as_errors(crawl) -> None:
    """Two hosts given up and their URLs dropped, a URL whose retries ran out: each counted
    with its reason in the stats and the summary, no ERROR line for any (Scrapy's own retry
    middleware logs "Gave up retrying" at ERROR); the normal hosts are crawled whole."""
    result, server, normal = crawl
    stats = result.stats
    assert stats.get("frontier/hosts_given_up/host_dead") == 2
    assert stats.get("frontier/dropped/host_dead", 0) > 0
    assert stats.get("retry/gave_up/DownloadTimeoutError") == 1  # ONE_HANGS's silent page
    assert [x.status for x in server.hits_of(ONE_HANGS, "/p/0.html")] == [0, 0]
    assert " ERROR: " not in result.log, [ln for ln in result.log.splitlines() if "ERROR" in ln]
    [given_up] = [ln for ln in result.log.splitlines() if ln.startswith("  URLs given up: ")]
    assert "retries used up: DownloadTimeoutError 1" in given_up
    assert f"dropped: host_dead {stats['frontier/dropped/host_dead']}" in given_up
    assert {x.path for x in server.hits_of(NORMAL)} == normal
    assert {x.path for x in server.hits_of(ONE_HANGS) if x.status == 200} == {
        "/", "/robots.txt", "/p/1.html", "/p/2.html", "/p/3.html"}


def test_the_share_of_slots_a_hanging_host_holds_is_served(tmp_path: Path) -> None:
    """``crawler_download_slots_held_long`` counts the requests in the downloader for over half
    of DOWNLOAD_TIMEOUT, beside ``crawler_download_slots``: scraped while a host hangs, it is
    1 of 4, and 0 once the host is given up."""
    port = free_port()
    server = h.HostileServer()
    robots = h.page("User-agent: *\nAllow: /\n", headers=[("Content-Type", "text/plain")])
    server.route(HANG, "/robots.txt", robots)
    server.route(HANG, "/", h.page(h.links_page(["/p/0.html"], "home")))
    server.route(HANG, "/p/0.html", h.silent())
    held: list[tuple[float, float]] = []
    with server:
        proc = start_crawl(
            tmp_path, seeds=[server.url(HANG)],
            settings=loopback_settings(
                METRICS_PORT=port, TUNING={"metrics_interval": 0.1, "metrics_linger": 60},
                CONCURRENT_REQUESTS=4, DOWNLOAD_TIMEOUT=2, RETRY_TIMES=0,
                FRONTIER_HOST_MAX_FAILURES=1,
            ),
        )
        while proc.poll() is None:  # scrape until the crawl has ended
            try:
                last = samples(scrape(port))
            except OSError:
                time.sleep(0.05)
                continue
            if ("crawler_download_slots_held_long", ()) not in last:
                # not this crawl's exposition yet (seen once in CI: the scrape answered, the
                # gauges missing; the port is picked free before the crawl binds it)
                time.sleep(0.05)
                continue
            held.append((last[("crawler_download_slots_held_long", ())],
                         last[("crawler_download_slots", ())]))
        result = finish_crawl(proc, tmp_path)
    assert result.returncode == 0, result.log[-3000:]
    assert (1.0, 4.0) in held
    assert held[-1] == (0.0, 4.0)
