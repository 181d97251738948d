"""The crawl record and ``scrapy report``: real crawls of the devsite, the report opened in a
real browser (Debian's chromium driven by Playwright), every chart checked against the crawl's
own stats and the server's record of requests.

Without chromium or Playwright the browser test is skipped, except under CI (``CI=true``),
where it fails: CI must not go green by testing nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler.report.build import build_report, politeness
from crawler.report.recordfile import RecordWriter, read_records
from devsite import HostSpec, build_site
from devsite.routed import Ask, RoutedSiteServer
from tests.crawling import (
    PROJECT,
    CrawlResult,
    finish_crawl,
    per_host,
    run_crawl,
    scrapy_frontier,
    start_crawl,
    write_site,
)
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

CHROMIUM = "/usr/bin/chromium"
MIN_DELAY, FACTOR = 0.15, 2.0
HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
CRAWL_DELAY_HOST, CRAWL_DELAY = "127.0.0.4", 0.3
BROKEN = ("127.0.0.2", "/p/3.html")
BUSY = ("127.0.0.3", "/p/2.html")  # answers 503 with Retry-After once: the host is held
RETRY_AFTER = 1


def _robots(ask: Ask) -> tuple[int, list[tuple[str, str]], bytes]:
    body = "User-agent: *\nDisallow: /private/\n"
    if ask.address == CRAWL_DELAY_HOST:
        body += f"Crawl-delay: {CRAWL_DELAY}\n"
    return 200, [("Content-Type", "text/plain")], body.encode()


def _site() -> RoutedSiteServer:
    graph = build_site(
        [HostSpec(HOSTS[0], pages=12), HostSpec(HOSTS[1], pages=10, delay=0.05),
         HostSpec(HOSTS[2], pages=6)],
        links_per_page=4,
        cross_host_links=1,
    )  # fmt: skip
    server = RoutedSiteServer(graph)
    for host in HOSTS:
        server.route(host, "/robots.txt", _robots)
    server.route(*BROKEN, lambda ask: (404, [("Content-Type", "text/html")], b"gone"))
    answered: list[int] = []

    def busy_once(ask: Ask) -> tuple[int, list[tuple[str, str]], bytes] | None:
        if answered:
            return None  # the page itself
        answered.append(503)
        return 503, [("Retry-After", str(RETRY_AFTER)), ("Content-Type", "text/plain")], b"busy"

    server.route(*BUSY, busy_once)
    return server


def _site_config(tmp: Path) -> Path:
    sites = tmp / "sites"
    write_site(
        sites,
        "reportsite",
        "allow_private_addresses = true\n"
        f"[scope]\nhosts = {json.dumps(list(HOSTS))}\n"
        "[urls]\nmax_depth = 6\n"
        f"[politeness]\nmin_delay = {MIN_DELAY}\ndelay_factor = {FACTOR}\n",
    )
    return sites


def _report(*targets: Path | str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "report", *map(str, targets), "-o", str(out)],
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("report")
    with _site() as server:
        result = run_crawl(
            tmp,
            "reportsite",
            seeds=server.seeds()[:1],
            sites_dir=_site_config(tmp),
            settings={"TUNING": {"record_interval": 0.5}, "LOG_LEVEL": "INFO"},
        )
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    report = tmp / "report.html"
    out = _report(tmp / "stats.record.jsonl", out=report)
    assert out.returncode == 0, out.stderr
    return {"tmp": tmp, "result": result, "records": records, "report": report}


@pytest.mark.integration
def test_the_record_holds_every_fetch_and_the_delay_asked(crawl: dict[str, Any]) -> None:
    result: CrawlResult = crawl["result"]
    path = crawl["tmp"] / "stats.record.jsonl"  # next to STATS_FILE
    record = read_records([path])
    assert record.bad_lines == 0
    assert [s.reason for s in record.sessions] == ["finished"]
    server = per_host(crawl["records"])
    fetched = Counter(f.host for f in record.fetches)
    assert fetched == {host: len(recs) for host, recs in server.items()}
    assert len(record.fetches) == result.stats["downloader/response_count"]
    for f in record.fetches:
        assert f.asked >= MIN_DELAY - 1e-3
        assert f.asked >= min(FACTOR * (f.end - f.start), 30.0) - 2e-3
        if f.host == CRAWL_DELAY_HOST:
            assert f.asked >= CRAWL_DELAY - 1e-3
    held = [f for f in record.fetches if f.status == 503]
    assert len(held) == 1 and held[0].asked >= RETRY_AFTER - 0.05  # the Retry-After hold
    assert [h[0] for h in record.holds] == [BUSY[0]]
    # the real gaps (what the server saw) are never below the delay the record says was asked
    for host, hp in politeness(record).items():
        assert hp.short == 0, host
        assert hp.gap_count == len(server[host]) - 1
    last = record.sessions[0].snapshots[-1]
    assert last["pages"] == result.stats["response_received_count"]
    assert last["seen"] == result.stats["frontier/seen"]
    assert last["queued"] == 0
    assert [b["url"].split(":", 2)[2].split("/", 1)[1] for b in record.broken] == [
        BROKEN[1][1:]
    ]
    # with the page it was found on: one whose item lists the broken URL among its links
    [broken] = record.broken
    assert broken["referer"] in _linking_pages(result.items, broken["url"])
    # compact: one short line per fetch, the rest per snapshot interval
    assert path.stat().st_size / len(record.fetches) < 400


def _browser() -> Any:
    """Playwright's chromium on Debian's /usr/bin/chromium (never a downloaded browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (pip install -r requirements-dev.txt)"
    else:
        if shutil.which(CHROMIUM) or Path(CHROMIUM).exists():
            return sync_playwright
        missing = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(missing + ": required under CI")
    pytest.skip(missing)


def _open_in_chromium(report: Path) -> dict[str, Any]:
    """Load the report from disk; collect console messages, page errors, every request, and
    each chart's marks and numbers from the rendered DOM."""
    sync_playwright = _browser()
    console: list[tuple[str, str]] = []
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        # --no-sandbox: CI and the developers' machines run tests as root
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: console.append((m.type, m.text)))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(report.as_uri(), wait_until="load")
            page.wait_for_timeout(300)  # anything late (none expected) would show up here
            charts = page.evaluate(_READ_CHARTS)
            summary = page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('[data-summary]')]"
                ".map(e => [e.dataset.summary, e.querySelector('dd').textContent]))"
            )
            broken = page.evaluate(
                "[...document.querySelectorAll('table[data-table=broken] tr[data-status]')]"
                ".map(r => [r.cells[0].textContent, Number(r.dataset.status),"
                " r.cells[2].textContent])"
            )
        finally:
            browser.close()
    return {"console": console, "errors": errors, "requests": requests, "charts": charts,
            "summary": summary, "broken": broken}  # fmt: skip


