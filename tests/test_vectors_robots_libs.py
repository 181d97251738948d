"""robots.txt test vectors of more libraries (JavaScript, Go, Python), run against our rules.

The house pattern of :mod:`tests.test_vectors_robots` (its ``Case``, read the same way; a
case where we deliberately differ carries our verdict and, in ``differs``, the reason).

Sources:

* samclarke/robots-parser (JavaScript), ``test/Robots.js``: its ``isAllowed`` and
  ``isDisallowed`` URLs, ``getCrawlDelay`` and ``getSitemaps``. Left out: its checks of a URL
  on another host than the robots.txt (``undefined``: the crawler fetches each origin's own
  file), of internationalized host names, of ``Host:`` lines, and of line numbers (their
  verdicts are kept). Its default agent (none given) is asked here as "mybot".
"""

from __future__ import annotations

import pytest

from tests.test_vectors_robots import Case, _rules

SAMCLARKE = "samclarke/robots-parser test/Robots.js"
EXAMPLE = "http://www.example.com"


def _js(test: str) -> str:
    return f"{SAMCLARKE}: {test}"


def _urls(
    source: str, body: str, allowed: list[str], disallowed: list[str], agent: str = "mybot"
) -> list[Case]:
    """samclarke's shape: URLs (paths on www.example.com) allowed, then disallowed."""
    return [Case(source, body, agent, EXAMPLE + p, True) for p in allowed] + [
        Case(source, body, agent, EXAMPLE + p, False) for p in disallowed
    ]


FISH = ["User-agent: *", "Disallow: /fish/", "Disallow: /test.html"]
FISH_ALLOWED = ["/fish", "/Test.html"]
FISH_DISALLOWED = ["/fish/index.php", "/fish/", "/test.html"]
LINE_NUMBERS = "\n".join(
    [
        "", "User-agent: *", "", "Disallow: /fish/", "Disallow: /test.html",
        "Allow: /fish/test.html", "Allow: /test.html", "", "User-agent: a", "allow: /", "",
        "User-agent: b", "disallow: /test", "disallow: /t*t", "", "User-agent: c",
        "Disallow: /fish*.php", "Allow: /fish/index.php",
    ]
)  # fmt: skip
UNICODE_PATHS = "\n".join(
    [
        "User-agent: *",
        "Disallow: /%CF%80",
        "Disallow: /%e2%9d%83",
        "Disallow: /%a%a",
        "Disallow: /💩",
        "Disallow: /✼*t$",
        "Disallow: /%E2%9C%A4*t$",
        "Disallow: /✿%a",
        "Disallow: /http%3A%2F%2Fexample.org",
    ]
)

