"""Spider-trap defenses of the URL policy: session ids, far dates, query variants, subdomains.

Unit tests of the policy, then one real crawl of a host full of infinite URL spaces next to a
normal site, judged from the server's record.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from crawler.frontier.urls import HOSTING_SITES_FACTOR, UrlPolicy, normalize_url
from tests import hostile as h
from tests.crawling import CrawlResult, run_crawl, write_site

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (f"http://a.test/p?sid={TOKEN}&q=1", "http://a.test/p?q=1"),
        (f"http://a.test/p?PHPSESSID=x&q=1&jsessionid=y&sessid=z&sessionid={TOKEN}",
         "http://a.test/p?q=1"),
        (f"http://a.test/p;jsessionid={TOKEN.upper()}?q=1", "http://a.test/p?q=1"),
        (f"http://a.test/p?s={TOKEN}", "http://a.test/p"),
        # "sid" and "s" are also story ids and search terms: kept unless they look like a token
        ("http://a.test/story?sid=42", "http://a.test/story?sid=42"),
        ("http://a.test/?s=hello+world", "http://a.test/?s=hello+world"),
        ("http://a.test/?s=configuration", "http://a.test/?s=configuration"),
        ("http://a.test/?side=1&ssid=2", "http://a.test/?side=1&ssid=2"),
    ],
)
def test_session_ids_are_stripped(raw: str, normalized: str) -> None:
    assert normalize_url(raw)[0] == normalized


def test_far_dates_are_rejected() -> None:
    p = UrlPolicy(any_host=True, max_date_future_days=1095, max_date_past_days=3650,
                  today=date(2026, 11, 15))
    ok = ["/cal/2026/11", "/cal/2029/10", "/news/2017/01/02/x.html", "/e/2026-12-05.html",
          "/docs/1234/5", "/v/2.5/x", "/a/2031", "/p?year=2031", "/api/20310101"]
    far = ["/cal/2030/01", "/cal/2016/10", "/e/2099-01-01.html", "/p?d=2040-01-01",
           "/x/2150/1/"]
    assert [u for u in ok if p.check("http://a.test" + u)[0]] == []
    assert [p.check("http://a.test" + u)[0] for u in far] == ["date_distance"] * len(far)


def test_query_variants_per_path() -> None:
    p = UrlPolicy(any_host=True, max_query_variants=3)
    verdicts = [p.check(f"http://a.test/shop?a={i}")[0] for i in range(5)]
    assert verdicts == ["", "", "", "query_variants", "query_variants"]
    assert p.check("http://a.test/shop?a=1")[0] == ""  # a variant already admitted
    assert p.check("http://a.test/shop")[0] == ""  # no query
    assert p.check("http://a.test/other?a=9")[0] == ""  # another path
    assert p.check("http://a.test/shop?b=2&a=1")[0] == p.check("http://a.test/shop?a=1&b=2")[0]


def test_hosts_per_registered_domain() -> None:
    p = UrlPolicy(domains=["trap.co.uk", "fine.test"], hosts=["www.trap.co.uk"],
                  max_hosts_per_domain=3)
    hosts = [f"h{i}.trap.co.uk" for i in range(5)]
    assert [p.check(f"http://{x}/")[0] for x in hosts] == ["", "", "", "domain_hosts",
                                                           "domain_hosts"]
    assert p.check("http://www.trap.co.uk/")[0] == ""  # configured hosts are not counted
    assert p.check("http://h0.trap.co.uk/again")[0] == ""  # an admitted host stays admitted
    assert p.check("http://a.fine.test/")[0] == ""  # another domain, its own budget


def test_each_site_under_a_private_suffix_has_its_own_host_budget() -> None:
    """github.io and blogspot.com are rules of the public suffix list's private section: each
    user's site is its own registered domain, so a broad crawl's per-domain budget is not one
    budget for every GitHub Pages site; a trap under one user's site still shares one."""
    p = UrlPolicy(any_host=True, max_hosts_per_domain=2)
    users = [f"http://user{i}.github.io/" for i in range(5)]
    assert [p.check(u)[0] for u in users] == [""] * 5
    trap = [f"http://h{i}.alice.blogspot.com/" for i in range(4)]
    assert [p.check(u)[0] for u in trap] == ["", "", "domain_hosts", "domain_hosts"]
    assert p.check("http://bob.blogspot.com/")[0] == ""


