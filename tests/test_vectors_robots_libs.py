"""robots.txt test vectors of more libraries (JavaScript, Go, Python), run against our rules.

The house pattern of :mod:`tests.test_vectors_robots` (its ``Case``, read the same way; a
case where we deliberately differ carries our verdict and, in ``differs``, the reason).

Sources:

* samclarke/robots-parser (JavaScript), ``test/Robots.js``: its ``isAllowed`` and
  ``isDisallowed`` URLs, ``getCrawlDelay`` and ``getSitemaps``. Left out: its checks of a URL
  on another host than the robots.txt (``undefined``: the crawler fetches each origin's own
  file), of ``Host:`` lines, and of line numbers (their verdicts are kept). Its default
  agent (none given) is asked here as "mybot"; its URLs on an internationalized host name
  (Unicode, punycode, percent-encoded) as they are.
* temoto/robotstxt (Go), ``robotstxt_test.go`` and ``google_test.go``: ``TestAgent`` verdicts
  (paths, asked on ``http://foo.bar``), crawl delays, sitemaps, and the statuses
  ``FromStatusAndString`` allows everything for. Left out: ``Host:`` lines, parse-error
  counts, and robotsText002 (google.com's 2011 file, 270 lines, for two checks: "/" allowed,
  "/search" disallowed, which other cases cover).
* jimsmart/grobotstxt (Go), a port of Google's parser: its ``robots_test.go`` is Google's
  ``robots_test.cc`` (run in :mod:`tests.test_vectors_robots`) but for the cases where it
  departs from Google, kept here, and its ``examples_test.go``.
"""

from __future__ import annotations

import pytest

from crawler.robots import RobotsRecord, RobotsRules, classify
from tests.test_vectors_robots import Case, _rules

