"""Other projects' ``Link`` header test vectors, as data, run against the crawler's reading of a
canonical URL from the header.

Sources (each case names its file and test):

* Chromium, ``components/link_header_util/link_header_util_unittest.cc``: ``SplitLinkHeader``
  (link-values split at commas outside ``<...>`` and double quotes) and every case of
  ``simple_parse_tests`` (a link-value: valid?, its target, its ``rel`` and ``as``). Firefox's
  ``netwerk/test/gtest/TestLinkHeader.cpp`` copies them and notes where Firefox differs
  (it drops spaces inside the target, accepts unclosed quotes): Chromium's are the RFC's.
* RFC 8288, section 3.5 (the examples) and 3.1-3.3: a relative target is resolved against the
  response's URL (never a base in the body), ``rel`` is a space-separated list of relation
  types compared case-insensitively, a second ``rel`` is ignored, ``anchor`` makes another
  resource the link's context.
* Google, "Specify a canonical URL" (``developers.google.com/search/docs/crawling-indexing/
  consolidate-duplicate-urls``): ``Link: <https://www.example.com/downloads/white-paper.pdf>;
  rel="canonical"`` on a PDF.

Ours: :func:`crawler.content.canonical.link_values` for a link-value, and for a page
:func:`crawler.content.canonical.link_header_canonical` then
:meth:`crawler.content.canonical.CanonicalPolicy.judge` (the target resolved against the
response URL), as ``crawler.spiders.canonical.apply_canonical`` asks them.
"""

from __future__ import annotations

import pytest

from crawler.content.canonical import (
    CanonicalPolicy,
    link_header_canonical,
    link_values,
    split_link_header,
)
from crawler.frontier import normalize_url

CHROMIUM = "chromium link_header_util_unittest.cc"
RFC = "RFC 8288"
GOOGLE = "Google consolidate-duplicate-urls"

SPLITS = [
    ("SplitEmpty", "", []),
    ("SplitSimple", "hello", ["hello"]),
    ("SplitSimple", "foo, bar", ["foo", "bar"]),
    ("SplitSimple", " 1\t,\t2,3", ["1", "2", "3"]),
    ("SplitSkipsEmpty", ", foo, , \t, bar", ["foo", "bar"]),
    ("SplitQuotes", "\"foo,bar\", 'bar,foo', <hel,lo>", ['"foo,bar"', "'bar", "foo'", "<hel,lo>"]),
    (
        "SplitEscapedQuotes",
        "\"f\\\"oo,bar\", 'b\\'ar,foo', <hel\\>,lo>",
        ['"f\\"oo,bar"', "'b\\'ar", "foo'", "<hel\\>", "lo>"],
    ),
]


@pytest.mark.parametrize("test, header, parts", SPLITS)
def test_link_values_are_split_as_chromium_splits_them(
    test: str, header: str, parts: list[str]
) -> None:
    assert split_link_header(header) == parts


