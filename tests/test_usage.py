"""Usage preferences, the parts: each signal read (malformed values included), robots.txt's
Content-Usage rules attached to groups and paths, tdmrep.json rules, the decision table."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from crawler.robots.directives import x_robots_tag
from crawler.robots.rules import RULES, RobotsRecord, RobotsRules
from crawler.robots.usage import (
    DENIES,
    HEADER,
    META,
    Signal,
    content_signal,
    content_usage,
    decide,
    meta_tags,
    page_decision,
    response_signals,
    robots_directives,
    tdm_signals,
    tdmrep_rules,
    tdmrep_signals,
)
from crawler.sites.loading import load_site_config

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def rules(body: str, token: str = "mybot") -> RobotsRules:
    return RobotsRules(RobotsRecord("http://a.test", RULES, 200, 0, 1e12, body), token)


def pairs(signals: list[Signal]) -> list[tuple[str, str]]:
    return [(s.key, s.value) for s in signals]


# -- Content-Signal and Content-Usage values --------------------------------------------------


def test_content_signal_values_are_read_leniently_and_kept_as_written() -> None:
    signals = content_signal("search=yes, ai-input=no ,AI-Train=NO")
    assert pairs(signals) == [("search", "yes"), ("ai-input", "no"), ("ai-train", "NO")]
    assert decide(signals, ["ai-train"]).denied == {"ai-input", "ai-train"}  # in any case
    # a bare key, a value nobody defined, a quoted one, a parameter, junk between commas
    assert pairs(content_signal('search, ai-train=maybe, ai-input="no";x=1,,')) == [
        ("search", ""), ("ai-train", "maybe"), ("ai-input", "no")]
    assert content_signal("") == []


def test_content_usage_is_an_rfc_9651_dictionary() -> None:
    assert pairs(content_usage("train-ai=n, search=y")) == [("train-ai", "n"), ("search", "y")]
    assert pairs(content_usage("train-ai=?0")) == [("train-ai", "?0")]  # unknown: kept


# -- robots.txt: attached to groups and paths (draft-ietf-aipref-attach-04) -------------------


def test_content_usage_attaches_to_the_crawlers_group_and_the_longest_path() -> None:
    robots = rules(
        "User-agent: otherbot\n"
        "Content-Usage: search=n\n"
        "Disallow: /x\n"
        "\n"
        "User-agent: mybot\n"
        "Allow: /\n"
        "Content-Usage: train-ai=n\n"
        "Content-Usage: /blog/ train-ai=y\n"
        "Content-Usage: /blog/*.pdf$ train-ai=n, search=n\n"
        "Content-Signal: ai-input=no\n"
    )
    assert pairs(robots.usage("/")) == [("ai-input", "no"), ("train-ai", "n")]
    assert pairs(robots.usage("/blog/post")) == [("ai-input", "no"), ("train-ai", "y")]
    assert pairs(robots.usage("/blog/a.pdf")) == [
        ("ai-input", "no"), ("train-ai", "n"), ("search", "n")]
    assert {s.source for s in robots.usage("/")} == {"robots.txt"}
    # the rules are untouched by the new lines
    assert robots.allowed("http://a.test/x") and robots.allowed("http://a.test/blog/")


def test_a_usage_line_is_a_rule_of_its_group() -> None:
    # a User-agent line after a Content-Usage line opens the next group, as after a Disallow
    robots = rules("User-agent: mybot\nContent-Usage: train-ai=n\nUser-agent: *\nDisallow: /\n")
    assert pairs(robots.usage("/")) == [("train-ai", "n")]
    assert robots.allowed("http://a.test/page")
    # before any User-agent line: no group, no preference
    assert rules("Content-Signal: ai-train=no\nUser-agent: *\nAllow: /\n").usage("/") == []
    # the * group when none names the crawler
    assert pairs(rules("User-agent: *\nContent-Signal: search=no\n").usage("/")) == [
        ("search", "no")]


# -- robots directives -------------------------------------------------------------------------


def test_directives_keep_every_value_beyond_noindex_and_nofollow() -> None:
    said = x_robots_tag(
        ["noai, noimageai", "unavailable_after: 25 Jun 2010 15:00:00 PST",
         "otherbot: noarchive", "mybot: nosnippet, max-snippet: 20"], "mybot")
    assert said.words == ["noai", "noimageai", "nosnippet"]
    assert said.valued == [("unavailable_after", "25 Jun 2010 15:00:00 PST"),
                           ("max-snippet", "20")]
    assert said.noindex and not said.nofollow  # unavailable_after, past: noindex
    signals = robots_directives(said.words, said.valued, HEADER)
    assert pairs(signals) == [("noai", ""), ("noimageai", ""), ("nosnippet", ""),
                              ("unavailable_after", "25 Jun 2010 15:00:00 PST")]


def test_unavailable_after_past_future_and_malformed() -> None:
    def denied(value: str) -> tuple[frozenset[str], int]:
        decision = decide([Signal(HEADER, "robots", "unavailable_after", value)], ["archive"],
                          now=NOW)
        return decision.denied, len(decision.unknown)

    # past: ai-input denied; search goes through noindex (the page kept, its indexed copy
    # dropped), as for ``noindex`` itself
    assert denied("2001-01-01") == ({"ai-input"}, 0)
    assert denied("Mon, 01 Jan 2001 00:00:00 GMT") == ({"ai-input"}, 0)
    assert denied("2030-01-01T00:00:00z") == (frozenset(), 0)
    assert denied("next tuesday") == (frozenset(), 1)  # kept, reported, not guessed
    # a year past datetime's (OverflowError in parsedate_to_datetime) is no date either
    assert denied("Fri, 25 Jun 99999999999 15:00:00 GMT") == (frozenset(), 1)
    assert denied("9999-12-31T23:59:59-23:59") == (frozenset(), 0)  # the far future, no error


def test_an_unknown_directive_is_reported_and_known_ones_are_not() -> None:
    signals = robots_directives(["index", "follow", "noml", "noindex"], [], META)
    assert pairs(signals) == [("noml", "")]
    assert decide(signals, ["search"]).unknown == tuple(signals)


# -- TDMRep --------------------------------------------------------------------------------------


def test_tdmrep_json_rules_and_their_longest_location() -> None:
    found = tdmrep_rules(
        b'[{"location": "/", "tdm-reservation": 0},'
        b' {"location": "/books/*.epub", "tdm-reservation": 1, "tdm-policy": "https://p/"},'
        b' {"location": "books/free/", "tdm-reservation": "1 "},'
        b' {"location": "/x", "tdm-reservation": true}, {"tdm-reservation": 1}, 7]'
    )
    assert [(r.location, r.reservation) for r in found] == [
        ("/", "0"), ("/books/*.epub", "1"), ("/books/free/", "1")]
    assert pairs(tdmrep_signals(found, "/news")) == [("tdm-reservation", "0")]
    assert pairs(tdmrep_signals(found, "/books/a.epub")) == [
        ("tdm-reservation", "1"), ("tdm-policy", "https://p/")]
    assert tdmrep_signals(found[1:], "/news") == []
    for broken in (b"", b"{", b'{"location": "/"}', b"\xff\xfe", b"null"):
        assert tdmrep_rules(broken) == []


def test_tdm_reservation_values() -> None:
    assert decide(tdm_signals("1", None, HEADER), ["ai-train"]).keep is False
    assert decide(tdm_signals(" 0", None, HEADER), ["ai-train"]).keep is True
    odd = decide(tdm_signals("Yes", "", HEADER), ["ai-train"])
    assert odd.keep and pairs(list(odd.unknown)) == [("tdm-reservation", "Yes")]  # as written


# -- meta tags and whole answers -----------------------------------------------------------------


def test_meta_tags_are_found_in_the_head_however_written() -> None:
    body = (b"<html><head><META Name='robots' CONTENT='noarchive'>"
            b'<meta content="1" name="TDM-Reservation"><meta name=mybot content=noai>'
            b'<meta name="robots" content="nosnippet"><meta property="og:x" content="y">')
    assert meta_tags(body, ["robots", "tdm-reservation", "mybot"]) == {
        "robots": "noarchive, nosnippet", "tdm-reservation": "1", "mybot": "noai"}


UTF16_PAGE = ('<html><head><title>\u65e5\u672c</title><meta name="robots" content="noindex">'
              "<meta name='tdm-reservation' content='1'></head><body><meta name=robots content=x>")


@pytest.mark.parametrize(("codec", "bom"), [
    ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"),  # its byte order mark says
    ("utf-16-le", b""), ("utf-16-be", b""),  # its header says (charset=utf-16): NULs show it
])
def test_meta_tags_are_found_in_a_utf16_page(codec: str, bom: bytes) -> None:
    """Its markup is no ASCII: read as the page is decoded, in UTF-16, the head ending as in
    any page; a page cut inside a character is read up to it."""
    body = bom + UTF16_PAGE.encode(codec)
    expected = {"robots": "noindex", "tdm-reservation": "1"}
    assert meta_tags(body, ["robots", "tdm-reservation"]) == expected
    assert meta_tags(body[:-1], ["robots", "tdm-reservation"]) == expected


def test_a_utf16_page_decides_as_any_page() -> None:
    page = '<html><head><meta name="robots" content="noarchive"></head></html>'
    for body in (b"\xff\xfe" + page.encode("utf-16-le"), page.encode("utf-16-be")):
        headers = {"content-type": [b"text/html; charset=utf-16"]}
        decision = page_decision(_response(headers, body), {}, "mybot", ["search"])
        assert decision.archive is False and decision.index is True
    # A NUL or two in an ASCII page (a broken template) does not make it UTF-16.
    body = b"<html><head>\x00<meta name=robots content=noai>\x00</head>"
    assert meta_tags(body, ["robots"]) == {"robots": "noai"}


def _response(headers: dict[str, list[bytes]], body: bytes, url: str = "http://a.test/p") -> object:
    return SimpleNamespace(url=url, status=200, body=body, headers=SimpleNamespace(
        getlist=lambda name: headers.get(name.lower(), [])))


def test_a_gzip_body_is_read_for_its_meta_tags() -> None:
    """The WARC capture sees the body as sent; its decision must match the spider's."""
    page = b'<html><head><meta name="robots" content="noarchive"></head></html>'
    headers = {"content-type": [b"text/html"], "content-encoding": [b"gzip"]}
    meta: dict[str, object] = {}
    decision = page_decision(_response(headers, gzip.compress(page)), meta, "mybot", ["search"])
    assert decision.archive is False and decision.index is True
    # made once per URL: a redirect's next request carries the meta, not the decision
    again = page_decision(_response({}, b"", "http://a.test/next"), meta, "mybot", ["search"])
    assert again.signals == ()


