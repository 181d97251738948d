"""robots.txt as RFC 9309 and real sites write it: each case is a file, a crawler's User-Agent
and a URL, and the verdict. By class: the product token, decoding, grouping, line length, and
matching (longest match, ties, wildcards, percent-encoding, case). Then the refusal of a
browser's User-Agent before a crawl, and a crawl obeying a group named after a token with
digits, judged from the server's access log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings

from crawler.config.agent import agent_problem, crawler_token
from crawler.config.schema import check_settings
from crawler.robots import (
    RULES,
    RobotsRecord,
    RobotsRules,
    SqliteRobotsCache,
    decode_body,
    product_token,
    robots_token,
)
from crawler.robots.groups import MAX_LINE
from devsite import HostSpec, build_site
from devsite.routed import Ask, RoutedSiteServer
from tests.crawling import PROJECT, loopback_settings, run_crawl, write_site

ORIGIN = "http://site.example"


def rules(body: str | bytes, user_agent: str) -> RobotsRules:
    """The rules of a robots.txt (text, or bytes as served) for a crawler's User-Agent."""
    text = decode_body(body)[0] if isinstance(body, bytes) else body
    record = RobotsRecord(ORIGIN, RULES, 200, 0.0, 100.0, text)
    return RobotsRules(record, crawler_token(user_agent))


def allowed(body: str | bytes, user_agent: str, path: str) -> bool:
    return rules(body, user_agent).allowed(ORIGIN + path)