_READ_CHARTS = """() => [...document.querySelectorAll('figure[data-chart]')].map(fig => {
  const svg = fig.querySelector('svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const bars = [...fig.querySelectorAll('g.bar')].map(g => {
    const r = g.querySelector('rect').getBoundingClientRect();
    return [g.dataset.label, Number(g.dataset.value), r.width];
  });
  const series = Object.fromEntries([...fig.querySelectorAll('g.series, g.dots')].map(g => {
    const shape = g.querySelector('polyline, circle');
    const r = shape ? shape.getBoundingClientRect() : {width: 0, height: 0};
    return [g.dataset.series, {points: Number(g.dataset.points), last: Number(g.dataset.last),
      max: Number(g.dataset.max), flagged: Number(g.dataset.flagged || 0),
      drawn: r.width + r.height}];
  }));
  return {chart: fig.dataset.chart, data: {...fig.dataset}, kind: svg && svg.dataset.kind,
          width: box.width, height: box.height, bars, series};
})"""


@pytest.mark.integration
def test_the_report_renders_the_crawls_numbers_in_chromium(crawl: dict[str, Any]) -> None:
    stats = crawl["result"].stats
    server = per_host(crawl["records"])
    report: Path = crawl["report"]
    seen = _open_in_chromium(report)
    assert seen["errors"] == []
    assert [m for m in seen["console"] if m[0] in ("error", "warning")] == []
    assert seen["requests"] == [report.as_uri()]  # no network, no other file

    charts = {c["chart"]: c for c in seen["charts"]}
    expected = {
        "rate", "frontier", "seen", "host-states", "problems", "response-times", "host-times",
        "status", "hosts", "content-types", "depth", "rejections", "duplicates", "robots",
        "workers", "languages",
    } | {f"gaps-{i}" for i in range(len(HOSTS))}  # fmt: skip
    assert set(charts) == expected
    for name, c in charts.items():
        assert c["kind"] in ("bar", "line"), name  # no "nothing recorded" placeholder
        assert c["width"] > 100 and c["height"] > 20, name
        assert c["bars"] or c["series"], name
        assert all(width > 0 for _, value, width in c["bars"] if value > 0), name
        assert all(s["drawn"] > 0 for s in c["series"].values() if s["points"]), name

    def bars(name: str) -> dict[str, float]:
        return {label: value for label, value, _ in charts[name]["bars"]}

    def stat_group(prefix: str, skip: tuple[str, ...] = ()) -> dict[str, float]:
        return {
            k[len(prefix):]: v for k, v in stats.items()
            if k.startswith(prefix) and k not in skip and isinstance(v, int) and v
        }  # fmt: skip

    pages = stats["response_received_count"]
    assert int(charts["rate"]["data"]["total"]) == pages
    assert seen["summary"]["pages"] == f"{pages:,}"
    assert charts["seen"]["series"]["seen"]["last"] == stats["frontier/seen"]
    assert charts["frontier"]["series"]["queued"]["last"] == stats["frontier/queued_at_close"]
    assert charts["rate"]["series"]["all workers"]["max"] > 0
    problems = charts["problems"]["series"]
    assert problems["fetches failed (no answer)"]["last"] == 0
    assert problems["HTTP errors (4xx, 5xx)"]["last"] == sum(
        v for k, v in stat_group("downloader/response_status_count/").items() if int(k) >= 400
    )
    assert problems["URLs rejected"]["last"] == sum(
        stat_group("frontier/rejected/", skip=("frontier/rejected/seen",)).values()
    )
    assert bars("status") == stat_group("downloader/response_status_count/")
    assert bars("rejections") == stat_group(
        "frontier/rejected/", skip=("frontier/rejected/seen",)
    )
    assert bars("robots") == stat_group("robotstxt/")
    assert bars("languages") == stat_group("language/", skip=("language/html_lang_differs",))
    assert bars("duplicates")["URL already seen"] == stats["frontier/rejected/seen"]
    assert sum(bars("depth").values()) == pages
    assert sum(bars("content-types").values()) == pages
    # every response that reached the spider: the items, and the 404 page (no item)
    items = crawl["result"].items
    types = Counter((i["content_type"] or "-").split(";")[0].strip().lower() for i in items)
    assert bars("content-types") == dict(types + Counter({"text/html": 1}))
    depths = Counter(f"depth {i['depth']}" for i in items)
    assert Counter(bars("depth")) - depths == {f"depth {_depth_of(items, BROKEN[1])}": 1}
    fetches = {host: len(recs) for host, recs in server.items()}
    assert bars("hosts") == fetches
    assert bars("workers") == {next(iter(bars("workers"))): sum(fetches.values())}
    assert sum(bars("response-times").values()) == stats["downloader/response_count"]
    assert set(bars("host-times")) == set(HOSTS)
    gaps = {c["data"]["host"]: c for n, c in charts.items() if n.startswith("gaps-")}
    assert set(gaps) == set(HOSTS)
    for host, c in gaps.items():
        assert int(c["data"]["fetches"]) == fetches[host]
        assert int(c["data"]["gaps"]) == fetches[host] - 1
        assert int(c["data"]["short"]) == 0
        assert c["series"]["real gap"]["points"] == fetches[host] - 1
        assert c["series"]["real gap"]["flagged"] == 0
        assert c["series"]["delay asked"]["max"] >= (
            RETRY_AFTER - 0.05 if host == BUSY[0] else MIN_DELAY
        )
    assert [(url.rsplit("/", 2)[-2:], status) for url, status, _ in seen["broken"]] == [
        (["p", "3.html"], 404)
    ]
    [(url, _, linked_from)] = seen["broken"]
    assert linked_from in _linking_pages(items, url)  # the "linked from" column