def test_response_signals_read_headers_and_meta_for_this_crawler() -> None:
    headers = {"content-usage": ["train-ai=n"], "x-robots-tag": ["otherbot: noai", "noarchive"],
               "tdm-reservation": ["1"], "tdm-policy": ["https://p/"]}
    signals = response_signals(lambda name: headers.get(name.lower(), []),
                               b'<meta name="mybot" content="nosnippet">', "mybot")
    assert [str(s) for s in signals] == [
        "header content-usage:train-ai=n", "header robots:noarchive",
        "header tdm:tdm-reservation=1", "header tdm:tdm-policy=https://p/",
        "meta robots:nosnippet"]


# -- the decision table --------------------------------------------------------------------------


@pytest.mark.parametrize(("signal", "purposes", "effect"), [
    (Signal("robots.txt", "content-signal", "ai-train", "no"), ["ai-train"], "not_fetched"),
    (Signal("robots.txt", "content-signal", "ai-train", "no"), ["search", "ai-train"],
     "recorded"),
    (Signal("header", "content-signal", "search", "no"), ["search"], "not_kept"),
    (Signal("header", "content-usage", "search", "n"), ["archive"], "not_indexed"),
    (Signal("meta", "robots", "noarchive"), ["search"], "not_archived"),
    (Signal("meta", "robots", "noarchive"), ["archive"], "not_kept"),
    (Signal("tdmrep.json", "tdm", "tdm-reservation", "1"), ["ai-input"], "not_fetched"),
    (Signal("meta", "robots", "nosnippet"), ["search"], "recorded"),
    (Signal("meta", "robots", "noimageai"), ["ai-train"], "recorded"),
])
def test_effects(signal: Signal, purposes: list[str], effect: str) -> None:
    assert decide([signal], purposes).effect == effect