SAMCLARKE_CASES = [
    *_urls(
        _js("should parse the disallow directive"), "\n".join(FISH), FISH_ALLOWED, FISH_DISALLOWED
    ),
    *_urls(
        _js("should parse the allow directive"),
        "\n".join([*FISH, "Allow: /fish/test.html", "Allow: /test.html"]),
        ["/fish", "/fish/test.html", "/Test.html", "/test.html"],
        ["/fish/index.php", "/fish/"],
    ),
    *_urls(
        _js("should parse patterns"),
        "User-agent: *\nDisallow: /fish*.php\nDisallow: /*.dext$\nDisallow: /dir*",
        ["/Fish.PHP", "/Fish.dext1", "/folder/dir.html", "/folder/dir/test.html"],
        [
            "/fish.php",
            "/fishheads/catfish.php?parameters",
            "/AnYthInG.dext",
            "/Fish.dext.dext",
            "/dir/test.html",
            "/directory.html",
        ],
    ),
    *_urls(
        _js("should have the correct order precedence for allow and disallow"),
        "User-agent: *\nDisallow: /fish*.php\nAllow: /fish/index.php\nDisallow: /test\n"
        "Allow: /test/\nDisallow: /aa/\nAllow: /aa/\nAllow: /bb/\nDisallow: /bb/",
        ["/test/index.html", "/fish/index.php", "/test/", "/aa/", "/bb/", "/x/"],
        ["/fish.php", "/fishheads/catfish.php?parameters", "/test"],
    ),
    *_urls(
        _js("should have the correct order precedence for wildcards"),
        "User-agent: *\nDisallow: /*/\nAllow: /x/",
        ["/x/", "/fish.php", "/test"],
        ["/a/", "/xx/", "/test/index.html"],
    ),
    *[
        case
        for name, body in [
            ("should parse lines delimitated by \\r", "\r".join(FISH)),
            ("should parse lines delimitated by \\r\\n", "\r\n".join(FISH)),
            (
                "should parse lines delimitated by mixed line endings",
                "User-agent: *\rDisallow: /fish/\r\nDisallow: /test.html\n\n",
            ),
            (
                "should ignore comments",
                "#\n# This is a comment\n#\nUser-agent: *\n# This is a comment\n"
                "Disallow: /fish/ # ignore\n# Disallow: fish\nDisallow: /test.html",
            ),
            (
                "should ignore invalid lines",
                "invalid line\nUser-agent: *\nDisallow: /fish/\n:::::another invalid line:::::\n"
                "Disallow: /test.html\nUnknown: tule",
            ),
        ]
        for case in _urls(_js(name), body, FISH_ALLOWED, FISH_DISALLOWED)
    ],
    *_urls(
        _js("should ignore rules that are not in a group"),
        "Disallow: /secret.html\nDisallow: /test",
        ["/secret.html", "/test/index.html", "/test/"],
        [],
    ),
    *_urls(
        _js("should ignore empty user-agent lines"),
        "User-agent:\nDisallow: /fish/\nDisallow: /test.html",
        FISH_ALLOWED + FISH_DISALLOWED,
        [],
    ),
    *_urls(
        _js("should support groups with multiple user agents (case insensitive)"),
        "User-agent: agenta\nUser-agent: agentb\nDisallow: /fish",
        [],
        ["/fish"],
        "agenta",
    ),
    *_urls(
        _js("should handle Unicode and urlencoded paths"),
        UNICODE_PATHS,
        [
            "/✼testing",
            "/%E2%9C%BCtesting",
            "/✤testing",
            "/%E2%9C%A4testing",
            "/http://example.org",
        ],
        [
            "/%CF%80",
            "/%CF%80/index.html",
            "/π",
            "/π/index.html",
            "/%e2%9d%83",
            "/%E2%9D%83/index.html",
            "/❃",
            "/❃/index.html",
            "/%F0%9F%92%A9",
            "/%F0%9F%92%A9/index.html",
            "/💩",
            "/💩/index.html",
            "/%a%a",
            "/%a%a/index.html",
            "/✼test",
            "/%E2%9C%BCtest",
            "/✤test",
            "/%E2%9C%A4testt",
            "/✿%a",
            "/%E2%9C%BF%atest",
            "/http%3A%2F%2Fexample.org",
        ],
    ),
    # samclarke allows "/http:%2F%2Fexample.org" under "Disallow: /http%3A%2F%2Fexample.org";
    # RFC 9309 2.2.2 has reserved characters percent-encoded before comparison (its table
    # reads "baz=https://foo.bar" as "baz=https%3A%2F%2Ffoo.bar"), so ":" is "%3A" and the
    # rule matches; "/" stays apart from "%2F" (a path separator: "/a%2fb.html" is not
    # "/a/b.html", as CPython's and Protego's tests have it)
    Case(
        _js("should handle Unicode and urlencoded paths"),
        UNICODE_PATHS,
        "mybot",
        EXAMPLE + "/http:%2F%2Fexample.org",
        False,
        "RFC 9309 2.2.2 (its table): a reserved ':' compares as '%3A'",
    ),
    *_urls(
        _js("should handle lone high / low surrogates"),
        "User-agent: *\nDisallow: /\ud800\nDisallow: /\udc00",
        ["/\udc00", "/\ud800"],
        [],
    ),
    *[
        Case(
            _js("should ignore host case"),
            "User-agent: *\nDisallow: /secret.html\nDisallow: /test",
            "mybot",
            f"http://www.{host}.com{path}",
            allowed,
        )
        for host in ("example", "ExAmPlE", "EXAMPLE")
        for path, allowed in (("/index.html", True), ("/secret.html", False))
    ],
    *_urls(
        _js("should allow all if empty robots.txt"),
        "",
        ["/secret.html", "/test/index.html", "/test/"],
        [],
    ),
    *_urls(
        _js("should return the line number of the matching directive"),
        LINE_NUMBERS,
        ["/fish", "/fish/test.html", "/Test.html", "/test.html"],
        ["/fish/index.php", "/fish/"],
    ),
    *_urls(
        _js("should return the line number of the matching directive"),
        LINE_NUMBERS,
        ["/test.html"],
        [],
        "a",
    ),
    *_urls(
        _js("should return the line number of the matching directive"),
        LINE_NUMBERS,
        ["/fish/index.php"],
        ["/fish.php"],
        "c",
    ),
    *_urls(
        _js("should handle large wildcards efficiently"),
        "User-agent: *\nDisallow: /" + "*" * 2048 + ".html",
        ["/" + "sub" * 2048 + "folder/index.php"],
        ["/secret.html"],
    ),
]