SAMCLARKE = "samclarke/robots-parser test/Robots.js"
TEMOTO = "temoto/robotstxt robotstxt_test.go"
TEMOTO_GOOGLE = "temoto/robotstxt google_test.go"
GROBOTSTXT = "jimsmart/grobotstxt"
FOO = "http://foo.bar"
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
    # samclarke: a lone surrogate is invalid, so neither rule can disallow; ours compares the
    # octets Python keeps of the URL and of the rule (crawler.robots.groups.octets), so a rule
    # matches the URL that carries the same character, the stricter verdict
    *[
        Case(
            _js("should handle lone high / low surrogates"),
            "User-agent: *\nDisallow: /\ud800\nDisallow: /\udc00",
            "mybot",
            EXAMPLE + path,
            False,
            "RFC 9309 2.2.2 compares octets: the rule's and the URL's are the same",
        )
        for path in ("/\udc00", "/\ud800")
    ],
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
    *[
        Case(
            _js("should handle Unicode, urlencoded and punycode URLs"),
            "User-agent: *\nDisallow: /secret.html\nDisallow: /test",
            "mybot",
            f"http://www.{host}.com{path}",
            allowed,
        )
        for host in ("münich", "xn--mnich-kva", "m%C3%BCnich")
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

# --- temoto/robotstxt -----------------------------------------------------------------------


def _go(test: str) -> str:
    return f"{TEMOTO}: {test}"


def _gg(test: str) -> str:
    return f"{TEMOTO_GOOGLE}: {test}"


def _agent_paths(source: str, body: str, *checks: tuple) -> list[Case]:
    """temoto's shape: ``(agent, path, allowed[, differs])`` on one robots.txt."""
    return [Case(source, body, agent, FOO + path, *rest) for agent, path, *rest in checks]


ROBOTS_TEXT_001 = (
    "User-agent: * \nDisallow: /administrator/\nDisallow: /cache/\nDisallow: /components/\n"
    "Disallow: /editor/\nDisallow: /forum/\nDisallow: /help/\nDisallow: /images/\n"
    "Disallow: /includes/\nDisallow: /language/\nDisallow: /mambots/\nDisallow: /media/\n"
    "Disallow: /modules/\nDisallow: /templates/\nDisallow: /installation/\n"
    "Disallow: /getcid/\nDisallow: /tooltip/\nDisallow: /getuser/\nDisallow: /download/\n"
    "Disallow: /index.php?option=com_phorum*,quote=1\n"
    "Disallow: /index.php?option=com_phorum*phorum_query=search\n"
    "Disallow: /index.php?option=com_phorum*,newer\n"
    "Disallow: /index.php?option=com_phorum*,older\n\nUser-agent: Yandex\nAllow: /\n"
    "Sitemap: http://www.pravorulya.com/sitemap.xml\n"
    "Sitemap: http://www.pravorulya.com/sitemap1.xml"
)
NO_SLASH = "RFC 9309 2.2.2: a rule's path starts with '/'; 'fish/' matches no path"
ROBOTSTXT_ORG = "User-agent: Google\nDisallow:\nUser-agent: *\nDisallow: /"
MATCHING = (
    "user-agent: a\nDisallow: /\nuser-agent: b\nDisallow: /*\nuser-agent: c\nDisallow: /fish\n"
    "user-agent: d\nDisallow: /fish*\nuser-agent: e\nDisallow: /fish/\nuser-agent: f\n"
    "Disallow: fish/\nuser-agent: g\nDisallow: /*.php\nuser-agent: h\nDisallow: /*.php$\n"
    "user-agent: i\nDisallow: /fish*.php"
)
# google_test.go's TestURLMatching: a path written "^/x" is allowed, "/x" disallowed
FISH_PATHS = (
    "/fish",
    "/fish.html",
    "/fish/salmon.html",
    "/fishheads",
    "/fishheads/yummy.html",
    "/fish.php?id=anything",
    "^/Fish.asp",
    "^/catfish",
    "^/?id=fish",
)
FISH_DIR_PATHS = (
    "/fish/", "/fish/?id=anything", "/fish/salmon.htm", "^/fish", "^/fish.html",
    "^/Fish/Salmon.asp",
)  # fmt: skip
MATCHING_PATHS = {
    "a": ["/", "/test", "", "/path/to/whatever"],
    "b": ["/", "/test", "", "/path/to/whatever"],
    "c": FISH_PATHS,
    "d": FISH_PATHS,
    "e": FISH_DIR_PATHS,
    "f": FISH_DIR_PATHS,
    "g": [
        "/filename.php", "/folder/filename.php", "/folder/filename.php?parameters",
        "/folder/any.php.file.html", "/filename.php/", "^/", "^/windows.PHP",
    ],
    "h": [
        "/filename.php", "/folder/filename.php", "^/filename.php?parameters", "^/filename.php/",
        "^/filename.php5", "^/windows.PHP",
    ],
    "i": ["/fish.php", "/fishheads/catfish.php?parameters", "^/Fish.PHP"],
}  # fmt: skip
PRECEDENCE = (
    "user-agent: a\nDisallow: /\nAllow: /p\nuser-agent: b\nDisallow: /folder\n"
    "Allow: /folder/\nuser-agent: c\nDisallow: /*.htm\nAllow: /page\nuser-agent: d\n"
    "Disallow: /\nAllow: /$\nuser-agent: e\nDisallow: /\nAllow: /$"
)
# TestURLPrecedence: here a path written "^/x" is disallowed, "/x" allowed
PRECEDENCE_PATHS = {
    "a": ["/page", "^/test"],
    "b": ["/folder/page", "^/folder1", "^/folder.htm"],
    "c": ["^/page.htm", "/page1.asp"],
    "d": ["/", "^/index"],
    "e": ["^/page.htm", "/"],
}
GROUP_ORDER = (
    "user-agent: googlebot-news\nDisallow: /\nuser-agent: *\nDisallow: /\n"
    "user-agent: googlebot\nDisallow: /"
)

TEMOTO_CASES = [
    *_agent_paths(_go("TestFromStringEmpty"), "", ("Somebot", "/", True)),
    *_agent_paths(
        _go("TestFromString001"),
        "User-Agent: *\r\nDisallow: /\r\n",
        ("SomeAgent", "/foobar", False),
    ),
    *_agent_paths(
        _go("TestFromString002"),
        "User-Agent: *\r\nDisallow: /account\r\n",
        ("SomeAgent", "/foobar", True),
    ),
    *_agent_paths(_go("TestFromString003"), ROBOTS_TEXT_001, ("SomeBot", "/administrator/", False)),
    *_agent_paths(_go("TestFromString004"), ROBOTS_TEXT_001, ("SomeBot", "/paruram", True)),
    *_agent_paths(
        _go("TestFromString007"), "User-Agent: * \nAllow: /", ("SomeBot", "/random", True)
    ),
    *_agent_paths(
        _go("TestFromString008"), "User-Agent: * \nDisallow: ", ("SomeBot", "/random", True)
    ),
    *_agent_paths(
        _go("TestRobotstxtOrgCase1"), ROBOTSTXT_ORG, ("SomeBot", "/path/page1.html", False)
    ),
    # temoto matches "User-agent: Google" as a prefix of Googlebot; RFC 9309 2.2.1 matches the
    # product token exactly (Google's own parser: ID_UserAgentValueCaseInsensitive and
    # GoogleOnly_AcceptUserAgentUpToFirstSpace compare whole tokens), so Googlebot obeys "*"
    *_agent_paths(
        _go("TestRobotstxtOrgCase2"),
        ROBOTSTXT_ORG,
        (
            "Googlebot",
            "/path/page1.html",
            False,
            "RFC 9309 2.2.1: 'Google' names the crawler google, not Googlebot",
        ),
    ),
    # Invalid UTF-8 in a User-agent line does not break the file (TestInvalidEncoding)
    Case(
        _go("TestInvalidEncoding"),
        b"User-agent: H\xef\xbf\xbdm\xef\xbf\xbdh\xef\xbf\xbdkki\nDisallow: *",
        "Somebot",
        FOO + "/",
        True,
    ),
    *_agent_paths(
        _go("TestHtmlInstead"),
        "<!DOCTYPE html>\n<html>\n<title></title>\n"
        "<p>Hello world! This is valid HTML but invalid robots.txt.",
        ("SuperBot", "/", True),
    ),
    *_agent_paths(
        _go("TestWildcardPrefix"),
        b"\xef\xbb\xbfUser-agent: *\nDisallow: */oroscopo-di-oggi/*",
        ("WildcardBot", "/foo/bar", True),
        ("WildcardBot", "/oroscopo-di-oggi/bar", False),
        ("WildcardBot", "/foo/oroscopo-di-oggi/bar", False),
    ),
    *_agent_paths(
        _gg("TestGroupOrder"),
        GROUP_ORDER,
        ("Googlebot-News (Googlebot)", "/1", False),
        ("Googlebot", "/3", False),
        ("Googlebot-Image (Googlebot)", "/3", False),
        ("Otherbot (web)", "/2", False),
        ("Otherbot (News)", "/2", False),
    ),
    *_agent_paths(
        _gg("TestURLMatching"),
        MATCHING,
        *[
            (agent, path.removeprefix("^"), path.startswith("^"))
            for agent, paths in MATCHING_PATHS.items()
            for path in paths
            if agent != "f"
        ],
        # temoto reads "Disallow: fish/" as "/fish/"; RFC 9309 2.2.2's path-pattern starts
        # with "/" (or is a "*" pattern), and Google's parser, crawler-commons and Protego
        # match the rule as written, so it matches no path: agent f may fetch them all
        *[
            ("f", path.removeprefix("^"), True, "" if path.startswith("^") else NO_SLASH)
            for path in FISH_DIR_PATHS
        ],
    ),
    *_agent_paths(
        _gg("TestURLPrecedence"),
        PRECEDENCE,
        *[
            (agent, path.removeprefix("^"), not path.startswith("^"))
            for agent, paths in PRECEDENCE_PATHS.items()
            for path in paths
        ],
    ),
]
# FromStatusAndString(401/403/404, ""): a 4xx robots.txt allows everything (RFC 9309 2.3.1.3)
TEMOTO_STATUSES = [(_go(f"TestStatus{status}"), status) for status in (401, 403, 404)]
DELAYS = (
    "useragent: a\n# some comment : with colon\ndisallow: /c\nuser-agent: b\ncrawldelay: 3.5\n"
    "disallow: /d\nuser-agent: e\nsitemap: http://test.com/c\nuser-agent: f\ndisallow: /g\n"
    "crawl-delay: 5"
)
TEMOTO_DELAYS = [
    (_gg("TestCrawlDelays"), DELAYS, "b", 3.5),
    (_gg("TestCrawlDelays"), DELAYS, "f", 5.0),
    (_gg("TestCrawlDelays"), DELAYS, "a", None),
]
TEMOTO_SITEMAPS = [
    (
        _gg("TestSitemaps"),
        "sitemap: http://test.com/a\nuser-agent: a\ndisallow: /c\nsitemap: http://test.com/b\n"
        "user-agent: b\ndisallow: /d\nuser-agent: e\nsitemap: http://test.com/c\n"
        "user-agent: f\ndisallow: /g",
        ["http://test.com/a", "http://test.com/b", "http://test.com/c"],
    ),
    (_gg("TestCrawlDelays"), DELAYS, ["http://test.com/c"]),
    (
        _go("TestFromString003"),
        ROBOTS_TEXT_001,
        ["http://www.pravorulya.com/sitemap.xml", "http://www.pravorulya.com/sitemap1.xml"],
    ),
]

# --- jimsmart/grobotstxt ------------------------------------------------------------------------


def _gr(path_and_test: str) -> str:
    return f"{GROBOTSTXT} {path_and_test}"


MEMBERS = "\n\t# robots.txt with restricted area\n\n\tUser-agent: *\n\tDisallow: /members/*\n"
GROBOTSTXT_CASES = [
    # grobotstxt normalizes the URL where Google's parser asks the caller to: "ツ" in a URL is
    # "%E3%83%84" (RFC 9309 2.2.2), as ours reads it
    *[
        case
        for name, rule in [
            ("should handle a 3 byte character", "/foo/bar/ツ"),
            ("should handle a percent encoded 3 byte character", "/foo/bar/%E3%83%84"),
        ]
        for case in _agent_paths(
            _gr(f"robots_test.go: {name}"),
            f"User-agent: FooBot\nDisallow: /\nAllow: {rule}\n",
            ("FooBot", "/foo/bar/%E3%83%84", True),
            ("FooBot", "/foo/bar/ツ", True),
        )
    ],
    # as Google's parser, grobotstxt compares "%62%61%7A" as written; RFC 9309 2.2.2's table
    # reads it as "baz" (RFC 3986 6.2.2.2: encoded unreserved characters are the characters)
    *_agent_paths(
        _gr("robots_test.go: should handle a percent encoded unreserved US-ASCII"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        (
            "FooBot",
            "/foo/bar/baz",
            True,
            "RFC 9309 2.2.2 (its table): %62%61%7A matches /baz, RFC 3986 6.2.2.2",
        ),
        ("FooBot", "/foo/bar/%62%61%7A", True),
    ),
    Case(
        _gr("examples_test.go: ExampleAgentAllowed"),
        MEMBERS,
        "FooBot/1.0",
        "http://example.net/members/index.html",
        False,
    ),
]
GROBOTSTXT_SITEMAPS = [
    (
        _gr("examples_test.go: ExampleSitemaps"),
        "\n\t# robots.txt with sitemaps\n\n\tUser-agent: *\n\tDisallow: /members/*\n\n"
        "\tSitemap: http://example.net/sitemap.xml\n\tSitemap: http://example.net/sitemap2.xml\n",
        ["http://example.net/sitemap.xml", "http://example.net/sitemap2.xml"],
    ),
]

VERDICTS = SAMCLARKE_CASES + TEMOTO_CASES + GROBOTSTXT_CASES


@pytest.mark.parametrize(
    "case",
    VERDICTS,
    ids=[f"{c.source.split(': ', 1)[0].split()[0]}-{i}" for i, c in enumerate(VERDICTS)],
)
def test_verdict(case: Case) -> None:
    origin = "/".join(case.url.split("/", 3)[:3])
    assert _rules(case.body, case.agent, origin).allowed(case.url) is case.allowed, case


@pytest.mark.parametrize(("source", "body", "agent", "delay"), SAMCLARKE_DELAYS + TEMOTO_DELAYS)
def test_crawl_delay(source: str, body: str, agent: str, delay: float | None) -> None:
    assert _rules(body, agent).crawl_delay() == delay, source


@pytest.mark.parametrize(
    ("source", "body", "sitemaps"), SAMCLARKE_SITEMAPS + TEMOTO_SITEMAPS + GROBOTSTXT_SITEMAPS
)
def test_sitemaps(source: str, body: str, sitemaps: list[str]) -> None:
    assert _rules(body, "foo").sitemaps() == sitemaps, source


@pytest.mark.parametrize(("source", "status"), TEMOTO_STATUSES)
def test_a_4xx_robots_txt_allows_everything(source: str, status: int) -> None:
    record = RobotsRecord(FOO, classify(status), status, 0.0, 100.0, "")
    assert RobotsRules(record, "Somebot").allowed(FOO + "/"), source