def test_sites_minted_under_one_hosting_domain_share_a_larger_budget() -> None:
    """Anyone may mint sites under herokuapp.com (a private suffix): each has its own budget,
    but all of them together at most HOSTING_SITES_FACTOR times it; a restored crawl counts
    them again."""
    p = UrlPolicy(any_host=True, max_hosts_per_domain=2)
    minted = [f"http://u{i}.herokuapp.com/" for i in range(3 * HOSTING_SITES_FACTOR)]
    verdicts = [p.check(u)[0] for u in minted]
    assert verdicts.count("") == 2 * HOSTING_SITES_FACTOR
    assert p.check("http://alice.github.io/")[0] == ""  # another hosting domain: its own
    assert p.check("http://www.example.com/")[0] == ""
    resumed = UrlPolicy(any_host=True, max_hosts_per_domain=2)
    resumed.restore_hosts(u.split("/")[2] for u in minted[: 2 * HOSTING_SITES_FACTOR])
    assert resumed.check("http://new.herokuapp.com/")[0] == "domain_hosts"


def test_restored_hosts_count_against_their_domain() -> None:
    p = UrlPolicy(domains=["trap.co.uk"], hosts=["www.trap.co.uk"], max_hosts_per_domain=3)
    p.restore_hosts(["a.trap.co.uk", "b.trap.co.uk", "www.trap.co.uk"])  # www: in scope, free
    assert p.check("http://a.trap.co.uk/x")[0] == ""
    assert p.check("http://c.trap.co.uk/")[0] == ""
    assert p.check("http://d.trap.co.uk/")[0] == "domain_hosts"


def test_generated_subdomains_page_shares_one_budget() -> None:
    """The hostile server's subdomain page, its links fed to a crawl-wide policy."""
    p = UrlPolicy(any_host=True, max_hosts_per_domain=100)
    verdicts = []
    for _ in range(30):  # 30 pages of 10 fresh subdomains each
        body = h.links_page(f"http://h{i}x{len(verdicts)}.trap.test/" for i in range(10))
        hrefs = [x.split('"')[0] for x in body.decode().split('href="')[1:]]
        verdicts += [p.check(u)[0] for u in hrefs]
    assert verdicts.count("") == 100 and verdicts.count("domain_hosts") == 200


def test_off_at_zero() -> None:
    p = UrlPolicy(any_host=True)
    assert p.check("http://a.test/cal/2999/01?x=1")[0] == ""
    assert all(p.check(f"http://h{i}.a.test/?q={i}")[0] == "" for i in range(300))


def test_a_link_form_made_elsewhere_gives_the_same_verdicts() -> None:
    """The content thread computes ``link_form`` and the reactor checks with it: every reason,
    the budgets' state and the normalized URL come out as they do without it."""
    def policy() -> UrlPolicy:
        return UrlPolicy(hosts=["a.test"], domains=["trap.co.uk"], deny=[r"/private/"],
                         allow=[r"^https?://[^/]+/(?:docs|cal|x|shop|private)"], max_depth=3,
                         max_url_length=80, max_repeated_segments=2, max_query_variants=2,
                         max_date_future_days=1095, today=date(2026, 11, 15),
                         max_hosts_per_domain=2)
    urls = [
        "http://a.test/docs/x.html", "HTTP://A.test:80/docs/./y.html#f", "ftp://a.test/docs",
        "http://a.test:99999/docs", "http://[::1/docs", "http://b.test/docs",
        "http://a.test/private/p", "http://a.test/other", "http://a.test/x/a/x/a/x/a",
        "http://a.test/cal/2090/01", "http://a.test/shop?a=1", "http://a.test/shop?a=2",
        "http://a.test/shop?a=3", "http://u:p@a.test/docs/?sid=0123456789abcdef0123",
        "http://h1.trap.co.uk/docs", "http://h2.trap.co.uk/docs", "http://h3.trap.co.uk/docs",
        "http://a.test/docs/" + "z" * 80, "mailto:a@a.test", "http://a.test/docs/ü",
    ]
    plain, prepared, forms = policy(), policy(), policy()
    reasons = set()
    for depth in (1, 4, 2):
        expected = [plain.check(u, depth) for u in urls]
        assert [prepared.check(u, depth, form=forms.link_form(u)) for u in urls] == expected
        reasons |= {r for r, *_ in expected}
    assert reasons == {"", "scheme", "invalid_url", "out_of_scope", "too_deep", "denied",
                       "not_allowed", "repeated_segments", "date_distance", "query_variants",
                       "domain_hosts", "too_long"}