# --- the product token -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("MJ12bot/1.4 (+https://example.test/bot)", "mj12bot"),
        ("bot1", "bot1"),
        ("360Spider", "360spider"),
        ("Mail.RU_Bot/2.0", "mail.ru_bot"),
        ("FOO BAR", "foo"),
        ("crawler-bot; extra", "crawler-bot"),
        ("Googlebot-Image/1.0", "googlebot-image"),
        ("  Spaced-Bot/2 ", "spaced-bot"),
        ("*", "*"),
        ("* any", "*"),
        ("*bot", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_the_product_token_is_the_name_as_sites_write_it(text: str | None, token: str) -> None:
    assert product_token(text) == token


MJ12 = "MJ12bot/1.4 (+https://example.test/bot)"


def test_a_token_with_digits_obeys_its_own_group() -> None:
    body = "User-agent: mj12bot\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    assert not allowed(body, MJ12, "/page")
    assert allowed(body, "otherbot/1.0", "/page")


def test_a_cut_token_never_takes_another_crawlers_group() -> None:
    # "mj" and "bot" are other crawlers' names: MJ12bot and bot1 follow the "*" group
    body = "User-agent: mj\nUser-agent: bot\nDisallow: /\n\nUser-agent: *\nDisallow: /x\n"
    for agent in (MJ12, "bot1/2.0"):
        assert allowed(body, agent, "/page")
        assert not allowed(body, agent, "/x")
    assert not allowed(body, "mj/1.0", "/page")


def test_the_token_comes_from_robotstxt_user_agent_first() -> None:
    settings = Settings({"USER_AGENT": "Mozilla/5.0 (compatible; X)"})
    settings.set("ROBOTSTXT_USER_AGENT", "MJ12bot")
    assert robots_token(settings) == "mj12bot"
    assert robots_token(Settings({"USER_AGENT": MJ12})) == "mj12bot"
    assert robots_token(Settings({"USER_AGENT": ""})) == "*"


def test_a_browsers_user_agent_is_a_problem_unless_the_token_is_set() -> None:
    browser = "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0"
    problem = agent_problem(browser)
    assert problem is not None and problem.startswith("USER_AGENT: ")
    assert "ROBOTSTXT_USER_AGENT" in problem and "\n" not in problem
    assert agent_problem(browser, "mybot") is None
    assert agent_problem(MJ12) is None
    values = {"USER_AGENT": browser}
    assert check_settings(values, values.get).problems == [problem]
    values = {"USER_AGENT": browser, "ROBOTSTXT_ENABLED": "False"}
    assert check_settings(values, values.get).problems == []


def test_a_site_configs_user_agent_and_its_robots_token(tmp_path: Path) -> None:
    from scrapy.utils.test import get_crawler

    from crawler.sites import load_site_config
    from crawler.spiders.site import SiteSpider

    path = write_site(tmp_path, "t", f'user_agent = "{MJ12}"\n')
    cls = SiteSpider.for_site(load_site_config(path))
    spider = cls.from_crawler(get_crawler(cls))
    assert spider.robots_token == "mj12bot"


# --- decoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("bom", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"])
def test_a_whole_or_partial_byte_order_mark_costs_no_line(bom: bytes) -> None:
    body = bom + b"User-Agent: foobot\nDisallow: /private/\n"
    assert not allowed(body, "foobot", "/private/x")
    assert allowed(body, "foobot", "/public")


@pytest.mark.parametrize(
    "body",
    [
        b"User-agent: *\n\xffDisallow: /private/\n",
        b"User-agent: *\nDisallow\xfe: /private/\n",
        b"User-agent: *\nDisal\xc3low: /private/\n",
        b"\xff\xfeUser-agent: *\nDisallow: /private/\n",
        b"User-agent: *\xa0\nDisallow: /private/\n",
    ],
)
def test_a_bad_byte_never_removes_a_rule(body: bytes) -> None:
    assert not allowed(body, "foobot", "/private/x")
    assert allowed(body, "foobot", "/public")


def test_bad_bytes_in_a_path_are_percent_encoded() -> None:
    body = b"User-agent: *\nDisallow: /caf\xe9/\n"  # Latin-1
    assert not allowed(body, "foobot", "/caf%E9/menu")
    assert allowed(body, "foobot", "/cafe/menu")
    assert allowed(body, "foobot", "/caf%C3%A9/menu")  # the UTF-8 spelling is another path


def test_an_octet_that_is_not_utf8_is_compared_as_itself() -> None:
    """RFC 9309 2.2.2 compares octets: a Latin-1 rule's E9 is not any other stray octet, and
    an escaped lead octet is the start of a character (CPython's PercentEncodingTest)."""
    body = b"User-agent: *\nDisallow: /caf\xe9/\nDisallow: /v1/%F0\n"
    assert allowed(body, "foobot", "/caf%FF/menu")
    assert allowed(body, "foobot", "/caf\ufffd/menu")
    assert not allowed(body, "foobot", "/v1/%F0%9F%90%8D")
    assert not allowed(body, "foobot", "/v1/\U0001f40d")
    assert allowed(body, "foobot", "/v1/%EF%BF%BD")


@pytest.mark.parametrize("path", ["/p%", "/p%25", "/p%zz", "/p%2525"])
def test_a_percent_that_starts_no_escape_is_a_percent(path: str) -> None:
    """A "%" that starts no escape is a literal one, "%25" (RFC 3986 2.4), in a rule and in a
    URL alike; "%F0" after it is an escape, not more of the rule (CPython's p1-p4 cases)."""
    body = b"User-agent: *\nDisallow: /p%\n"
    assert not allowed(body, "foobot", path)
    assert allowed(body, "foobot", "/p%F0")


def test_a_url_with_an_undecodable_character_gets_a_verdict() -> None:
    """A URL holding a surrogate escape (a byte Python could not decode) is its byte, not an
    exception out of the matcher."""
    body = b"User-agent: *\nDisallow: /v3/\xf0\n"
    assert not allowed(body, "foobot", "/v3/\udcf0")
    assert allowed(body, "foobot", "/v4/\udcf0")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_a_file_saved_as_utf16_with_its_mark_is_read(codec: str) -> None:
    text = "User-agent: *\r\nDisallow: /privé/\r\n"
    body = "\ufeff".encode(codec) + text.encode(codec)
    assert not allowed(body, "foobot", "/priv%C3%A9/x")
    assert allowed(body, "foobot", "/public")
    decoded, cut = decode_body(body + "Disallow: /x\r\n".encode(codec), max_size=len(body) + 4)
    assert cut and decoded == text


def test_the_tags_of_a_robots_txt_written_as_html_are_dropped() -> None:
    body = (
        "<html><head><title>robots</title></head><body>\n"
        "User-agent: anybot<br>\nDisallow: <br>\nCrawl-delay: 4<br>\n\n"
        "User-agent: *<br>\nDisallow: /<br>\n</body></html>\n"
    )
    assert allowed(body, "anybot", "/page") and rules(body, "anybot").crawl_delay() == 4.0
    assert not allowed(body, "otherbot", "/page")
    assert allowed("<html><body>Site under maintenance</body></html>", "anybot", "/page")


def test_a_decoded_file_is_text_every_cache_can_store(tmp_path: Path) -> None:
    text, _ = decode_body(b"User-agent: *\nDisallow: /\x80\xff/\n")
    cache = SqliteRobotsCache(tmp_path / "robots.sqlite")
    cache.put(RobotsRecord(ORIGIN, RULES, 200, 0.0, 100.0, text))
    record = cache.get(ORIGIN)
    assert record is not None and record.body == text
    cache.close()


# --- grouping --------------------------------------------------------------------------------


@pytest.mark.parametrize("between", ["Crawl-delay: 1", "X-Unknown-Field: 1", "Sitemap: /s.xml"])
def test_other_records_do_not_split_a_group(between: str) -> None:
    body = f"User-agent: a\n{between}\nUser-agent: b\nDisallow: /private/\n"
    for agent in ("a", "b"):
        assert not allowed(body, agent, "/private/x")
        assert allowed(body, agent, "/public")


def test_a_crawl_delay_belongs_to_the_agents_named_above_it() -> None:
    body = (
        "User-agent: a\nCrawl-delay: 3\nUser-agent: b\nCrawl-delay: 7\n"
        "User-agent: *\nDisallow: /private/\n"
    )
    assert rules(body, "a").crawl_delay() == 3.0
    assert rules(body, "b").crawl_delay() == 7.0
    assert rules(body, "c").crawl_delay() is None
    for agent in ("a", "b", "c"):  # one group: its rule is everyone's
        assert not allowed(body, agent, "/private/x")


def test_a_user_agent_value_names_its_first_word_only() -> None:
    body = "User-agent: *\nDisallow: /\n\nUser-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n"
    assert allowed(body, "foo", "/x/y")
    assert not allowed(body, "foo", "/y")
    for agent in ("Bar/1.0", "foobar"):  # not named: the "*" group
        assert not allowed(body, agent, "/x/y")
    body = "User-agent: alpha, beta-bot/2\nDisallow: /x\n"
    assert not allowed(body, "alpha", "/x") and allowed(body, "beta-bot", "/x")


def test_user_agent_lines_opening_a_group_share_its_rules() -> None:
    body = (
        "User-agent: a\n\nUser-agent: b\nUser-agent:\nuser-agent: C\n\n"
        "Disallow: /x\nAllow: /x/open\n"
    )
    for agent in ("a", "b", "c"):
        assert not allowed(body, agent, "/x/shut")
        assert allowed(body, agent, "/x/open/1")
    assert allowed(body, "d", "/x/shut")


def test_groups_of_one_agent_combine_and_the_star_group_is_only_a_fallback() -> None:
    body = (
        "Disallow: /orphan\n"  # before any user-agent line: no group's
        "User-agent: *\nDisallow: /x/\n"
        "User-agent: a\nDisallow: /y/\n"
        "User-agent: b\nDisallow: /z/\n"
        "User-agent: a\nDisallow: /w/\n"
    )
    assert allowed(body, "a", "/x/1") and allowed(body, "a", "/z/1")
    assert not allowed(body, "a", "/y/1") and not allowed(body, "a", "/w/1")
    assert not allowed(body, "other", "/x/1") and allowed(body, "other", "/y/1")
    assert allowed(body, "other", "/orphan")
    assert allowed("User-agent: a\nDisallow: /\n", "other", "/page")  # no group applies


def test_sitemaps_are_outside_groups() -> None:
    body = (
        "Sitemap: https://site.example/first.xml\n"
        "User-agent: otherbot\nDisallow: /\nSitemap: /second.xml\n"
        "User-agent: a\nDisallow: /\n"
    )
    expected = ["https://site.example/first.xml", "http://site.example/second.xml"]
    assert rules(body, "nobody").sitemaps() == expected  # no group of its own, still read
    assert rules(body, "a").sitemaps() == expected
    cased = "Sitemap: /Map.xml\nSitemap: /map.xml\nsitemap:/map.xml\n"  # kept as written, once
    assert rules(cased, "a").sitemaps() == [ORIGIN + "/Map.xml", ORIGIN + "/map.xml"]


def test_a_missing_colon_is_forgiven_for_a_one_word_value() -> None:
    body = "User-agent foobot\nDisallow /tmp/\nDisallow all robots, please\nSitemap /s.xml\n"
    assert not allowed(body, "foobot", "/tmp/x")
    assert allowed(body, "foobot", "/all")
    assert rules(body, "foobot").sitemaps() == ["http://site.example/s.xml"]
    body = "User agent foobot\nDisallow: /tmp/\n"
    assert not allowed(body, "foobot", "/tmp/x")


def test_lines_end_at_cr_lf_or_both() -> None:
    for eol in ("\n", "\r\n", "\r"):
        body = eol.join(["User-agent: a", "Disallow: /x", "User-agent: b", "Disallow: /y", ""])
        assert not allowed(body, "a", "/x") and allowed(body, "a", "/y")


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ("Disallow: /abcdefgh\nAllow: /*\u00e9\n", "/abcdefgh\u00e9"),
        ("Disallow: /abcdefgh\nAllow: /*%C3%A9\n", "/abcdefgh%C3%A9"),
        ("Disallow: /abcdefghi\nAllow: /*%%\n", "/abcdefghi%25%25"),
        ("Disallow: /abcdefghijklmnop\nAllow: /*\u00e9\u00e9$\n", "/abcdefghijklmnop\u00e9\u00e9"),
    ],
)
def test_an_escaped_octet_weighs_as_one_escape_in_the_longest_match(body: str, path: str) -> None:
    """The longest match counts an octet outside ASCII, and a literal "%", as the one escape
    it is written as (3 characters, as Google's parser and Protego count it), not as the
    longer spelling Protego is handed: the longer Disallow wins."""
    assert not allowed(STAR + body, "foobot", path)