def _linking_pages(items: list[dict[str, Any]], url: str) -> set[str]:
    """The URLs of the fetched pages that link to ``url``."""
    pages = {i["url"] for i in items if any(o["url"] == url for o in i["outlinks"])}
    assert pages, f"no page links to {url}"
    return pages


def _depth_of(items: list[dict[str, Any]], linked_path: str) -> int:
    """The depth of a page that yielded no item: one below the shallowest page linking it."""
    return 1 + min(
        i["depth"] for i in items if any(o["url"].endswith(linked_path) for o in i["outlinks"])
    )


@pytest.mark.integration
def test_past_the_fetch_limit_hosts_are_summed_per_interval(tmp_path: Path) -> None:
    with _site() as server:
        result = run_crawl(
            tmp_path,
            "reportsite",
            seeds=server.seeds()[:1],
            sites_dir=_site_config(tmp_path),
            settings={"TUNING": {"record_max_fetches": 10},
                      "JOBDIR": tmp_path / "job", "LOG_LEVEL": "INFO"},
        )  # fmt: skip
        records = server.records
    assert result.returncode == 0, result.log[-3000:]
    record = read_records([tmp_path / "job" / "record.jsonl"])  # in the JOBDIR
    assert len(record.fetches) == 10
    assert record.aggregates and all(a.n >= 1 for a in record.aggregates)
    hosts = politeness(record)
    server = {host: len(recs) for host, recs in per_host(records).items()}
    assert {h: hp.fetches for h, hp in hosts.items()} == server
    assert all(hp.short == 0 for hp in hosts.values())
    assert sum(hp.gap_count for hp in hosts.values()) == sum(server.values()) - len(server)
    out = _report(tmp_path / "job", out=tmp_path / "report.html")  # a JOBDIR as the argument
    assert out.returncode == 0, out.stderr
    assert "data-chart=\"hosts\"" in (tmp_path / "report.html").read_text()