# (link-value, valid, target, rel, as): simple_parse_tests, in order
SIMPLE = [
    ("</images/cat.jpg>; rel=prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>;rel=prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>   ;rel=prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>   ;   rel=prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("< /images/cat.jpg>   ;   rel=prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg >   ;   rel=prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg wutwut>   ;   rel=prefetch", True, "/images/cat.jpg wutwut", "prefetch", ""),
    (
        "</images/cat.jpg wutwut  \t >   ;   rel=prefetch",
        True,
        "/images/cat.jpg wutwut",
        "prefetch",
        "",
    ),
    ("</images/cat.jpg>; rel=prefetch   ", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; Rel=prefetch   ", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; Rel=PReFetCh   ", True, "/images/cat.jpg", "PReFetCh", ""),
    ("</images/cat.jpg>; rel=prefetch; rel=somethingelse", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>\t\t ; \trel=prefetch \t  ", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; rel= prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("<../images/cat.jpg?dog>; rel= prefetch", True, "../images/cat.jpg?dog", "prefetch", ""),
    ("</images/cat.jpg>; rel =prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; rel pel=prefetch", False, "", "", ""),
    ("< /images/cat.jpg>", True, "/images/cat.jpg", "", ""),
    ("</images/cat.jpg>; wut=sup; rel =prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; wut=sup ; rel =prefetch", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; wut=sup ; rel =prefetch  \t  ;", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg> wut=sup ; rel =prefetch  \t  ;", False, "", "", ""),
    ("<   /images/cat.jpg", False, "", "", ""),
    (
        "<   http://wut.com/  sdfsdf ?sd>; rel=dns-prefetch",
        True,
        "http://wut.com/  sdfsdf ?sd",
        "dns-prefetch",
        "",
    ),
    (
        "<   http://wut.com/%20%20%3dsdfsdf?sd>; rel=dns-prefetch",
        True,
        "http://wut.com/%20%20%3dsdfsdf?sd",
        "dns-prefetch",
        "",
    ),
    (
        "<   http://wut.com/dfsdf?sdf=ghj&wer=rty>; rel=prefetch",
        True,
        "http://wut.com/dfsdf?sdf=ghj&wer=rty",
        "prefetch",
        "",
    ),
    (
        "<   http://wut.com/dfsdf?sdf=ghj&wer=rty>;;;;; rel=prefetch",
        True,
        "http://wut.com/dfsdf?sdf=ghj&wer=rty",
        "prefetch",
        "",
    ),
    (
        "<   http://wut.com/%20%20%3dsdfsdf?sd>; rel=preload;as=image",
        True,
        "http://wut.com/%20%20%3dsdfsdf?sd",
        "preload",
        "image",
    ),
    (
        "<   http://wut.com/%20%20%3dsdfsdf?sd>; rel=preload;as=whatever",
        True,
        "http://wut.com/%20%20%3dsdfsdf?sd",
        "preload",
        "whatever",
    ),
    ("</images/cat.jpg>; rel=prefetch;", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/cat.jpg>; rel=prefetch    ;", True, "/images/cat.jpg", "prefetch", ""),
    ("</images/ca,t.jpg>; rel=prefetch    ;", True, "/images/ca,t.jpg", "prefetch", ""),
    (
        '<simple.css>; rel=stylesheet; title="title with a DQUOTE and backslash"',
        True,
        "simple.css",
        "stylesheet",
        "",
    ),
    (
        '<simple.css>; rel=stylesheet; title="title with a DQUOTE \\" and backslash: \\"',
        False,
        "",
        "",
        "",
    ),
    (
        '<simple.css>; title="title with a DQUOTE \\" and backslash: "; rel=stylesheet; ',
        True,
        "simple.css",
        "stylesheet",
        "",
    ),
    (
        "<simple.css>; title='title with a DQUOTE \\' and backslash: '; rel=stylesheet; ",
        True,
        "simple.css",
        "stylesheet",
        "",
    ),
    (
        '<simple.css>; title="title with a DQUOTE \\" and ;backslash,: "; rel=stylesheet; ',
        True,
        "simple.css",
        "stylesheet",
        "",
    ),
    (
        '<simple.css>; title="title with a DQUOTE \' and ;backslash,: "; rel=stylesheet; ',
        True,
        "simple.css",
        "stylesheet",
        "",
    ),
    ('<simple.css>; title=""; rel=stylesheet; ', True, "simple.css", "stylesheet", ""),
    ('<simple.css>; title=""; rel="stylesheet"; ', True, "simple.css", "stylesheet", ""),
    ('<simple.css>; rel=stylesheet; title="', False, "", "", ""),
    ('<simple.css>; rel=stylesheet; title=""', True, "simple.css", "stylesheet", ""),
    ('<simple.css>; rel="stylesheet"; title="', False, "", "", ""),
    ('<simple.css>; rel=";style,sheet"; title="', False, "", "", ""),
    ('<simple.css>; rel="bla\'sdf"; title="', False, "", "", ""),
    ('<simple.css>; rel=""; title=""', True, "simple.css", "", ""),
    ("<simple.css>; rel=''; title=\"\"", True, "simple.css", "''", ""),
    ("<simple.css>; rel=''; bla", True, "simple.css", "''", ""),
    ("<simple.css>; rel='prefetch", True, "simple.css", "'prefetch", ""),
    ('<simple.css>; rel="prefetch', False, "", "", ""),
    ('<simple.css>; rel="', False, "", "", ""),
    ("simple.css; rel=prefetch", False, "", "", ""),
    ("<simple.css>; rel=prefetch; rel=foobar", True, "simple.css", "prefetch", ""),
]


@pytest.mark.parametrize("link, valid, target, rel, as_", SIMPLE, ids=[c[0] for c in SIMPLE])
def test_a_link_value_as_chromium_reads_it(
    link: str, valid: bool, target: str, rel: str, as_: str
) -> None:
    got = link_values(link)
    if not valid:
        assert got == []
        return
    assert len(got) == 1
    assert got[0][0] == target
    assert (got[0][1].get("rel") or "") == rel
    assert (got[0][1].get("as") or "") == as_


RFC_EXAMPLES = [
    (
        '<http://example.com/TheBook/chapter2>; rel="previous"; title="previous chapter"',
        [("http://example.com/TheBook/chapter2", "previous")],
    ),
    ('</>; rel="http://example.net/foo"', [("/", "http://example.net/foo")]),
    ('</terms>; rel="copyright"; anchor="#foo"', [("/terms", "copyright")]),
    (
        "</TheBook/chapter2>; rel=\"previous\"; title*=UTF-8'de'letztes%20Kapitel, "
        "</TheBook/chapter4>; rel=\"next\"; title*=UTF-8'de'n%c3%a4chstes%20Kapitel",
        [("/TheBook/chapter2", "previous"), ("/TheBook/chapter4", "next")],
    ),
    (
        '<http://example.org/>; rel="start http://example.net/relation/other"',
        [("http://example.org/", "start http://example.net/relation/other")],
    ),
    (
        '<https://example.org/>; rel="start", <https://example.org/index>; rel="index"',
        [("https://example.org/", "start"), ("https://example.org/index", "index")],
    ),
]


@pytest.mark.parametrize("header, links", RFC_EXAMPLES)
def test_the_rfc_examples(header: str, links: list[tuple[str, str]]) -> None:
    assert [(target, params["rel"]) for target, params in link_values(header)] == links


PAGE = "https://www.example.com/docs/guide/page.html"
# (source, Link header values, the canonical URL the crawl honours or None)
CANONICAL = [
    (
        GOOGLE,
        ['<https://www.example.com/downloads/white-paper.pdf>; rel="canonical"'],
        "https://www.example.com/downloads/white-paper.pdf",
    ),
    (
        f"{RFC} 3.1: relative to the response's URL",
        ['<../other.html>; rel="canonical"'],
        "https://www.example.com/docs/other.html",
    ),
    (
        f"{RFC} 3.1: relative to the response's URL",
        ["</root>; rel=canonical"],
        "https://www.example.com/root",
    ),
    (
        f"{RFC} 3.3: relation types are case-insensitive",
        ["<a.html>; REL=Canonical"],
        "https://www.example.com/docs/guide/a.html",
    ),
    (
        f"{RFC} 3.3: rel is a list",
        ['<a.html>; rel="alternate canonical"'],
        "https://www.example.com/docs/guide/a.html",
    ),
    (f"{RFC} 3.3: a second rel is ignored", ['<a.html>; rel="next"; rel="canonical"'], None),
    (
        f"{RFC} 3: several link-values in one header",
        ['<p.css>; rel=preload; as=style, <b.html>; rel="canonical"'],
        "https://www.example.com/docs/guide/b.html",
    ),
    (
        f"{RFC} 3: several headers",
        ["<p.css>; rel=preload", '<c.html>; rel="canonical"'],
        "https://www.example.com/docs/guide/c.html",
    ),
    (
        f"{RFC} 3: a comma inside a quoted parameter",
        ['<d.html>; title="one, two; three"; rel="canonical"'],
        "https://www.example.com/docs/guide/d.html",
    ),
    (
        f"{RFC} 3: a comma inside the target",
        ['<e,f.html>; rel="canonical"'],
        "https://www.example.com/docs/guide/e,f.html",
    ),
    (
        f"{RFC} 3: a malformed link-value is skipped, not the header",
        ['<x.html> junk; rel="canonical", <g.html>; rel="canonical"'],
        "https://www.example.com/docs/guide/g.html",
    ),
    (
        f"{RFC} 3.2: an anchor makes another resource the context",
        ['<h.html>; rel="canonical"; anchor="https://www.example.com/other.html"'],
        None,
    ),
    (
        f"{RFC} 3.2: an anchor naming the page itself",
        [f'<i.html>; rel="canonical"; anchor="{PAGE}"'],
        "https://www.example.com/docs/guide/i.html",
    ),
    (
        f"{RFC} 3.2: an anchor naming a fragment of the page",
        ['<j.html>; rel="canonical"; anchor="#section"'],
        None,
    ),
    (
        f"{RFC} 3.3: an extension relation type is not canonical",
        ['<k.html>; rel="https://example.net/canonical"'],
        None,
    ),
]


@pytest.mark.parametrize("source, headers, canonical", CANONICAL)
def test_the_canonical_url_a_link_header_gives(
    source: str, headers: list[str], canonical: str | None
) -> None:
    policy = CanonicalPolicy("host", normalize_url)
    got = policy.judge(PAGE, link_header_canonical(headers, PAGE))[0]
    assert got == (normalize_url(canonical)[0] if canonical else None)