def test_an_overlong_line_is_read_up_to_the_limit_and_ends_where_it_ends() -> None:
    long_path = "/x/" + "a" * MAX_LINE
    body = f"User-agent: *\nDisallow: {long_path}/qux\nDisallow: /next\n"
    assert allowed(body, "foobot", "/x/aaa")  # shorter than the cut rule
    assert not allowed(body, "foobot", long_path + "/other")  # the cut rule matches
    assert not allowed(body, "foobot", "/next")  # the line after is read
    body = f"User-agent: *\nDisallow: /\nAllow: {long_path}\n"
    assert not allowed(body, "foobot", "/x/a")


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_a_rule_cut_inside_an_escape_still_denies_what_it_wrote(cut: int) -> None:
    """A line cut at MAX_LINE inside an escape ("%E9" cut to "%" or "%E") loses the partial
    escape: the cut rule still matches every URL the whole one matched. Kept, the "%" read as
    a literal percent and the Disallow matched nothing the file wrote."""
    field = "Disallow: "
    head = "/" + "a" * (MAX_LINE - len(field) - 1 - cut)
    path = head + "%E9" * 3
    body = f"User-agent: *\n{field}{path}\n"
    assert len(field + path) > MAX_LINE
    assert not allowed(body, "foobot", path)
    assert not allowed(body, "foobot", head + "%E9/more")