TRAPS, NORMAL = "127.0.0.91", "127.0.0.92"


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("traps")
    server, normal = _trap_server()
    with server:
        result = _crawl_traps(tmp, server)
        server.wait_idle()
        yield result, server, normal


def _trap_server() -> tuple[h.HostileServer, set[str]]:
    """Every trap on one host, and a normal 5-page site (its paths returned) on another."""
    server = h.HostileServer()
    server.route(TRAPS, "/cal/", h.calendar(), prefix=True)
    server.route(TRAPS, "/s/", h.session_ids(), prefix=True)
    server.route(TRAPS, "/shop", h.facets())
    server.route(TRAPS, "/g/", h.growing_path(), prefix=True)
    server.route(TRAPS, "/loop2/", h.relative_loop(), prefix=True)
    return server, h.normal_site(server, NORMAL, pages=5)


def _crawl_traps(tmp: Path, server: h.HostileServer, **settings: Any) -> CrawlResult:
    today = date.today()
    seeds = [f"/cal/{today.year}/{today.month:02d}", "/s/", "/shop", "/g/", "/loop2/"]
    # "web" stops at depth 20; a calendar walked a month a page needs more
    write_site(tmp / "sites", "traps", "[urls]\nmax_depth = 200\n")
    return run_crawl(
        tmp,
        "traps",
        sites_dir=tmp / "sites",
        seeds=[server.url(TRAPS, s) for s in seeds] + [server.url(NORMAL)],
        settings={
            "ALLOW_PRIVATE_ADDRESSES": True,
            "FRONTIER_MIN_DELAY": 0.01,
            "FRONTIER_DELAY_FACTOR": 0,
            "URL_MAX_QUERY_VARIANTS": 20,
            **settings,
            # a calendar walked back a year, not 30 (the knob beside any the test turns)
            "TUNING": {"url_date_past_days": 365, **settings.get("TUNING", {})},
        },
        timeout=120,
    )


def paths(server: h.HostileServer, prefix: str) -> list[str]:
    return [x.path for x in server.hits_of(TRAPS, prefix)]


def pages(server: h.HostileServer, prefix: str) -> list[str]:
    """The paths fetched, less their session ids (each visit of the trap mints new ones)."""
    return [p.partition("?sid=")[0] for p in paths(server, prefix)]


def test_calendar_stops_at_the_date_window(crawl) -> None:
    result, server, _ = crawl
    assert result.returncode == 0, result.log[-3000:]
    months = {tuple(int(x) for x in p.split("/")[2:4]) for p in paths(server, "/cal/")}
    today = date.today()
    index = sorted(y * 12 + m - 1 for y, m in months)
    now = today.year * 12 + today.month - 1
    assert index == list(range(index[0], index[-1] + 1))  # contiguous, walked both ways
    assert now - 13 <= index[0] <= now - 11 and now + 35 <= index[-1] <= now + 37
    assert result.stats["frontier/rejected/date_distance"] >= 2


