"""``scrapy crawl`` refuses what it cannot run with one line and exit status 2, before any
request; a crawl that fetched nothing because of errors ends with 1. No traceback for any."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.commands.crawl import crawl_exit_status
from tests.crawling import PROJECT, run_crawl, serve_pages, write_site
from tests.redis_support import fresh_key, start_redis

# a loopback seed on a port nothing listens on: even a broken check sends nothing outside
LOCAL = 'seeds = ["http://127.0.0.1:9/"]\n'


def scrapy_crawl(tmp_path: Path, *args: str, site: str = "local") -> subprocess.CompletedProcess:
    sites = tmp_path / "sites"
    if not sites.exists():
        write_site(sites, "local", LOCAL)
    settings = [
        f"SITES_DIR={sites}",
        "LOG_LEVEL=ERROR",
        f"INDEX_PATH={tmp_path / 'index.sqlite'}",
        f"RECORD_PATH={tmp_path / 'record.jsonl'}",
        "ALLOW_PRIVATE_ADDRESSES=True",
    ]
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", site, *(f"-s{s}" for s in settings), *args],
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def refusals(out: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in out.stderr, out.stderr
    return [line for line in out.stderr.splitlines() if "refused" in line]


def test_an_unknown_backend_is_refused_before_any_request(tmp_path: Path) -> None:
    out = scrapy_crawl(tmp_path, "-sFRONTIER_BACKEND=mongo")
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [
        "crawl local refused: FRONTIER_BACKEND: must be one of memory, redis, got 'mongo'"
    ]


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("FRONTIER_MIN_DELAY=abc", "FRONTIER_MIN_DELAY: must be a number >= 0, got 'abc'"),
        (
            "FRONTIER_HOST_CONCURRENCY=0",
            "FRONTIER_HOST_CONCURRENCY: must be an integer >= 1, got 0",
        ),
        (  # accepted once, then a traceback when the frontier opened
            "FRONTIER_MIN_DELAY=60",
            "FRONTIER_MIN_DELAY: must not exceed FRONTIER_MAX_DELAY (30, the project default),"
            " got 60",
        ),
        ("NEARDUP_ENABLED=yes", "NEARDUP_ENABLED: must be true or false, got 'yes'"),
        (  # a JSON list is read as one: the bad entry is named without the list's quotes
            'ALLOWED_NETWORKS=["127.0.0.2/32:8080", "10.0.0.0/33"]',
            "ALLOWED_NETWORKS: '10.0.0.0/33' does not appear to be an IPv4 or IPv6 network",
        ),
    ],
)
def test_a_bad_setting_value_is_one_line_naming_the_setting(
    tmp_path: Path, setting: str, line: str
) -> None:
    out = scrapy_crawl(tmp_path, f"-s{setting}")
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [f"crawl local refused: {line}"]


def test_a_politeness_value_refused_by_s_is_refused_in_a_site_config(tmp_path: Path) -> None:
    write_site(tmp_path / "sites", "local", LOCAL + "[politeness]\nmin_delay = 60\n")
    out = scrapy_crawl(tmp_path)
    assert out.returncode == 2
    assert refusals(out) == [
        f"crawl local refused: {tmp_path / 'sites' / 'local.toml'}: politeness.min_delay: must "
        "not exceed max_delay (30, the project default), got 60"
    ]
    assert "Usage" not in out.stderr  # Scrapy's usage banner came before the one line


@pytest.mark.parametrize(
    "networks", ['["127.0.0.2/32:{port}", "127.0.0.1/32:{port}"]', "127.0.0.1/32:{port},10.0.0.0/8"]
)
def test_the_readmes_json_list_of_networks_is_what_the_crawl_allows(
    tmp_path: Path, networks: str
) -> None:
    """``-s ALLOWED_NETWORKS='["...", "..."]'`` (the form docs/topics/identity.md gives) and
    ``a,b`` both allow their networks in a real crawl, private addresses otherwise refused."""
    with serve_pages("127.0.0.1", {"/": "<html><body>home</body></html>"}) as port:
        write_site(tmp_path / "sites", "local", f'seeds = ["http://127.0.0.1:{port}/"]\n')
        allowed = networks.format(port=port)
        out = scrapy_crawl(
            tmp_path,
            "-sALLOW_PRIVATE_ADDRESSES=False",
            f"-sALLOWED_NETWORKS={allowed}",
            f"-sSTATS_FILE={tmp_path / 'stats.json'}",
        )
    assert out.returncode == 0, out.stderr
    assert refusals(out) == []
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pages/status/200"] == 1
    assert not any(k.startswith("address_safety/refused") for k in stats)


def test_a_misspelt_setting_of_ours_is_refused_naming_where_it_was_given(tmp_path: Path) -> None:
    """A typo in a setting of ours was a warning, and the crawl ran without what its operator
    asked. Now it is refused before any request, in one line that says where the name came
    from and which setting was meant; Scrapy's and scrapy-redis's own names pass."""
    out = scrapy_crawl(
        tmp_path, "-sFRONTIER_MIN_DLEAY=0", "-sDNS_TIMEOUT=5", "-sREDIS_START_URLS_KEY=x"
    )
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [
        "crawl local refused: FRONTIER_MIN_DLEAY (given with -s or scrapyd's setting=): "
        "unknown setting; did you mean FRONTIER_MIN_DELAY?"
    ]
    write_site(tmp_path / "sites", "local", LOCAL + "[settings]\nROBOTSTXT_CACHE_EXPIRI = 1\n")
    out = scrapy_crawl(tmp_path)
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [
        f"crawl local refused: {tmp_path / 'sites' / 'local.toml'}: "
        "settings.ROBOTSTXT_CACHE_EXPIRI: unknown setting; did you mean ROBOTSTXT_CACHE_EXPIRY?"
    ]


def test_a_removed_setting_is_refused_from_s_and_from_a_site_config(tmp_path: Path) -> None:
    out = scrapy_crawl(tmp_path, "-sDNS_CONCURRENCY=10")
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [
        "crawl local refused: DNS_CONCURRENCY: no longer a setting: a constant of "
        "crawler/download/dns.py"
    ]
    write_site(tmp_path / "sites", "local", LOCAL + "[settings]\nGC_FREEZE_INTERVAL = 0\n")
    out = scrapy_crawl(tmp_path)
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [
        f"crawl local refused: {tmp_path / 'sites' / 'local.toml'}: settings.GC_FREEZE_INTERVAL: "
        "no longer a setting: a constant of crawler/extensions/gcpace.py"
    ]


def test_an_unknown_site_lists_the_sites(tmp_path: Path) -> None:
    out = scrapy_crawl(tmp_path, site="nosuch")
    assert out.returncode == 2, out.stderr
    assert refusals(out) == ["crawl nosuch refused: no site named 'nosuch'; the sites are: local"]


def test_seeds_file_problems_all_stop_the_crawl_the_same_way(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    not_utf8 = tmp_path / "latin1.txt"
    not_utf8.write_bytes(b"http://127.0.0.1:9/\nhttp://127.0.0.1:9/caf\xe9\n")
    out = scrapy_crawl(tmp_path, "-a", f"seeds={missing}")
    assert out.returncode == 2
    assert refusals(out) == [
        f"crawl local refused: {missing}: cannot read seeds file: No such file or directory "
        "(-a seeds= takes a seeds file, or URLs with their scheme: https://...)"
    ]
    out = scrapy_crawl(tmp_path, "-a", f"seeds={not_utf8}")
    assert out.returncode == 2
    [line] = refusals(out)
    assert line.startswith(f"crawl local refused: {not_utf8}: seeds file is not UTF-8 text")
    out = scrapy_crawl(tmp_path, "-a", "seeds=")
    assert out.returncode == 2
    assert refusals(out) == [
        "crawl local refused: -a seeds=: the seeds argument names no URL and no file"
    ]


def test_a_crawl_with_no_valid_seed_exits_2(tmp_path: Path) -> None:
    write_site(tmp_path / "sites", "local", "")
    out = scrapy_crawl(tmp_path, "-sLOG_LEVEL=INFO")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "No valid seeds to crawl" in out.stderr
    # a frontier in memory holds nothing: it said it worked on what the frontier held
    assert "No seeds of its own" not in out.stderr


def test_a_crawl_whose_every_seed_is_unreachable_exits_1(tmp_path: Path) -> None:
    out = scrapy_crawl(
        tmp_path, '-sTUNING={"robots_retry_delay": 0.2}', "-sRETRY_TIMES=0", "-sDOWNLOAD_TIMEOUT=5"
    )
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_exit_status_from_stats() -> None:
    assert crawl_exit_status({"pages/status/200": 3, "robotstxt/response_count": 1}) == 0
    # a crawl that found only broken links did fetch pages
    assert crawl_exit_status({"pages/status/404": 1, "downloader/exception_count": 3}) == 0
    assert crawl_exit_status({"response_received_count": 1}) == 0  # without the summary's tally
    assert crawl_exit_status({"seeds/none": 1}) == 2
    assert crawl_exit_status({"seeds/none": 1, "frontier/seen": 0}) == 2
    # a worker that joined a shared crawl with nothing left to fetch: not a usage error
    assert crawl_exit_status({"seeds/none": 1, "frontier/seen": 4}) == 0
    assert crawl_exit_status({"seeds/valid": 1, "downloader/exception_count": 3}) == 1
    stopped = {"seeds/valid": 1, "downloader/exception_count": 3, "finish_reason": "shutdown"}
    assert crawl_exit_status(stopped) == 0  # Ctrl-C before the first page: not a failure
    assert crawl_exit_status({"seeds/valid": 1, "finish_reason": "frontier_refused"}) == 2
    # robots.txt answered (5xx) but no page was fetched: still nothing crawled
    assert crawl_exit_status({"robotstxt/response_count": 2, "robotstxt/unreachable": 2}) == 1
    # a shared crawl's worker whose own share failed, while the crawl fetched pages
    failed_share = {"robotstxt/unreachable": 2, "fleet/pages": 40}
    assert crawl_exit_status(failed_share) == 0
    assert crawl_exit_status({**failed_share, "fleet/pages": 0}) == 1


def test_seeds_given_as_urls_are_crawled(tmp_path: Path) -> None:
    """``-a seeds=`` takes URLs: one, or several separated by commas or spaces; a comma inside
    a URL stays in it. (It took a file only: a URL was read as the path ``http:/host``.)"""
    # the comma may travel percent-encoded (the URL's canonical form): either is that page
    paths = ("/", "/a?ids=1,2", "/a?ids=1%2C2", "/b")
    pages = {p: f"<html><body>page {p}</body></html>" for p in paths}
    with serve_pages("127.0.0.1", pages) as port:
        write_site(tmp_path / "sites", "local", "")
        base = f"http://127.0.0.1:{port}"
        out = scrapy_crawl(
            tmp_path, "-a", f"seeds={base}/,{base}/a?ids=1,2 {base}/b",
            f"-sSTATS_FILE={tmp_path / 'stats.json'}", "-sFRONTIER_MIN_DELAY=0",
        )
    assert out.returncode == 0, out.stderr
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["seeds/valid"] == 3
    assert stats["pages/status/200"] == 3 and "pages/status/404" not in stats


@pytest.mark.parametrize(
    ("argument", "hint"),
    [("seed", "did you mean -a seeds=?"), ("url", "the arguments are: -a seeds=")],
)
def test_an_unknown_spider_argument_is_refused(tmp_path: Path, argument: str, hint: str) -> None:
    """Scrapy sets any ``-a`` on the spider and crawls on: ``-a seed=URL`` crawled without it."""
    out = scrapy_crawl(tmp_path, "-a", f"{argument}=http://127.0.0.1:9/", "-a", "_job=scrapyd")
    assert out.returncode == 2, out.stderr
    assert refusals(out) == [
        f"crawl local refused: unknown spider argument -a {argument}=; {hint} (-a seeds= takes "
        "a URL, several separated by commas, or a seeds file)"
    ]


def test_a_redis_crawl_without_a_redis_server_named_is_refused(tmp_path: Path) -> None:
    """It used redis://localhost:6379 silently (a trial crawl filled another service's Redis);
    ``scrapy frontier`` too."""
    out = scrapy_crawl(tmp_path, "-sFRONTIER_BACKEND=redis")
    assert out.returncode == 2, out.stderr
    line = (
        "FRONTIER_BACKEND=redis needs the crawl's Redis: add -s REDIS_URL=redis://HOST:6379/0 "
        "(there is no default server)"
    )
    assert refusals(out) == [f"crawl local refused: {line}"]
    status = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "local", "-sFRONTIER_BACKEND=redis",
         f"-sSITES_DIR={tmp_path / 'sites'}"],
        cwd=PROJECT, env=dict(os.environ, PYTHONPATH=str(PROJECT)), capture_output=True,
        text=True, timeout=120, check=False,
    )
    assert status.returncode == 2
    assert line in status.stderr


def test_a_finished_jobdir_crawl_run_again_says_so(tmp_path: Path) -> None:
    """It printed "0 pages OK" and exited 0 as if it had crawled."""
    jobdir = tmp_path / "job"
    with serve_pages("127.0.0.1", {"/": "<html><body>home</body></html>"}) as port:
        write_site(tmp_path / "sites", "local", f'seeds = ["http://127.0.0.1:{port}/"]\n')
        first = scrapy_crawl(tmp_path, f"-sJOBDIR={jobdir}")
        again = scrapy_crawl(tmp_path, f"-sJOBDIR={jobdir}", "-sLOG_LEVEL=WARNING")
    assert first.returncode == 0 and "already finished" not in first.stderr, first.stderr
    assert again.returncode == 0, again.stderr
    [line] = again.stderr.splitlines()
    assert line.startswith(
        f"crawl local: nothing left to fetch: the crawl kept in JOBDIR {jobdir} had already "
        "finished ("
    )
    assert line.endswith(f"seen). To crawl afresh, give another JOBDIR or delete {jobdir}")


def test_a_crawl_prints_a_progress_line_within_seconds(tmp_path: Path) -> None:
    """The first came after TUNING's progress_interval (30 s): a crawl looked stuck. Three
    pages of one host 3 s apart take 6 s at least, so the first line (at 5 s) comes before the
    crawl ends."""
    pages = {"/": '<a href="/a">a</a><a href="/b">b</a>', "/a": "a", "/b": "b"}
    with serve_pages("127.0.0.1", pages) as port:
        write_site(tmp_path / "sites", "local", f'seeds = ["http://127.0.0.1:{port}/"]\n')
        out = scrapy_crawl(
            tmp_path, "-sLOG_LEVEL=INFO", "-sFRONTIER_MIN_DELAY=3", "-sROBOTSTXT_OBEY=False"
        )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.splitlines()
    closing = next(i for i, line in enumerate(lines) if "Closing spider" in line)
    assert any("[crawler.extensions.progress] INFO: Crawled " in ln for ln in lines[:closing])


def test_a_crawl_stored_by_another_version_is_refused_before_any_request(tmp_path: Path) -> None:
    """One line naming the crawl and what to do, exit status 2, nothing asked of the site.
    (Stored between that check and the frontier's opening, the crawl ends ``frontier_refused``:
    status 2 as well, ``test_exit_status_from_stats``.)"""
    redis = start_redis(tmp_path)
    key = fresh_key()
    asked: list[str] = []
    try:
        with redis.client() as client:
            client.hset("{" + key + "}:meta", "layout", "0")
        with serve_pages("127.0.0.1", {"/": "<html><body>one page</body></html>"}) as port:
            result = run_crawl(
                tmp_path,
                seeds=[f"http://127.0.0.1:{port}/"],
                settings={
                    "FRONTIER_BACKEND": "redis",
                    "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
                    "FRONTIER_REDIS_KEY": key,
                    "ALLOW_PRIVATE_ADDRESSES": True,
                },
            )
            asked = [line for line in result.log.splitlines() if "Crawled (" in line]
    finally:
        redis.stop()
    assert result.returncode == 2, result.log[-3000:]
    log = (tmp_path / "crawl.log").read_text()
    refusals = [line for line in log.splitlines() if " refused: " in line]
    assert len(refusals) == 1 and "stored by another version" in refusals[0], refusals
    assert "FRONTIER_RESET=True" in refusals[0]
    assert asked == []