# --- matching --------------------------------------------------------------------------------

STAR = "User-agent: *\n"


@pytest.mark.parametrize(
    ("body", "path", "verdict"),
    [
        # the longest match wins; an Allow wins a tie
        ("Allow: /p\nDisallow: /\n", "/page", True),
        ("Disallow: /folder\nAllow: /folder\n", "/folder/page", True),
        ("Allow: /page\nDisallow: /*.htm\n", "/page.htm", False),
        ("Disallow: /x/\nAllow: /x/page.\n", "/x/page.html", True),
        # "$" ends a pattern; "*" is any run of characters
        ("Allow: /$\nDisallow: /\n", "/", True),
        ("Allow: /$\nDisallow: /\n", "/page", False),
        ("Disallow: /*.pdf$\n", "/a/b.pdf", False),
        ("Disallow: /*.pdf$\n", "/a/b.pdf?x=1", True),
        ("Disallow: /shop*/cart\n", "/shop/eu/cart", False),
        ("Disallow: /search?q=\n", "/search?q=shoes&lang=en", False),
        ("Disallow: /*?sort=\n", "/list?sort=asc", False),
        # percent-encoding: an escaped and an unescaped character are the same character
        ("Disallow: /a%3Cd\n", "/a<d", False),
        ("Disallow: /a<d\n", "/a%3Cd", False),
        ("Disallow: /a%3cd\n", "/a%3Cd", False),
        ("Disallow: /ツ\n", "/%E3%83%84", False),
        ("Disallow: /%E3%83%84\n", "/ツ", False),
        ("Disallow: /%62%61%7A\n", "/baz", False),  # RFC 3986 6.2.2.2 (Google: as written)
        # paths are case-sensitive
        ("Disallow: /X/\n", "/x/y", True),
        ("Disallow: /x/\n", "/X/y", True),
        # /robots.txt is always allowed; an empty Disallow disallows nothing
        ("Disallow: /\n", "/robots.txt", True),
        ("Disallow:\n", "/any", True),
    ],
)
def test_matching(body: str, path: str, verdict: bool) -> None:
    assert allowed(STAR + body, "foobot", path) is verdict