CRAWL_DELAYS = (
    "user-agent: a\ncrawl-delay: 1\nuser-agent: b\ndisallow: /d\nuser-agent: c\nuser-agent: d\n"
    "crawl-delay: 10"
)
INVALID_DELAYS = (
    "user-agent: a\ncrawl-delay: 1.2.1\nuser-agent: b\ncrawl-delay: 1.a0\nuser-agent: c\n"
    "user-agent: d\ncrawl-delay: 10a"
)
FALLBACK = (
    "user-agent: *\ncrawl-delay: 1\nuser-agent: b\ncrawl-delay: 12\nuser-agent: c\n"
    "user-agent: d\ncrawl-delay: 10"
)
SAMCLARKE_DELAYS = [
    *[
        (_js("should parse the crawl-delay directive"), CRAWL_DELAYS, agent, delay)
        for agent, delay in (("a", 1.0), ("b", None), ("c", 10.0), ("d", 10.0), ("mybot", None))
    ],
    *[
        (_js("should ignore invalid crawl-delay directives"), INVALID_DELAYS, agent, None)
        for agent in ("a", "b", "c", "d")
    ],
    *[
        (_js("should fallback to * when a UA has no rules of its own"), FALLBACK, agent, delay)
        for agent, delay in (("should-fall-back", 1.0), ("d", 10.0), ("dd", 1.0))
    ],
    (
        _js("should not fallback to * when a UA has rules"),
        "user-agent: *\ncrawl-delay: 1\nuser-agent: b\ndisallow:",
        "b",
        None,
    ),
    *[
        (_js("should ignore version numbers in the UA string"), FALLBACK, agent, delay)
        for agent, delay in (
            ("should-fall-back/1.0.0", 1.0), ("d/12", 10.0), ("dd / 0-32-3", 1.0), ("b / 1.0", 12.0)
        )
    ],
]  # fmt: skip
SAMCLARKE_SITEMAPS = [
    (
        _js("should parse the sitemap directive"),
        "user-agent: a\ncrawl-delay: 1\nsitemap: http://example.com/test.xml\nuser-agent: b\n"
        "disallow: /d\nsitemap: /sitemap.xml\n"
        "sitemap:     http://example.com/test/sitemap.xml     ",
        # samclarke returns "/sitemap.xml" as written; we join it to the origin (sitemaps.org
        # asks for a full URL, crawler-commons' testRelativeSitemap joins it too)
        [
            "http://example.com/test.xml",
            "http://foo.bar/sitemap.xml",
            "http://example.com/test/sitemap.xml",
        ],
    ),
]

VERDICTS = SAMCLARKE_CASES


@pytest.mark.parametrize(
    "case",
    VERDICTS,
    ids=[f"{c.source.split(': ', 1)[0].split()[0]}-{i}" for i, c in enumerate(VERDICTS)],
)
def test_verdict(case: Case) -> None:
    origin = "/".join(case.url.split("/", 3)[:3])
    assert _rules(case.body, case.agent, origin).allowed(case.url) is case.allowed, case


@pytest.mark.parametrize(("source", "body", "agent", "delay"), SAMCLARKE_DELAYS)
def test_crawl_delay(source: str, body: str, agent: str, delay: float | None) -> None:
    assert _rules(body, agent).crawl_delay() == delay, source


@pytest.mark.parametrize(("source", "body", "sitemaps"), SAMCLARKE_SITEMAPS)
def test_sitemaps(source: str, body: str, sitemaps: list[str]) -> None:
    assert _rules(body, "foo").sitemaps() == sitemaps, source