@pytest.mark.integration
def test_workers_of_one_redis_crawl_make_one_report(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key = fresh_key()
    sites = _site_config(tmp_path)
    dirs = [tmp_path / "w0", tmp_path / "w1"]
    for d in dirs:
        d.mkdir()

    def settings(i: int) -> dict[str, Any]:
        return {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
            "FRONTIER_REDIS_KEY": key,
            "TUNING": {"read_ahead": 2, "record_interval": 0.5},
            "RECORD_WORKER_ID": f"w{i}",
            "INDEX_PATH": dirs[i] / "index.sqlite",
            "LOG_LEVEL": "INFO",
        }

    control = {k: v for k, v in settings(0).items() if k.startswith(("FRONTIER_", "REDIS_"))}
    # paused until both workers are up: on a loaded machine the first one could otherwise
    # finish the site before the second has started
    assert scrapy_frontier(control, "pause").returncode == 0
    with _site() as server:
        procs = [start_crawl(dirs[0], "reportsite", seeds=server.seeds(), sites_dir=sites,
                             settings=settings(0))]  # fmt: skip
        client = redis_server.client()
        deadline = time.monotonic() + 30
        while not client.hexists("{" + key + "}:meta", "layout"):
            assert time.monotonic() < deadline, "the first worker never seeded the crawl"
            time.sleep(0.05)
        procs.append(start_crawl(dirs[1], "reportsite", sites_dir=sites, settings=settings(1)))
        deadline = time.monotonic() + 60
        while client.hlen("{" + key + "}:workers") < 2:
            assert time.monotonic() < deadline, "the second worker never joined"
            time.sleep(0.05)
        assert scrapy_frontier(control, "resume").returncode == 0
        results = [finish_crawl(p, d) for p, d in zip(procs, dirs, strict=True)]
        records = server.records
    for r in results:
        assert r.returncode == 0, r.log[-3000:]
    files = [d / "stats.record.jsonl" for d in dirs]
    out = _report(*files, out=tmp_path / "report.html")
    assert out.returncode == 0, out.stderr
    record = read_records(files)
    assert record.workers == ["w0", "w1"]
    by_worker = Counter(f.worker for f in record.fetches)
    assert set(by_worker) == {"w0", "w1"}  # both took part
    server = {host: len(recs) for host, recs in per_host(records).items()}
    assert dict(Counter(f.host for f in record.fetches)) == server
    # politeness across workers: gaps measured between fetches of different workers too
    assert all(hp.short == 0 for hp in politeness(record).values())
    html = (tmp_path / "report.html").read_text()
    for worker, n in by_worker.items():
        assert f'data-label="{worker}" data-value="{n}"' in html
        assert f'data-series="{worker}"' in html  # its own pages/s line


# -- the record format and the page, without a crawl --------------------------------------


def _two_workers(tmp: Path) -> list[Path]:
    a = RecordWriter(tmp / "a.jsonl", {"worker": "a", "site": "s"}, t0=1000.0)
    h = a.host("h.example")
    a.write(["f", h, 0, 100, 200, 500, 1000, 0])  # 0.0-0.1 s, asked 1 s
    a.write(["s", 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0])
    a.write(["s", 2000, 1, 500, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0])
    a.close()
    b = RecordWriter(tmp / "b.jsonl", {"worker": "b", "site": "s"}, t0=1000.5)
    h = b.host("h.example")
    b.write(["f", h, 0, 100, 404, 10, 1000, 1])  # starts 0.4 s after a's fetch ended
    b.write(["b", 100, "http://h.example/<script>alert(1)</script>", 404, None])
    b.write(["s", 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0])
    b.close()
    with open(tmp / "b.jsonl", "a") as f:
        f.write('["s",1500,1,10')  # a torn last line: the worker was killed
    return [tmp / "a.jsonl", tmp / "b.jsonl"]


def test_records_of_two_workers_merge_and_a_short_gap_is_flagged(tmp_path: Path) -> None:
    record = read_records(_two_workers(tmp_path))
    assert record.workers == ["a", "b"]
    assert record.bad_lines == 1
    hp = politeness(record)["h.example"]
    assert hp.fetches == 2 and hp.errors == 1
    assert hp.gaps == [(pytest.approx(1000.5), pytest.approx(0.4), 1.0)]
    assert hp.short == 1
    html = build_report(record)
    assert "<script" not in html and "&lt;script&gt;" in html  # URLs from the web, escaped
    assert 'data-short="1"' in html and "1 of 1" in html


def test_a_file_that_is_not_a_record_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "items.jsonl"
    other.write_text('{"url": "http://a/"}\n')
    out = _report(other, out=tmp_path / "r.html")
    assert out.returncode == 1 and "not a crawl record" in out.stderr
    out = _report("no-such-site", out=tmp_path / "r.html")
    assert out.returncode == 1 and "no crawl record" in out.stderr


def test_a_busy_hosts_gaps_are_thinned_but_no_short_gap_is_lost(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path / "r.jsonl", {"worker": "a", "site": "s"}, t0=0.0)
    h = w.host("busy.example")
    t = 0
    for i in range(5000):  # 50 ms fetches, gaps of 1.0-1.5 s asked 1 s; one gap of 0.5 s
        w.write(["f", h, t, 50, 200, 100, 1000, 0])
        t += 50 + (500 if i == 2500 else 1000 + (i * 37) % 500)
    w.write(["s", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    w.write(["s", t, 5000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    w.close()
    record = read_records([tmp_path / "r.jsonl"])
    html = build_report(record)
    dots = html.split('data-series="real gap"', 1)[1]
    drawn = int(dots.split('data-points="', 1)[1].split('"', 1)[0])
    assert 400 <= drawn <= 2 * 400 + 1
    assert 'data-flagged="1"' in dots.split("</g>", 1)[0]
    assert 'data-gaps="4999"' in html and 'data-short="1"' in html
    assert len(html) < 400_000