def test_a_refusal_wins_over_an_allowance_and_signals_count_once() -> None:
    decision = decide([
        Signal("robots.txt", "content-usage", "train-ai", "y"),
        Signal("header", "content-usage", "train-ai", "n"),
        Signal("header", "content-usage", "train-ai", "n"),
    ], ["ai-train"])
    assert decision.denied == {"ai-train"} and decision.effect == "not_kept"
    assert len(decision.signals) == 2
    assert decide([], ["search"]).effect == ""


def test_every_table_entry_denies_only_known_uses() -> None:
    for uses in DENIES.values():
        assert uses <= {"search", "archive", "ai-train", "ai-input"}


def test_a_site_config_declares_its_purpose(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\nseeds = ["http://a.test/"]\npurpose = ["archive", "ai-input"]\n')
    assert load_site_config(path).settings["CRAWL_PURPOSE"] == ("archive", "ai-input")
    path.write_text('name = "s"\nseeds = ["http://a.test/"]\npurpose = "train"\n')
    with pytest.raises(Exception, match="purpose: must be one or more of search, archive"):
        load_site_config(path)


def test_the_report_lists_effects_then_signals_then_unknown_values() -> None:
    from crawler.report.build import _usage_section

    html = _usage_section({"usage/unknown/robots:noml/set": 1, "usage/robots:noai/set": 2,
                           "usage/effect/not_kept": 2, "pages": 5})
    assert html.index("effect/not_kept") < html.index("robots:noai/set") < html.index(
        "unknown/robots:noml/set")
    assert 'data-count="3"' in html
    assert 'data-count="0"' in _usage_section({})


def test_the_metrics_count_pages_by_effect() -> None:
    from crawler.metrics import families

    labels = {"crawl": "web", "worker": "w1"}
    stats = {"usage/effect/not_kept": 2, "usage/effect/recorded": 5, "usage/robots:noai/set": 2}
    got = {
        s.labels["effect"]: s.value
        for family in families.stats_families(stats, labels)
        if family.name == "crawler_usage_pages"
        for s in family.samples if s.name.endswith("_total")
    }
    assert got == {"not_kept": 2, "recorded": 5}


def test_the_summary_says_what_usage_preferences_did() -> None:
    from crawler.extensions.summary import _usage_lines

    assert _usage_lines({"usage/robots:noai/set": 1}) == []  # no effect counted: no page
    lines = _usage_lines({
        "usage/effect/recorded": 3, "usage/effect/not_fetched": 1,
        "usage/content-signal:ai-train/no": 4, "usage/unknown/robots:noml/set": 1,
        "usage/robots:noml/set": 1,
    })
    assert lines == [
        "  usage preferences: recorded 3, not fetched 1",
        "  usage signals: content-signal:ai-train/no 4, robots:noml/set 1",
        "  usage values nobody defined: robots:noml/set 1",
    ]