# --- the crawl -------------------------------------------------------------------------------


def test_a_browsers_user_agent_is_refused_before_any_request(tmp_path: Path) -> None:
    sites = tmp_path / "sites"
    write_site(sites, "local", 'seeds = ["http://127.0.0.1:9/"]\n')
    browser = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/131.0"
    base = [sys.executable, "-m", "scrapy", "crawl", "local", f"-sSITES_DIR={sites}"]
    base += ["-sLOG_LEVEL=ERROR", f"-sINDEX_PATH={tmp_path / 'index.sqlite'}"]
    out = subprocess.run(
        [*base, f"-sUSER_AGENT={browser}"],
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if "refused" in line]
    assert lines == [f"crawl local refused: {agent_problem(browser)}"]


BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


@pytest.mark.parametrize(
    ("how", "settings", "user_agent"),
    [
        ("USER_AGENT", {"USER_AGENT": MJ12}, MJ12),
        (
            "ROBOTSTXT_USER_AGENT",
            {"USER_AGENT": BROWSER, "ROBOTSTXT_USER_AGENT": "MJ12bot"},
            BROWSER,
        ),
        ("site config", {}, MJ12),
    ],
)
def test_a_crawl_as_mj12bot_obeys_the_mj12bot_group(
    tmp_path: Path, how: str, settings: dict[str, str], user_agent: str
) -> None:
    """Only /robots.txt is requested: the group for mj12bot shuts the site, the sibling group
    for everyone else would have opened it."""
    host = "127.0.0.2"
    graph = build_site([HostSpec(host, pages=4)], links_per_page=3, cross_host_links=0)
    server = RoutedSiteServer(graph)

    def robots(ask: Ask) -> tuple[int, list[tuple[str, str]], bytes]:
        body = "User-agent: mj12bot\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
        return 200, [("Content-Type", "text/plain")], body.encode()

    server.route(host, "/robots.txt", robots)
    site, sites_dir = "web", None
    if how == "site config":
        site, sites_dir = "mj", tmp_path / "sites"
        write_site(sites_dir, site, f'user_agent = "{MJ12}"\n')
    with server:
        result = run_crawl(
            tmp_path,
            site,
            seeds=[server.url(host), server.url(host, "/p/1.html")],
            settings=loopback_settings(**settings),
            sites_dir=sites_dir,
            timeout=60,
        )
    assert result.returncode in (0, 1), result.log[-3000:]
    requests = [(r.method, r.path, r.headers.get("User-Agent")) for r in server.records]
    assert requests == [("GET", "/robots.txt", user_agent)]
    assert result.stats["robotstxt/denied"] == 2