def test_session_ids_make_no_new_urls(crawl) -> None:
    _, server, _ = crawl
    # each page once: the session id is left out of the seen key only (the request is the
    # link as found, so a site that needs its session gets it)
    assert sorted(pages(server, "/s/")) == ["/s/", *(f"/s/{i}" for i in range(5))]


def test_facets_are_capped_per_path(crawl) -> None:
    result, server, _ = crawl
    assert len(set(paths(server, "/shop?"))) == 20
    assert result.stats["frontier/rejected/query_variants"] > 0


def test_growing_paths_and_relative_loops_stop(crawl) -> None:
    _, server, _ = crawl
    assert max(p.count("/a") for p in paths(server, "/g/")) == 3
    assert max(p.count("/x") for p in paths(server, "/loop2/")) == 3


def test_normal_site_completes_next_to_the_traps(crawl) -> None:
    result, server, normal = crawl
    assert {x.path for x in server.hits_of(NORMAL)} == normal
    assert result.stats["finish_reason"] == "finished"


def test_links_taken_two_at_a_time_crawl_the_same(crawl, tmp_path: Path) -> None:
    """The same trap site with TUNING's link_slice = 2: every page's links go into the frontier
    a few per reactor turn, behind the pages before them, and the crawl fetches and counts the
    same (which 20 of the facet variants is the order of fetches' call, so only their number)."""
    result, _, _ = crawl
    server, _ = _trap_server()
    with server:
        sliced = _crawl_traps(tmp_path, server, TUNING={"link_slice": 2})
        server.wait_idle()
    assert sliced.returncode == 0, sliced.log[-3000:]
    assert sliced.stats["finish_reason"] == "finished"
    _, first, _ = crawl
    for prefix in ("/cal/", "/s/", "/g/", "/loop2/"):
        assert sorted(pages(server, prefix)) == sorted(pages(first, prefix)), prefix
    assert len(set(paths(server, "/shop?"))) == len(set(paths(first, "/shop?"))) == 20
    assert {x.path for x in server.hits_of(NORMAL)} == {x.path for x in first.hits_of(NORMAL)}
    counted = ("frontier/enqueued", "frontier/rejected/date_distance",
               "frontier/rejected/repeated_segments", "frontier/rejected/seen")
    assert [sliced.stats.get(k) for k in counted] == [result.stats.get(k) for k in counted]


@pytest.mark.parametrize("demotion", [0, 4])
def test_duplicate_pages_push_their_links_deeper(tmp_path, demotion: int) -> None:
    """A calendar's months are one page to the near-duplicate detector (digits masked): each
    month's links go neardup_link_demotion (TUNING) levels deeper, so the site's max_depth (20, as
    for "web") ends the walk after a few months instead of 20 each way."""
    server = h.HostileServer()
    server.route(TRAPS, "/cal/", h.calendar(), prefix=True)
    normal = h.normal_site(server, NORMAL, pages=5)
    today = date.today()
    write_site(tmp_path / "sites", "traps", "[urls]\nmax_depth = 20\n")
    with server:
        result = run_crawl(
            tmp_path,
            "traps",
            sites_dir=tmp_path / "sites",
            seeds=[server.url(TRAPS, f"/cal/{today.year}/{today.month:02d}"), server.url(NORMAL)],
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_MIN_DELAY": 0.01,
                "FRONTIER_DELAY_FACTOR": 0,
                "TUNING": {"neardup_link_demotion": demotion},
            },
            timeout=120,
        )
        server.wait_idle()
    assert result.returncode == 0, result.log[-3000:]
    months = len(paths(server, "/cal/"))
    if demotion:
        # depths 0 (the seed), then 1, 6, 11, 16 each way: the next month would be at 21
        assert months == 9
        assert result.stats["frontier/links_demoted"] > 0
        assert result.stats["frontier/rejected/too_deep"] == 2
    else:
        assert months == 41  # 20 each way
        assert "frontier/links_demoted" not in result.stats
    # the normal site's pages are all different: nothing of it is demoted or cut
    assert {x.path for x in server.hits_of(NORMAL)} == normal
