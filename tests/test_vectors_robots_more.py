"""More robots.txt test vectors from other implementations, as data, run against our rules.

The house pattern of :mod:`tests.test_vectors_robots` (its ``Case``, read the same way):
each case names its source file and test, a case where we deliberately differ carries our
verdict and, in ``differs``, the reason (the source's verdict is the opposite).

Sources:

* CPython, ``Lib/test/test_robotparser.py``: every ``RobotTestCase`` class (robots.txt, good
  and bad URLs, agent, crawl-delay, request-rate, sitemaps). Their URLs are paths: asked here
  on ``http://foo.bar``.
* Protego, ``tests/test_protego.py`` (scrapy/protego): the ``can_fetch``, ``crawl_delay``,
  ``request_rate`` and ``sitemaps`` checks. Protego is our matcher underneath, but it groups
  and names crawlers its own way (see :mod:`crawler.robots.groups`), so its cases test both.
  Its checks with a non-ASCII crawler name are left out: ours is a product token, ASCII only
  (``ROBOTSTXT_USER_AGENT`` is refused otherwise, see ``agent_problem``).

* seomoz/reppy, ``tests/test_robots.py``, ``tests/test_agent.py`` and the older
  ``tests/testReppy.py``: ``allowed`` verdicts, crawl delays, sitemaps, and the statuses its
  fetch turns into ``AllowAll`` / ``AllowNone``. Left out: expiry, fetch errors, robots.txt
  URLs of a page.

Indented bodies (Protego and reppy write theirs inside triple quotes) are kept as written:
RFC 9309 2.2 allows whitespace before a line's field name.
"""

from __future__ import annotations

import pytest

from crawler.robots import RobotsRecord, RobotsRules, classify
from tests.test_vectors_robots import Case, _rules

CPYTHON = "cpython Lib/test/test_robotparser.py"
PROTEGO = "scrapy/protego tests/test_protego.py"
REPPY = "seomoz/reppy"
FOO = "http://foo.bar"
SITE = "https://www.site.local"
LOCAL = "https://site.local"
EXAMPLE = "http://example.com"


def _py(test: str) -> str:
    return f"{CPYTHON}: {test}"


def _p(test: str) -> str:
    return f"{PROTEGO}: {test}"


def _paths(source: str, body: str, agent: str, good: list[str], bad: list[str]) -> list[Case]:
    """CPython's shape: paths allowed (``good``) and disallowed (``bad``) for one agent."""
    return [Case(source, body, agent, FOO + p, True) for p in good] + [
        Case(source, body, agent, FOO + p, False) for p in bad
    ]


# --- CPython Lib/test/test_robotparser.py -------------------------------------------------------

PY_AGENT = "test_robotparser"
CRAWL_DELAY_AND_CUSTOM_AGENT = (
    "# robots.txt for http://www.example.com/\n\nUser-agent: *\nCrawl-delay: 1\n"
    "Request-rate: 3/15\nDisallow: /cyberworld/map/ # This is an infinite virtual URL space\n\n"
    "# Cybermapper knows where to go.\nUser-agent: cybermapper\nDisallow:\n    "
)
PY_SITEMAPS = (
    "# robots.txt for http://www.example.com/\n\nUser-agent: *\n"
    "Sitemap: http://www.gstatic.com/s2/sitemaps/profiles-sitemap.xml\n"
    "Sitemap: http://www.google.com/hostednews/sitemap_index.xml\nRequest-rate: 3/15\n"
    "Disallow: /cyberworld/map/ # This is an infinite virtual URL space\n\n    "
)
FIGTREE = (
    "User-agent: figtree\nCrawl-delay: 3\nRequest-rate: 9/30\nDisallow: /tmp\n"
    "Disallow: /a%3cd.html\nDisallow: /a%2fb.html\nDisallow: /%7ejoe/index.html\n    "
)
FIGTREE_GOOD = ["/foo.html"]
FIGTREE_BAD = [
    "/tmp",
    "/tmp.html",
    "/tmp/a.html",
    "/a%3cd.html",
    "/a%3Cd.html",
    "/a%2fb.html",
    "/~joe/index.html",
]
INVALID_REQUEST_RATE = (
    "User-agent: *\nDisallow: /tmp/\nDisallow: /a%3Cd.html\nDisallow: /a/b.html\n"
    "Disallow: /%7ejoe/index.html\nCrawl-delay: 3\nRequest-rate: 9/banana\n    "
)
INVALID_CRAWL_DELAY = "User-Agent: *\nDisallow: /.\nCrawl-delay: pears\n    "
ANOTHER_INVALID_RATE = (
    "User-agent: Googlebot\nAllow: /folder1/myfile.html\nDisallow: /folder1/\n"
    "Request-rate: whale/banana\n    "
)
GOOGLEBOT_ORDERING = (
    "User-agent: Googlebot\nDisallow: /\n\nUser-agent: Googlebot-Mobile\nAllow: /\n    "
)
DEFAULT_ENTRY = (
    "User-agent: *\nCrawl-delay: 1\nRequest-rate: 3/15\nDisallow: /cyberworld/map/\n    "
)
STRING_FORMATTING = (
    "User-agent: *\nCrawl-delay: 1\nRequest-rate: 3/15\n"
    "Disallow: /cyberworld/map/ # This is an infinite virtual URL space\n\n"
    "# Cybermapper knows where to go.\nUser-agent: cybermapper\nDisallow: /some/path\n    "
)

CPYTHON_CASES = [
    *_paths(
        _py("UserAgentWildcardTest"),
        "User-agent: *\nDisallow: /cyberworld/map/ # This is an infinite virtual URL space\n"
        "Disallow: /tmp/ # these will soon disappear\nDisallow: /foo.html\n    ",
        PY_AGENT,
        ["/", "/test.html"],
        ["/cyberworld/map/index.html", "/tmp/xxx", "/foo.html"],
    ),
    *_paths(
        _py("CrawlDelayAndCustomAgentTest"),
        CRAWL_DELAY_AND_CUSTOM_AGENT,
        PY_AGENT,
        ["/", "/test.html"],
        ["/cyberworld/map/index.html"],
    ),
    *_paths(
        _py("CrawlDelayAndCustomAgentTest"),
        CRAWL_DELAY_AND_CUSTOM_AGENT,
        "cybermapper",
        ["/cyberworld/map/index.html"],
        [],
    ),
    *_paths(
        _py("SitemapTest"),
        PY_SITEMAPS,
        PY_AGENT,
        ["/", "/test.html"],
        ["/cyberworld/map/index.html"],
    ),
    *_paths(
        _py("RejectAllRobotsTest"),
        "# go away\nUser-agent: *\nDisallow: /\n    ",
        PY_AGENT,
        [],
        ["/cyberworld/map/index.html", "/", "/tmp/"],
    ),
    *_paths(_py("CrawlDelayAndRequestRateTest"), FIGTREE, "figtree", FIGTREE_GOOD, FIGTREE_BAD),
    # DifferentAgentTest: the agent "FigTree Robot libwww-perl/5.04", whose first product
    # token is "figtree" (RFC 9309 2.2.1), so the figtree group applies
    *_paths(
        _py("DifferentAgentTest"),
        FIGTREE,
        "FigTree Robot libwww-perl/5.04",
        FIGTREE_GOOD,
        FIGTREE_BAD,
    ),
    *_paths(
        _py("InvalidRequestRateTest"),
        INVALID_REQUEST_RATE,
        PY_AGENT,
        ["/tmp"],
        ["/tmp/", "/tmp/a.html", "/a%3cd.html", "/a%3Cd.html", "/a/b.html", "/%7Ejoe/index.html"],
    ),
    *_paths(_py("InvalidCrawlDelayTest"), INVALID_CRAWL_DELAY, PY_AGENT, ["/foo.html"], []),
    *_paths(
        _py("AnotherInvalidRequestRateTest"),
        ANOTHER_INVALID_RATE,
        "Googlebot",
        ["/folder1/myfile.html"],
        ["/folder1/anotherfile.html"],
    ),
    *_paths(_py("UserAgentOrderingTest"), GOOGLEBOT_ORDERING, "Googlebot", [], ["/something.jpg"]),
    # UserAgentGoogleMobileTest: urllib.robotparser matches a group's name as a substring of
    # the crawler's and takes the first group that matches, so Googlebot-Mobile obeys
    # "User-agent: Googlebot"; RFC 9309 2.2.1 matches the product token exactly, as Google does
    *_paths(
        _py("UserAgentGoogleMobileTest"),
        GOOGLEBOT_ORDERING,
        "Googlebot-Mobile",
        ["/something.jpg"],
        [],
    ),
    *_paths(
        _py("GoogleURLOrderingTest"),
        "User-agent: Googlebot\nAllow: /folder1/myfile.html\nDisallow: /folder1/\n    ",
        "googlebot",
        ["/folder1/myfile.html"],
        ["/folder1/anotherfile.html"],
    ),
    *_paths(
        _py("DisallowQueryStringTest"),
        "User-agent: *\nDisallow: /some/path?name=value\n    ",
        PY_AGENT,
        ["/some/path"],
        ["/some/path?name=value"],
    ),
    # UseFirstUserAgentWildcardTest: urllib.robotparser obeys only the first "*" group; RFC
    # 9309 2.2.1 combines every group naming the crawler (and so every "*" group)
    *_paths(
        _py("UseFirstUserAgentWildcardTest"),
        "User-agent: *\nDisallow: /some/path\n\nUser-agent: *\nDisallow: /another/path\n    ",
        PY_AGENT,
        [],
        ["/some/path", "/another/path"],
    ),
    *_paths(
        _py("EmptyQueryStringTest"),
        "User-agent: *\nAllow: /some/path?\nDisallow: /another/path?\n    ",
        PY_AGENT,
        ["/some/path?"],
        ["/another/path?"],
    ),
    *_paths(
        _py("DefaultEntryTest"),
        DEFAULT_ENTRY,
        PY_AGENT,
        ["/", "/test.html"],
        ["/cyberworld/map/index.html"],
    ),
    *_paths(
        _py("StringFormattingTest"),
        STRING_FORMATTING,
        "cybermapper",
        ["/cyberworld/map/x"],
        ["/some/path"],
    ),
    *_paths(_py("EmptyFileTest"), "", PY_AGENT, ["/", "/anything"], []),
]
# Newer classes of the file (CPython 3.14's, as in the Jah-yee/cpython mirror at a91d073e):
# DisallowQueryStringTest grown, PercentEncodingTest, and LocalNetworkTestCase's served file.
QUERY_STRINGS = (
    "User-agent: *\nDisallow: /some/path?name=value\nDisallow: /another/path?\n"
    "Disallow: /yet/one/path?name=value&more\n    "
)
# \U0001f40d is a raw non-ASCII character; \udcf0 (CPython's surrogate escape) the raw byte F0,
# served as a byte here
PERCENT_ENCODING = (
    "User-agent: *\n"
    "Disallow: /a1/Z-._~ # unreserved characters\n"
    "Disallow: /a2/%5A%2D%2E%5F%7E # percent-encoded unreserved characters\n"
    "Disallow: /u1/%F0%9F%90%8D # percent-encoded ASCII Unicode character\n"
    "Disallow: /u2/%f0%9f%90%8d\n"
    "Disallow: /u3/\U0001f40d # raw non-ASCII Unicode character\n"
    "Disallow: /v1/%F0 # percent-encoded non-ASCII octet\n"
    "Disallow: /v2/%f0\n"
    "Disallow: /v3/\udcf0 # raw non-ASCII octet\n"
    "Disallow: /p1%xy # raw percent\n"
    "Disallow: /p2%\n"
    "Disallow: /p3%25xy # percent-encoded percent\n"
    "Disallow: /p4%2525xy # double percent-encoded percent\n"
    "Disallow: /john%20smith # space\n"
    "Disallow: /john doe\n"
    "Disallow: /trailingspace%20\n"
    "Disallow: /question%3Fq=v # not query\n"
    "Disallow: /hash%23f # not fragment\n"
    "Disallow: /dollar%24\n"
    "Disallow: /asterisk%2A\n"
    "Disallow: /sub/dir\n"
    "Disallow: /slash%2F\n"
    "Disallow: /query/question?q=%3F\n"
    "Disallow: /query/raw/question?q=?\n"
    "Disallow: /query/eq?q%3Dv\n"
    "Disallow: /query/amp?q=v%26a\n"
    + "".join(f"Disallow: /raw{c}\nDisallow: /pc%{ord(c):02X}\n" for c in ":/#[]@!$&'()*+,;=")
).encode("utf-8", "surrogateescape")
PERCENT_GOOD = [
    "/u1/%F0", "/u1/%f0", "/u2/%F0", "/u2/%f0", "/u3/%F0", "/u3/%f0", "/p1%2525xy", "/p2%f0",
    "/p3%2525xy", "/p4%xy", "/p4%25xy", "/question?q=v", "/dollar", "/asterisk",
    "/query/eq?q=v", "/query/amp?q=v&a",
]  # fmt: skip
PERCENT_BAD = [
    "/a1/Z-._~", "/a1/%5A%2D%2E%5F%7E", "/a2/Z-._~", "/a2/%5A%2D%2E%5F%7E",
    "/u1/%F0%9F%90%8D", "/u1/%f0%9f%90%8d", "/u1/\U0001f40d",
    "/u2/%F0%9F%90%8D", "/u2/%f0%9f%90%8d", "/u2/\U0001f40d",
    "/u3/%F0%9F%90%8D", "/u3/%f0%9f%90%8d", "/u3/\U0001f40d",
    "/v1/%F0", "/v1/%f0", "/v1/\udcf0", "/v1/\U0001f40d",
    "/v2/%F0", "/v2/%f0", "/v2/\udcf0", "/v2/\U0001f40d",
    "/v3/%F0", "/v3/%f0", "/v3/\udcf0", "/v3/\U0001f40d",
    "/p1%xy", "/p1%25xy", "/p2%", "/p2%25", "/p2%2525", "/p2%xy", "/p3%xy", "/p3%25xy",
    "/p4%2525xy", "/john%20smith", "/john smith", "/john%20doe", "/john doe",
    "/trailingspace%20", "/trailingspace ", "/question%3Fq=v", "/hash#f", "/hash%23f",
    "/dollar$", "/dollar%24", "/asterisk*", "/asterisk%2A", "/sub/dir", "/sub%2Fdir",
    "/slash%2F", "/slash/", "/query/question?q=?", "/query/question?q=%3F",
    "/query/raw/question?q=?", "/query/raw/question?q=%3F", "/query/eq?q%3Dv",
    "/query/amp?q=v%26a",
    *[p for c in ":/#[]@!$&'()*+,;=" for p in (f"/raw{c}", f"/raw%{ord(c):02X}", f"/pc{c}",
                                               f"/pc%{ord(c):02X}")],
]  # fmt: skip
SERVED = (
    b"User-agent: test_robotparser\nDisallow: /utf8/\xf0\x9f\x90\x8d\nDisallow: /non-utf8/\xf0\n"
    b"Disallow: //[spam]/path\n"
)
CPYTHON_CASES += [
    *_paths(
        _py("DisallowQueryStringTest"),
        QUERY_STRINGS,
        PY_AGENT,
        [
            "/some/path",
            "/some/path?",
            "/some/path%3Fname=value",
            "/some/path?name%3Dvalue",
            "/another/path",
            "/another/path%3F",
            "/yet/one/path?name=value%26more",
        ],
        # the source's list misses a comma: its first "bad" URL is these two glued together
        [
            "/some/path?name=value/another/path?",
            "/another/path?name=value",
            "/yet/one/path?name=value&more",
        ],
    ),
    *_paths(_py("PercentEncodingTest"), PERCENT_ENCODING, PY_AGENT, PERCENT_GOOD, PERCENT_BAD),
    *_paths(
        _py("LocalNetworkTestCase"),
        SERVED,
        PY_AGENT,
        ["/robots.txt", "/utf8/", "/non-utf8/"],
        [
            "/utf8/\U0001f40d",
            "/utf8/%F0%9F%90%8D",
            "/non-utf8/%F0",
            "/non-utf8/\U0001f40d",
            "/%2F[spam]/path",
        ],
    ),
]

# The deliberate differences above, by their source test (the source's verdict is the
# opposite of ours for these URLs).
# RFC 9309 2.2.2 has reserved characters percent-encoded before comparison (its table reads
# "baz=https://foo.bar" as "baz=https%3A%2F%2Ffoo.bar"): "?", "=" and "&" compare as "%3F",
# "%3D" and "%26", the stricter reading (Protego's); CPython keeps them apart, as RFC 3986
# 2.2 does for URIs
RESERVED = "RFC 9309 2.2.2: a reserved character compares as its percent-encoding"
# "/" and "%2F" stay apart: a path separator is not data (RFC 3986 2.2), and Protego's and
# reppy's tests (the 1996 draft's /a%2fb.html) keep them apart; CPython reads them as one
SLASH = "RFC 3986 2.2: '%2F' is not a path separator; Protego and reppy keep them apart"
# A fragment is no part of the request (RFC 3986 3.5): "/hash#f" fetches "/hash"
FRAGMENT = "RFC 3986 3.5: the fragment is not requested; RFC 9309 matches path and query"
# The newer classes' lists above are CPython's verdicts: these URLs get the opposite one here.
CPYTHON_FLIPPED = {
    **{
        (_py("DisallowQueryStringTest"), FOO + path): RESERVED
        for path in (
            "/some/path%3Fname=value",
            "/some/path?name%3Dvalue",
            "/another/path%3F",
            "/yet/one/path?name=value%26more",
        )
    },
    **{
        (_py("PercentEncodingTest"), FOO + path): RESERVED
        for path in ("/question?q=v", "/query/eq?q=v", "/query/amp?q=v&a")
    },
    **{
        (_py("PercentEncodingTest"), FOO + path): SLASH
        for path in ("/sub%2Fdir", "/slash/", "/pc/")
    },
    (_py("LocalNetworkTestCase"), FOO + "/%2F[spam]/path"): SLASH,
    **{(_py("PercentEncodingTest"), FOO + path): FRAGMENT for path in ("/hash#f", "/pc#")},
}
CPYTHON_DIFFERS = {
    (_py("UserAgentGoogleMobileTest"), FOO + "/something.jpg"): (
        "RFC 9309 2.2.1: a group applies to the exact product token, not to a longer name"
    ),
    (_py("UseFirstUserAgentWildcardTest"), FOO + "/another/path"): (
        "RFC 9309 2.2.1: all groups naming the crawler (here: all '*' groups) are combined"
    ),
}
CPYTHON_CASES = [
    Case(
        c.source,
        c.body,
        c.agent,
        c.url,
        c.allowed is ((c.source, c.url) not in CPYTHON_FLIPPED),
        CPYTHON_DIFFERS.get((c.source, c.url), CPYTHON_FLIPPED.get((c.source, c.url), "")),
    )
    for c in CPYTHON_CASES
]

# CPython's crawl_delay() and request_rate(): ours is one wait, the larger of the Crawl-delay
# and the interval a Request-rate implies (9/30: 30 / 9 s).
CPYTHON_DELAYS = [
    (_py("CrawlDelayAndRequestRateTest"), FIGTREE, "figtree", 30 / 9),
    (_py("DifferentAgentTest"), FIGTREE, "FigTree Robot libwww-perl/5.04", 30 / 9),
    (_py("DefaultEntryTest"), DEFAULT_ENTRY, PY_AGENT, 5.0),
    (_py("CrawlDelayAndCustomAgentTest"), CRAWL_DELAY_AND_CUSTOM_AGENT, PY_AGENT, 5.0),
    (_py("CrawlDelayAndCustomAgentTest"), CRAWL_DELAY_AND_CUSTOM_AGENT, "cybermapper", None),
    (_py("InvalidRequestRateTest"), INVALID_REQUEST_RATE, PY_AGENT, 3.0),
    (_py("InvalidCrawlDelayTest"), INVALID_CRAWL_DELAY, PY_AGENT, None),
    (_py("AnotherInvalidRequestRateTest"), ANOTHER_INVALID_RATE, "Googlebot", None),
    (_py("NoRequestRateAndCrawlDelayTest"), "User-agent: *\nDisallow: /bar\n    ", PY_AGENT, None),
    (_py("EmptyFileTest"), "", PY_AGENT, None),
]
CPYTHON_SITEMAPS = [
    (
        _py("SitemapTest"),
        PY_SITEMAPS,
        [
            "http://www.gstatic.com/s2/sitemaps/profiles-sitemap.xml",
            "http://www.google.com/hostednews/sitemap_index.xml",
        ],
    ),
    (_py("EmptyFileTest"), "", []),
    (_py("UserAgentWildcardTest"), "User-agent: *\nDisallow: /tmp/\n", []),
]

# --- scrapy/protego tests/test_protego.py -------------------------------------------------------


def _checks(source: str, body: str, base: str, *checks: tuple) -> list[Case]:
    """Protego's shape: ``(url path, agent, allowed[, differs])`` on one robots.txt."""
    return [Case(source, body, agent, base + path, *rest) for path, agent, *rest in checks]


WILDCARDS = """User-agent: first
                     Disallow: /disallowed/*/end$
                     Disallow: /protego*work

                     User-agent: second
                     Allow: /*allowed
                     Disallow: /
                """
RULE_BOTS = """
        # robots.txt for http://www.example.com/

        User-agent: Rule1TestBot
        Disallow:  /foo*

        User-agent: Rule2TestBot
        Disallow:  /foo*/bar.html

        # Disallows anything containing the letter m!
        User-agent: Rule3TestBot
        Disallow:  *m

        User-agent: Rule4TestBot
        Allow:  /foo/bar.html
        Disallow: *

        User-agent: Rule5TestBot
        Disallow:  /foo*/*bar.html

        User-agent: Rule6TestBot
        Allow:  /foo$
        Disallow:  /foo

        # Exercise excessive wildcards
        # https://bitbucket.org/philip_semanchuk/robotexclusionrulesparser/issues/1
        User-agent: Rule7TestBot
        Allow: *****************/****.js

        """
UNICODE_PATHS = """
        User-Agent: *
        Disallow: /admin/
        Disallow: /static/
        # taken from https://en.wikipedia.org/robots.txt
        Disallow: /wiki/K%C3%A4ytt%C3%A4j%C3%A4:
        Disallow: /wiki/Käyttäjä:
        Disallow: /wiki/Keskustelu_käyttäjästä:
        User-Agent: UnicödeBöt
        Disallow: /some/randome/page.html"""
NO_LEADING_AGENT = """
        Disallow: /withoutUA
        Allow: /withoutUA/exception
        Crawl-delay: 5.2
        User-Agent: testbot
        Disallow: /withUA
        """
DEFAULT_AGENT = """
        User-Agent: robot
        Disallow: /ro-bot

        User-Agent: *
        Disallow: /default-UA

        User-Agent: testbot
        Disallow: /testbot
        """
CASE_INSENSITIVE = """
        User-Agent: testbot
        Disallow: /testbot

        User-Agent: *
        Disallow: /default-UA
        """
GROUPING = """
        User-Agent: one
        User-Agent: two
        Disallow: /success
        User-Agent: *
        Disallow: /failure
        """
GOOGLE_GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)
COMMENTS = """
        # comment 1
        User-Agent: one # comment 2
        # comment 3
        User-Agent: two
        Disallow: /one-two-bot
        # Disallow: /commented
        # comment 4
        User-Agent: *
        Disallow: /default-ua
        """
UNKNOWN_DIRECTIVE = """
        User-Agent: one
        Disallow: /bot-one
        Harry: Potter
        User-Agent: two
        Disallow: /bot-two
        """
MALFORMED_LINE = UNKNOWN_DIRECTIVE.replace("Harry: Potter", "Harry Potter")
EMPTY_RULES = """
        User-Agent: one
        Disallow:

        User-Agent: two
        Allow:
        """
EMPTY_GROUP = """
        User-Agent: harrybot
        Disallow: /
        User-Agent: testbot
        """
RFC_1994 = """
        # robots.txt for http://www.example.com/
        User-agent: *
        Disallow: /cyberworld/map/ # This is an infinite virtual URL space
        Disallow: /tmp/ # these will soon disappear
        Disallow: /foo.html
        """
RFC_1996 = """
        # robots.txt for http://www.example.com/

        User-agent: 1bot
        Allow: /tmp
        Disallow: /

        User-agent: 2bot
        Allow: /tmp/
        Disallow: /

        User-agent: 3bot
        Allow: /a%3cd.html
        Disallow: /

        User-agent: 4bot
        Allow: /a%3Cd.html
        Disallow: /

        User-agent: 5bot
        Allow: /a%2fb.html
        Disallow: /

        User-agent: 6bot
        Allow: /a/b.html
        Disallow: /

        User-agent: 7bot
        Allow: /%7ejoe/index.html
        Disallow: /

        User-agent: 8bot
        Allow: /~joe/index.html
        Disallow: /
        """
RFC_1996_ORG = """
        # /robots.txt for http://www.example.org/
        # comments to webmaster@example.org

        User-agent: unhipbot
        Disallow: /

        User-agent: webcrawler
        User-agent: excite
        Disallow:

        User-agent: *
        Disallow: /org/plans.html
        Allow: /org/
        Allow: /serv
        Allow: /~mak
        Disallow: /
        """

PROTEGO_CASES = [
    *_checks(
        _p("test_allowed"),
        "User-agent: * \nDisallow: /disallowed \nAllow: /allowed \nCrawl-delay: 10",
        SITE,
        ("/allowed", "mybot", True),
        ("/disallowed", "mybot", False),
    ),
    *_checks(
        _p("test_allowed"),
        "User-agent: * \nDisallow: /d \nCrawl-delay: 10",
        SITE,
        ("/abc/d", "mybot", True),
        ("/disallowed", "mybot", False),
    ),
    *_checks(
        _p("test_malformed_disallow"),
        "User-agent: * \nDisallow: /one \nDissallow: /two \nDissalow: /three \n"
        "Disalow: /four \nDiasllow: /five \nDisallaw: /six \n",
        SITE,
        *[(f"/{n}", "mybot", False) for n in ("one", "two", "three", "four", "five", "six")],
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "User-agent: * \nDisallow: / \nAllow: /page",
        SITE,
        ("/page", "mybot", True),
        ("/elsewhere", "mybot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
        FOO,
        ("/x/page.html", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        FOO,
        ("/x/page.html", "FooBot", True),
        ("/x/", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\ndisallow: \nallow: \n",
        FOO,
        ("/x/page.html", "FooBot", True),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\ndisallow: /\nallow: /\n",
        FOO,
        ("/x/page.html", "FooBot", True),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        FOO,
        ("/x/", "FooBot", True),
        ("/x", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
        FOO,
        ("/x/page.html", "FooBot", True),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        FOO,
        ("/page", "FooBot", True),
        ("/page.html", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        FOO,
        ("/x/page.html", "FooBot", True),
        ("/x/y.html", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        FOO,
        ("/x/page", "FooBot", True),
        ("/y/page", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /p\ndisallow: /\n",
        FOO,
        ("/page", "FooBot", True),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
        FOO,
        ("/folder/page", "FooBot", True),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\ndisallow: /folder\nallow: /folder\n",
        FOO,
        ("/folder/page", "FooBot", True),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
        FOO,
        ("/page.htm", "FooBot", False),
    ),
    *_checks(
        _p("test_length_based_precedence"),
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        FOO,
        ("/", "FooBot", True),
        ("/page.html", "FooBot", False),
    ),
    *_checks(
        _p("test_escaped_url"),
        "User-agent: * \nDisallow: / \nAllow: /a%3cd.html",
        SITE,
        ("/a<d.html", "mybot", True),
        ("/a%3cd.html", "mybot", True),
    ),
    *_checks(
        _p("test_escaped_url"),
        "User-agent: * \nDisallow: / \nAllow: /a%3c*",
        SITE,
        ("/a<d.html", "mybot", True),
        ("/a%3cd.html", "mybot", True),
    ),
    *_checks(
        _p("test_unescaped_url"),
        "User-agent: * \nDisallow: / \nAllow: /a<d.html",
        SITE,
        ("/a<d.html", "mybot", True),
        ("/a%3cd.html", "mybot", True),
    ),
    *_checks(
        _p("test_unescaped_url"),
        "User-agent: * \nDisallow: / \nAllow: /a<*",
        SITE,
        ("/a<d.html", "mybot", True),
        ("/a%3cd.html", "mybot", True),
    ),
    Case(
        _p("test_url_parts"),
        "User-agent: * \nDisallow: /path;params?query \n",
        "mybot",
        "http://userinfo@exmaple.com:10/path;params?query#fragment",
        False,
    ),
    *_checks(
        _p("test_url_parts"),
        "User-agent: * \nDisallow: /? \n",
        FOO,
        ("/?query", "mybot", False),
        ("/", "mybot", True),
    ),
    *_checks(
        _p("test_url_parts"),
        "User-agent: * \nDisallow: /; \n",
        FOO,
        ("/;params", "mybot", False),
        ("/", "mybot", True),
    ),
    *_checks(
        _p("test_empty_response"),
        "",
        LOCAL,
        ("/", "mybot", True),
        ("/", "chrome", True),
        ("/index.html", "mybot", True),
        ("/disallowed", "mybot", True),
    ),
    *_checks(
        _p("test_allowed_wildcards"),
        WILDCARDS,
        SITE,
        ("/disallowed", "first", True),
        ("/disallowed/xyz/end", "first", False),
        ("/disallowed/abc/end", "first", False),
        ("/disallowed/xyz/endinglater", "first", True),
        ("/protegoworks", "first", False),
        ("/protego_works", "first", False),
        ("/protego/works", "first", False),
        ("/protego_does_work", "first", False),
        ("/rotego_does_work", "first", True),
        ("/protego_does_wor", "first", True),
        ("/allowed", "second", True),
        ("/is_still_allowed", "second", True),
        ("/is_allowed_too", "second", True),
    ),
    *_checks(
        _p("test_allowed_wildcards"),
        RULE_BOTS,
        FOO,
        ("/fo.html", "Rule1TestBot", True),
        ("/foo.html", "Rule1TestBot", False),
        ("/food", "Rule1TestBot", False),
        ("/foo/bar.html", "Rule1TestBot", False),
        ("/fo.html", "Rule2TestBot", True),
        ("/foo/bar.html", "Rule2TestBot", False),
        ("/food/bar.html", "Rule2TestBot", False),
        ("/foo/a/b/c/x/y/z/bar.html", "Rule2TestBot", False),
        ("/food/xyz.html", "Rule2TestBot", True),
        ("/foo.htm", "Rule3TestBot", False),
        ("/foo.html", "Rule3TestBot", False),
        ("/foo", "Rule3TestBot", True),
        ("/foom", "Rule3TestBot", False),
        ("/moo", "Rule3TestBot", False),
        ("/foo/bar.html", "Rule3TestBot", False),
        ("/foo/bar.txt", "Rule3TestBot", True),
        ("/fo.html", "Rule4TestBot", False),
        ("/foo.html", "Rule4TestBot", False),
        ("/foo", "Rule4TestBot", False),
        ("/foo/bar.html", "Rule4TestBot", True),
        ("/foo/bar.txt", "Rule4TestBot", False),
        ("/foo/bar.html", "Rule5TestBot", False),
        ("/food/rebar.html", "Rule5TestBot", False),
        ("/food/rebarf.html", "Rule5TestBot", True),
        ("/foo/a/b/c/rebar.html", "Rule5TestBot", False),
        ("/foo/a/b/c/bar.html", "Rule5TestBot", False),
        ("/foo", "Rule6TestBot", True),
        ("/foo/", "Rule6TestBot", False),
        ("/foo/bar.html", "Rule6TestBot", False),
        ("/fooey", "Rule6TestBot", False),
        ("/xyz/foo.js", "Rule7TestBot", True),  # Protego asks "xyz/foo.js"
        ("/inlife/daily/fashion-20160727/", "Rule7TestBot", True),
    ),
    *_checks(
        _p("test_allowed_wildcards"),
        "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
        FOO,
        ("/foo/bar/quz", "FooBot", False),
        ("/foo/quz", "FooBot", True),
        ("/foo//quz", "FooBot", True),
        ("/foo/bax/quz", "FooBot", True),
    ),
    *_checks(
        _p("test_allowed_wildcards"),
        "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
        FOO,
        ("/foo/bar", "FooBot", False),
        ("/foo/bar/qux", "FooBot", True),
        ("/foo/bar/", "FooBot", True),
        ("/foo/bar/baz", "FooBot", True),
    ),
    *_checks(
        _p("test_unicode_url_and_useragent"),
        UNICODE_PATHS,
        LOCAL,
        ("/", "mybot", True),
        ("/admin/", "mybot", False),
        ("/static/", "mybot", False),
        ("/wiki/K%C3%A4ytt%C3%A4j%C3%A4:", "mybot", False),
        ("/wiki/Käyttäjä:", "mybot", False),
        ("/wiki/Keskustelu_k%C3%A4ytt%C3%A4j%C3%A4st%C3%A4:", "mybot", False),
        ("/wiki/Keskustelu_käyttäjästä:", "mybot", False),
        ("/some/randome/page.html", "mybot", True),
    ),
    *_checks(
        _p("test_no_leading_user_agent"),
        NO_LEADING_AGENT,
        LOCAL,
        ("/withoutUA", "mybot", True),
        ("/withoutUA", "testbot", True),
        ("/withUA", "mybot", True),
        ("/withUA", "testbot", False),
    ),
    *_checks(
        _p("test_default_user_agent"),
        DEFAULT_AGENT,
        LOCAL,
        ("/default-UA", "mybot", False),
        ("/default-UA", "testbot", True),
        ("/default-UA", "robot", True),
    ),
    *_checks(
        _p("test_user_agent_case_insensitivity"),
        CASE_INSENSITIVE,
        LOCAL,
        *[
            (path, agent, path != "/testbot")
            for agent in ("TESTbot", "testbot", "tEStbOt")
            for path in ("/testbot", "/default-UA")
        ],
    ),
    *_checks(
        _p("test_user_agent_grouping"),
        GROUPING,
        LOCAL,
        ("/success", "one", False),
        ("/success", "two", False),
        ("/failure", "one", True),
        ("/failure", "two", True),
    ),
    *_checks(
        _p("test_user_agent_grouping"),
        GOOGLE_GROUPS,
        FOO,
        ("/x/b", "FooBot", True),
        ("/z/d", "FooBot", True),
        ("/y/c", "FooBot", False),
        ("/y/c", "BarBot", True),
        ("/w/a", "BarBot", True),
        ("/z/d", "BarBot", False),
        ("/z/d", "BazBot", True),
        ("/foo/bar/", "FooBot", False),
        ("/foo/bar/", "BarBot", False),
        ("/foo/bar/", "BazBot", False),
    ),
    *_checks(
        _p("test_comments"),
        COMMENTS,
        LOCAL,
        ("/one-two-bot", "one", False),
        ("/one-two-bot", "two", False),
        ("/commented", "one", True),
        ("/commented", "two", True),
        ("/default-ua", "one", True),
        ("/default-ua", "two", True),
    ),
    *_checks(
        _p("test_comments"),
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        FOO,
        ("/foo/bar", "FooBot", True),
        ("/foo/quz", "FooBot", False),
    ),
    *_checks(
        _p("test_skip_unknown_directives"),
        UNKNOWN_DIRECTIVE,
        LOCAL,
        ("/bot-one", "one", False),
        ("/bot-two", "one", True),
        ("/bot-two", "two", False),
        ("/bot-one", "two", True),
    ),
    *_checks(
        _p("test_skip_malformed_line"),
        MALFORMED_LINE,
        LOCAL,
        ("/bot-one", "one", False),
        ("/bot-two", "one", True),
        ("/bot-two", "two", False),
        ("/bot-one", "two", True),
    ),
    *_checks(
        _p("test_empty_disallow_allow_directives"),
        EMPTY_RULES,
        LOCAL,
        *[(path, agent, True) for agent in ("one", "two") for path in ("/path1", "/path2")],
    ),
    *_checks(
        _p("test_empty_record_group"),
        EMPTY_GROUP,
        LOCAL,
        ("/path1", "testbot", True),
        ("/path2", "testbot", True),
    ),
    *[
        Case(_p("test_1994rfc_example"), RFC_1994, "CrunchyFrogBot", url, allowed)
        for url, allowed in [
            (FOO + "/", True),
            (FOO + "/foo.html", False),
            (FOO + "/foo.htm", True),
            (FOO + "/foo.shtml", True),
            (FOO + "/foo.htmlx", False),
            (FOO + "/cyberworld/index.html", True),
            (FOO + "/tmp/foo.html", False),
            ("http://example.com/foo.html", False),
            ("http://www.example.com/foo.html", False),
            ("http://www.example.org/foo.html", False),
            ("https://www.example.org/foo.html", False),
            ("ftp://example.net/foo.html", False),
        ]
    ],
    *_checks(
        _p("test_1996rfc_examples"),
        RFC_1996,
        FOO,
        ("/tmp.html", "1bot", True),
        ("/tmp", "1bot", True),
        ("/tmp/a.html", "1bot", True),
        ("/tmp", "2bot", False),
        ("/tmp/", "2bot", True),
        ("/tmp/a.html", "2bot", True),
        ("/a%3cd.html", "3bot", True),
        ("/a%3Cd.html", "3bot", True),
        ("/a%3cd.html", "4bot", True),
        ("/a%3Cd.html", "4bot", True),
        ("/a%2fb.html", "5bot", True),
        ("/a/b.html", "5bot", False),
        ("/a%2fb.html", "6bot", False),
        ("/a/b.html", "6bot", True),
        ("/~joe/index.html", "7bot", True),
        ("/%7Ejoe/index.html", "8bot", True),
    ),
]

EX_ORG = "http://www.example.org"
IMPLICIT_ALLOW = """
        # robots.txt for http://www.example.com/

        User-agent: *
        Disallow:    /

        User-agent: foobot
        Disallow:
        """
UNKNOWN_KEYS = """
        User-agent: abc
        Disallow: /content/2/
        User-agent: *
        Invalid_directive: /gb.html
        Invalid_directive: /content/2/
        User-agent: ia_archiver
        Disallow: /
        """
# Protego ends a group at an unknown line, so "*" gets no rules; RFC 9309 2.2.4 does not let
# other records interfere with grouping, so "*" and ia_archiver share "Disallow: /" (as
# Google's parser reads it: ID_LineSyntax_Groups_OtherRules)
OTHER_RECORDS = "RFC 9309 2.2.4: an unknown line does not end the group of '*' and ia_archiver"
GENEROUS = """
        user-agent foobot
        disallow /
        user agent harry potter
        disallow /horcrux
        request rate 1/10s 1820-1940
        """
NO_COLON = "RFC 9309 2.2: a line without a colon is read only when it is two words"
DIRECTIVE_CASE = """
        USER-AGENT: onebot
        ALLOW: /x
        DISALLOW: /

        user-agent: twobot
        allow: /x
        disallow: /

        uSEr-aGEnT: threeBot
        AlLoW: /x
        DIsALlOw: /
        """
LINE_ENDINGS = {
    "dos": "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
    "unix": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
    "mac": "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
    "no final": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
    "mixed": "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
}
NONTERMINAL_DOLLAR = (
    "user-agent: FooBot\ndisallow: /x$/abc\ndisallow: /y/abc$\ndisallow: /x*x$/abc\n"
    "disallow: /y*y/abc$\n"
)

PROTEGO_CASES += [
    *_checks(
        _p("test_1996rfc_examples"),
        RFC_1996_ORG,
        EX_ORG,
        *[
            (path, agent, allowed)
            for path, verdicts in [
                ("/", (False, True, True, False)),
                ("/index.html", (False, True, True, False)),
                ("/server.html", (False, True, True, True)),
                ("/services/fast.html", (False, True, True, True)),
                ("/services/slow.html", (False, True, True, True)),
                ("/orgo.gif", (False, True, True, False)),
                ("/org/about.html", (False, True, True, True)),
                ("/org/plans.html", (False, True, True, False)),
                ("/%7Ejim/jim.html", (False, True, True, False)),
                ("/%7Emak/mak.html", (False, True, True, True)),
            ]
            for agent, allowed in zip(
                ("unhipbot", "webcrawler", "excite", "OtherBot"), verdicts, strict=True
            )
        ],
    ),
    *_checks(
        _p("test_implicit_allow"),
        IMPLICIT_ALLOW,
        FOO,
        ("/", "foobot", True),
        ("/bar.html", "foobot", True),
        ("/", "SomeOtherBot", False),
        ("/blahblahblah", "SomeOtherBot", False),
    ),
    *_checks(
        _p("test_grouping_unknown_keys"),
        UNKNOWN_KEYS,
        FOO,
        ("/foo", "agent", False, OTHER_RECORDS),
        ("/foobar", "agent", False, OTHER_RECORDS),
        ("/content/2", "agent", False, OTHER_RECORDS),
        ("/bar", "ia_archiver", False),
        ("/foo", "ia_archiver", False),
        ("/foobar", "ia_archiver", False),
        ("/content/2", "ia_archiver", False),
    ),
    *_checks(
        _p("test_generosity"),
        "\n        Foo: Foobot\n        Bar: /",
        FOO,
        ("/x/y", "FooBot", True),
    ),
    # Protego reads "user agent harry potter" as a User-agent line; RFC 9309 2.2 asks for a
    # colon, and we take a line without one only as Google's parser does, when it is two
    # words (field, value): "Disallow all robots" is prose, not a rule. So the line is
    # skipped, "disallow /horcrux" joins foobot's group, and "harry" obeys no group
    *_checks(
        _p("test_generosity"),
        GENEROUS,
        FOO,
        ("/x/y", "FooBot", False),
        ("/horcrux", "harry potter", True, NO_COLON),
        ("/abc", "harry potter", True),
    ),
    # "user-agent: foo*bot" is no product token (RFC 9309 2.2.1: letters, "_" and "-"): it is
    # read as far as it is one, "foo", as Google's parser reads it; Protego matches the crawler
    # "foobot" to it
    *_checks(
        _p("test_generosity"),
        "\n        user-agent: foo*bot\n        disallow: /myprofile\n        ",
        FOO,
        ("/myprofile", "foo*bot", False),
        (
            "/myprofile",
            "foobot",
            True,
            "RFC 9309 2.2.1: 'foo*bot' is no product token; its leading token 'foo' is not foobot",
        ),
    ),
    *_checks(
        _p("test_directive_case_insensitivity"),
        DIRECTIVE_CASE,
        FOO,
        ("/x/y", "onebot", True),
        ("/a/b", "onebot", False),
        ("/x/y", "twobot", True),
        ("/a/b", "twobot", False),
        ("/x/y", "threebot", True),
        ("/a/b", "threebot", False),
    ),
    *[
        case
        for body in LINE_ENDINGS.values()
        for case in _checks(
            _p("test_line_endings"),
            body,
            "http://site.local",
            ("/some/path/", "foo", True),
            ("/some/path/", "bar", False),
        )
    ],
    *_checks(
        _p("test_index_html_is_directory"),
        "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        "http://foo.com",
        ("/allowed-slash/", "footbot", True),
        ("/allowed-slash/index.html", "footbot", True),
        ("/allowed-slash/index.htm", "footbot", False),
        ("/anyother-url", "footbot", False),
    ),
    *_checks(
        _p("test_percentage_encoding"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        FOO,
        ("/foo/bar?qux=taz&baz=http://foo.bar?tar&par", "FooBot", True),
    ),
    *[
        case
        for rule in ("/foo/bar/ツ", "/foo/bar/%E3%83%84")
        for case in _checks(
            _p("test_percentage_encoding"),
            f"User-agent: FooBot\nDisallow: /\nAllow: {rule}\n",
            FOO,
            ("/foo/bar/%E3%83%84", "FooBot", True),
            ("/foo/bar/ツ", "FooBot", True),
        )
    ],
    *_checks(
        _p("test_percentage_encoding"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        FOO,
        ("/foo/bar/baz", "FooBot", True),
        ("/foo/bar/%62%61%7A", "FooBot", True),
    ),
    *_checks(
        _p("test_url_case_sensitivity"),
        "user-agent: FooBot\ndisallow: /x/\n",
        FOO,
        ("/x/y", "FooBot", False),
    ),
    *_checks(
        _p("test_url_case_sensitivity"),
        "user-agent: FooBot\ndisallow: /X/\n",
        FOO,
        ("/x/y", "FooBot", True),
    ),
    *_checks(
        _p("test_nonterminal_dollar"),
        NONTERMINAL_DOLLAR,
        FOO,
        ("/x$/abcdef", "FooBot", False),
        ("/x%24/abcdef", "FooBot", False),
        ("/y/abcdef", "FooBot", True),
        ("/y/abc", "FooBot", False),
        ("/xabcx$/abcdef", "FooBot", False),
        ("/xabcx%24/abcdef", "FooBot", False),
        ("/yabcy/abc", "FooBot", False),
        ("/yabcy/abcdef", "FooBot", True),
    ),
    *_checks(
        _p("test_escaped_special_symbols"),
        "user-agent: FooBot\ndisallow: /x/abc%24\ndisallow: /x%2Ax/abc\n",
        FOO,
        ("/x/abc$abc", "FooBot", False),
        ("/x/abc$", "FooBot", False),
        ("/x/abc", "FooBot", True),
        ("/x*x/abc", "FooBot", False),
        ("/x*x/abcdef", "FooBot", False),
        ("/xabcx/abc", "FooBot", True),
    ),
    *_checks(
        _p("test_special_symbols_dual_behaviour"),
        "user-agent: FooBot\ndisallow: /x/abc$\ndisallow: /x*x/abc\n",
        FOO,
        ("/x*x/abc", "FooBot", False),
        ("/x/abc$", "FooBot", False),
        ("/x/abc%24", "FooBot", False),
    ),
    *_checks(
        _p("test_with_absolute_urls"),
        "user-agent: *\ndisallow: http://ms-web00.walkerplus.com/\n",
        FOO,
        ("/", "FooBot", True),
        ("/http://ms-web00.walkerplus.com/", "FooBot", False),
    ),
    *_checks(
        _p("test_disallow_target_url_path_is_missing"),
        "User-Agent: *\nDisallow: /\n",
        "http://example.com",
        ("/", "FooBot", False),
        ("", "FooBot", False),
    ),
    *_checks(
        _p("test_leading_double_slash_in_pattern"),
        "User-Agent: *\nDisallow: //folder/*\n",
        "http://example.com",
        ("/", "FooBot", True),
        ("/folder", "FooBot", True),
        ("/folder/", "FooBot", True),
        ("/folder/page", "FooBot", True),
        ("//folder", "FooBot", True),
        ("//folder/page", "FooBot", False),
    ),
    *_checks(
        _p("test_disallow_query_wildcard"),
        "User-agent: * \nDisallow: /*s=",
        SITE,
        ("/", "mybot", True),
        ("/s/", "mybot", True),
        ("/?s=asd", "mybot", False),
    ),
    *_checks(
        _p("test_leading_asterisk"),
        "User-Agent: *\nallow: */p\ndisallow: /\n",
        "http://example.com",
        ("/page", "mybot", True),
    ),
    *_checks(
        _p("test_leading_asterisk"),
        "User-Agent: *\nallow: /page\ndisallow: */*.htm\n",
        "https://example.com",
        ("/page.htm", "mybot", False),
    ),
]

PROTEGO_DELAYS = [
    (
        _p("test_crawl_delay"),
        "User-agent: * \nDisallow: /disallowed \nAllow: /allowed \nCrawl-delay: 10 \n"
        "User-agent: testbot\nCrawl-delay: 15 \n",
        agent,
        delay,
    )
    for agent, delay in (("mybot", 10.0), ("testbot", 15.0))
] + [
    (
        _p("test_malformed_crawl_delay"),
        "User-agent: * \nDisallow: /disallowed \nAllow: /allowed \nCrawl-delay: random_word",
        "mybot",
        None,
    ),
    (
        _p("test_no_crawl_delay"),
        "User-agent: * \nDisallow: /disallowed \nAllow: /allowed",
        "mybot",
        None,
    ),
    # a Request-rate is n requests per period: a wait of period / n (Protego's time window,
    # "1820-1940", is not used by the crawler)
    *[
        (
            _p("test_request_rate"),
            "\n        User-agent: one\n        Request-rate: 1/10s\n        User-agent: two\n"
            "        Request-rate: 100/15m\n        User-agent: three\n"
            "        Request-rate: 400/1h\n        User-agent: four\n"
            "        Request-rate: 9000/1d\n        User-agent: five\n"
            "        Request-rate: 1/10s 1820-1940\n        ",
            agent,
            delay,
        )
        for agent, delay in (
            ("one", 10.0),
            ("two", 9.0),
            ("three", 9.0),
            ("four", 9.6),
            ("five", 10.0),
        )
    ],
    (
        _p("test_no_request_rate"),
        "\n        User-agent: one\n        Request-rate: 1/10s\n        User-agent: two\n"
        "        Disallow: /\n        ",
        "two",
        None,
    ),
    (_p("test_no_leading_user_agent"), NO_LEADING_AGENT, "testbot", None),
    (_p("test_no_leading_user_agent"), NO_LEADING_AGENT, "mybot", None),
    # Protego: 10 s, from "request rate 1/10s 1820-1940", a line of three words without a
    # colon, which we skip (NO_COLON), as "user agent harry potter" above it
    (_p("test_generosity"), GENEROUS, "harry potter", None),
]
PROTEGO_SITEMAPS = [
    (
        _p("test_sitemaps"),
        "User-agent: * \nDisallow: /disallowed \nAllow: /allowed \n"
        "Sitemap: https://site.local/sitemap.xml \nAllow: /another_allowed \n"
        "User-agent: testbot \nSitemap: https://site.local/sitemap2.xml",
        ["https://site.local/sitemap.xml", "https://site.local/sitemap2.xml"],
    ),
    (
        _p("test_no_sitemaps"),
        "User-agent: * \nDisallow: /disallowed \nAllow: /allowed \nCrawl-delay: 10",
        [],
    ),
    (
        _p("test_sitemaps_come_first"),
        "Sitemap: https://www.foo.bar/sitmap.xml\nUser-Agent: FootBot\nDisallow: /something",
        ["https://www.foo.bar/sitmap.xml"],
    ),
]

# --- seomoz/reppy ---------------------------------------------------------------------------


def _r(path_and_test: str) -> str:
    return f"{REPPY} {path_and_test}"


FICT_ORG = """
            # /robots.txt for http://www.fict.org/
            # comments to webmaster@fict.org

            User-agent: unhipbot
            Disallow: /

            User-agent: webcrawler
            User-agent: excite
            Disallow:

            User-agent: *
            Disallow: /org/plans.html
            Allow: /org/
            Allow: /serv
            Allow: /~mak
            Disallow: /
        """
FICT_PATHS = [
    "/", "/index.html", "/robots.txt", "/server.html", "/services/fast.html",
    "/services/slow.html", "/orgo.gif", "/org/about.html", "/org/plans.html",
    "/%7Ejim/jim.html", "/%7Emak/mak.html",
]  # fmt: skip
# "anything": allowed or not, in FICT_PATHS' order (unhipbot: only /robots.txt; webcrawler
# and excite: all)
FICT_ANYTHING = [False, False, True, True, True, True, False, True, False, False, True]
GROUPING_UNKNOWN_KEYS = """
            User-agent: *
            Disallow: /content/2/
            User-agent: *
            Noindex: /gb.html
            Noindex: /content/2/
            User-agent: ia_archiver
            Disallow: /
        """
BOM_BODY = b"""
            User-Agent: agent
            Allow: /path

            User-Agent: other
            Disallow: /path
        """
# reppy's test_utf16_bom puts a UTF-16 byte-order mark (codecs.BOM_UTF16, "\xff\xfe" here)
# before ASCII text: not a UTF-16 file, read as UTF-8 with two stray bytes
REPPY_CASES = [
    *_checks(
        _r("tests/test_robots.py: test_honors_default_agents"),
        "\n            User-agent: *\n            Disallow: /tmp\n\n"
        "            User-agent: other-agent\n            Allow: /tmp\n        ",
        EXAMPLE,
        ("/tmp", "agent", False),
        ("/path", "agent", True),
    ),
    *_checks(
        _r("tests/test_robots.py: test_honors_specific_agent"),
        "\n            User-agent: *\n            Disallow: /tmp\n\n"
        "            User-agent: agent\n            Allow: /tmp\n        ",
        EXAMPLE,
        ("/tmp", "agent", True),
        ("/path", "agent", True),
    ),
    *_checks(
        _r("tests/test_robots.py: test_grouping"),
        "\n            User-agent: one\n            User-agent: two\n"
        "            Disallow: /tmp\n        ",
        EXAMPLE,
        ("/tmp", "one", False),
        ("/tmp", "two", False),
    ),
    # reppy, as Protego, ends a group at an unknown line (here "Noindex"), so "agent" gets only
    # the first "*" group; RFC 9309 2.2.4 does not let it end the group of the second "*"
    # line and ia_archiver, which both share "Disallow: /"
    *_checks(
        _r("tests/test_robots.py: test_grouping_unknown_keys"),
        GROUPING_UNKNOWN_KEYS,
        EXAMPLE,
        ("/foo", "agent", False, "RFC 9309 2.2.4: a Noindex line does not end a group"),
        ("/bar", "ia_archiver", False),
    ),
    *_checks(
        _r("tests/test_robots.py: test_case_insensitivity"),
        "\n            User-agent: agent\n            Disallow: /path\n        ",
        EXAMPLE,
        ("/path", "agent", False),
        ("/path", "aGeNt", False),
    ),
    *_checks(_r("tests/test_robots.py: test_empty"), "", EXAMPLE, ("/", "agent", True)),
    *_checks(
        _r("tests/test_robots.py: test_accepts_full_url"),
        "\n            User-Agent: agent\n            Disallow: /\n        ",
        EXAMPLE,
        ("/path", "agent", False),
    ),
    # reppy skips a line without a colon; Google's parser reads "Disallow /path" as a rule
    # (ID_LineSyntax_Line: "disallow /"), and so does ours: a two-word line is a field and
    # its value (RFC 9309 2.2.4 lets a parser be lenient), the stricter verdict
    *_checks(
        _r("tests/test_robots.py: test_skip_malformed_line"),
        "\n            User-Agent: agent\n            Disallow /no/colon/in/this/line\n        ",
        EXAMPLE,
        (
            "/no/colon/in/this/line",
            "agent",
            False,
            "Google's ID_LineSyntax_Line: a missing colon still makes a rule",
        ),
    ),
    *[
        case
        for bom in (b"\xef\xbb\xbf", b"\xff\xfe")
        for case in (
            Case(
                _r("tests/test_robots.py: test_utf8_bom"),
                bom + BOM_BODY,
                "agent",
                EXAMPLE + "/path",
                True,
            ),
            Case(
                _r("tests/test_robots.py: test_utf8_bom"),
                bom + BOM_BODY,
                "other",
                EXAMPLE + "/path",
                False,
            ),
        )
    ],
    *_checks(
        _r("tests/test_robots.py: test_rfc_example"),
        FICT_ORG,
        "http://www.fict.org",
        *[(path, "unhipbot", path == "/robots.txt") for path in FICT_PATHS],
        *[(path, agent, True) for agent in ("webcrawler", "excite") for path in FICT_PATHS],
        *[(path, "anything", ok) for path, ok in zip(FICT_PATHS, FICT_ANYTHING, strict=True)],
    ),
    *_checks(
        _r("tests/test_agent.py: test_make_allowed"),
        "User-agent: agent\nDisallow: /path\nAllow: /path/\n",
        EXAMPLE,
        ("/path/", "agent", True),
        ("/path", "agent", False),
    ),
    *_checks(
        _r("tests/test_agent.py: test_checks_allowed"),
        "\n            User-agent: agent\n            Allow: /path\n        ",
        EXAMPLE,
        ("/path", "agent", True),
        ("/elsewhere", "agent", True),
    ),
    *_checks(
        _r("tests/test_agent.py: test_honors_longest_first_priority"),
        "\n            User-agent: agent\n            Disallow: /path\n"
        "            Allow: /path/exception\n        ",
        EXAMPLE,
        ("/path/exception", "agent", True),
        ("/path", "agent", False),
    ),
    *_checks(
        _r("tests/test_agent.py: test_robots_txt_allowed"),
        "\n            User-agent: agent\n            Disallow: /robots.txt\n        ",
        EXAMPLE,
        ("/robots.txt", "agent", True),
    ),
    *_checks(
        _r("tests/test_agent.py: test_disallow_none"),
        "\n            User-agent: agent\n            Disallow:\n        ",
        EXAMPLE,
        ("/anything", "agent", True),
    ),
    *[
        case
        for name, rule in [
            ("test_escaped_rule", "/a%3cd.html"),
            ("test_unescaped_rule", "/a<d.html"),
            ("test_escaped_rule_wildcard", "/a%3c*"),
            ("test_unescaped_rule_wildcard", "/a<*"),
        ]
        for case in _checks(
            _r(f"tests/test_agent.py: {name}"),
            f"\n            User-agent: agent\n            Disallow: {rule}\n        ",
            EXAMPLE,
            ("/a<d.html", "agent", False),
            ("/a%3cd.html", "agent", False),
        )
    ],
    Case(
        _r("tests/test_agent.py: test_accepts_full_url"),
        "\n            User-agent: agent\n            Disallow: /path;params?query\n        ",
        "agent",
        "http://exmaple.com/path;params?query",
        False,
    ),
    *_checks(
        _r("tests/testReppy.py: test_basic"),
        "\n\t\t\tUser-agent: *\n\t\t\tDisallow: /tmp",
        EXAMPLE,
        ("/tmp", "t", False),
        ("/tmp.html", "t", False),
        ("/tmp/a.html", "t", False),
    ),
    *_checks(
        _r("tests/testReppy.py: test_basic"),
        "\n\t\t\tUser-agent: *\n\t\t\tDisallow: /tmp/",
        EXAMPLE,
        ("/tmp", "t", True),
        ("/tmp/", "t", False),
        ("/tmp/a.html", "t", False),
    ),
    *[
        case
        for rule, paths in [
            ("/a%3cd.html", ("/a%3cd.html", "/a%3Cd.html")),
            ("/a%3Cd.html", ("/a%3cd.html", "/a%3Cd.html")),
            ("/%7ejoe/index.html", ("/~joe/index.html", "/%7ejoe/index.html")),
        ]
        for case in _checks(
            _r("tests/testReppy.py: test_unquoting"),
            f"\n\t\t\tUser-agent: *\n\t\t\tDisallow: {rule}",
            EXAMPLE,
            *[(path, "t", False) for path in paths],
        )
    ],
    *_checks(
        _r("tests/testReppy.py: test_unquoting_forward_slash"),
        "\n\t\t\tUser-agent: *\n\t\t\tDisallow: /a%2fb.html",
        EXAMPLE,
        ("/a%2fb.html", "t", False),
        ("/a/b.html", "t", True),
    ),
    *_checks(
        _r("tests/testReppy.py: test_unquoting_forward_slash"),
        "\n\t\t\tUser-agent: *\n\t\t\tDisallow: /a/b.html",
        EXAMPLE,
        ("/a%2fb.html", "t", True),
        ("/a/b.html", "t", False),
    ),
    *_checks(
        _r("tests/testReppy.py: test_batch_queries"),
        "\n\t\t\tUser-agent: *\n\t\t\tDisallow: /a\n\t\t\tDisallow: /b\n\t\t\tAllow: /b/",
        EXAMPLE,
        ("/a/hello", "t", False),
        ("/a/howdy", "t", False),
        ("/b", "t", False),
        ("/b/hello", "t", True),
    ),
    *_checks(
        _r("tests/testReppy.py: test_wildcard"),
        "\n\t\t\tUser-agent: *\n\t\t\tDisallow: /hello/*/are/you",
        EXAMPLE,
        ("/hello/", "t", True),
        ("/hello/how/are/you", "t", False),
        ("/hi/how/are/you/", "t", True),
    ),
    *_checks(
        _r("tests/testReppy.py: test_case_insensitivity"),
        "\n\t\t\tUser-agent: agent\n\t\t\tDisallow: /a",
        EXAMPLE,
        *[("/a", agent, False) for agent in ("Agent", "aGent", "AGeNt", "AGENT")],
    ),
]
REPPY_DELAYS = [
    (
        _r("tests/test_robots.py: test_malformed_crawl_delay"),
        "\n            User-agent: *\n            Crawl-delay: word\n        ",
        "agent",
        None,
    ),
    *[
        (
            _r("tests/test_robots.py: test_separates_agents"),
            "\n            User-agent: one\n            Crawl-delay: 1\n\n"
            "            User-agent: two\n            Crawl-delay: 2\n        ",
            agent,
            delay,
        )
        for agent, delay in (("one", 1.0), ("two", 2.0))
    ],
    *[
        (
            _r("tests/testReppy.py: test_crawl_delay"),
            "\n\t\t\tUser-agent: agent\n\t\t\tCrawl-delay: 5\n\t\t\tUser-agent: *\n"
            "\t\t\tCrawl-delay: 1",
            agent,
            delay,
        )
        for agent, delay in (("agent", 5.0), ("testing", 1.0))
    ],
]
REPPY_SITEMAPS = [
    (
        _r("tests/test_robots.py: test_exposes_sitemaps"),
        "\n            Sitemap: http://a.com/sitemap.xml\n"
        "            Sitemap: http://b.com/sitemap.xml\n        ",
        ["http://a.com/sitemap.xml", "http://b.com/sitemap.xml"],
    ),
    (
        _r("tests/testReppy.py: test_sitemaps"),
        "\n\t\t\tUser-agent: agent\n\t\t\tSitemap: http://a.com/sitemap.xml\n"
        "\t\t\tSitemap: http://b.com/sitemap.xml",
        ["http://a.com/sitemap.xml", "http://b.com/sitemap.xml"],
    ),
    (_r("tests/test_robots.py: test_empty"), "", []),
]
# reppy's fetch: 401 and 403 give AllowNone (nothing allowed), another 4xx AllowAll, a 5xx an
# error. RFC 9309 2.3.1.3: every 4xx is "unavailable", which allows everything (401 and 403
# included: the RFC names no exception); 2.3.1.4: a 5xx is "unreachable", a complete disallow
REPPY_STATUSES = [
    (_r("tests/test_robots.py: test_fetch_status_401"), 401, True,
     "RFC 9309 2.3.1.3: a 401 is unavailable, no restrictions"),
    (_r("tests/test_robots.py: test_fetch_status_403"), 403, True,
     "RFC 9309 2.3.1.3: a 403 is unavailable, no restrictions"),
    (_r("tests/test_robots.py: test_fetch_status_4XX"), 404, True, ""),
    (_r("tests/test_robots.py: test_fetch_status_5XX"), 500, False, ""),
]  # fmt: skip

VERDICTS = CPYTHON_CASES + PROTEGO_CASES + REPPY_CASES


@pytest.mark.parametrize(
    "case", VERDICTS, ids=[f"{c.source.rsplit(' ', 1)[-1]}-{i}" for i, c in enumerate(VERDICTS)]
)
def test_verdict(case: Case) -> None:
    origin = case.url.split("/", 3)[:3]
    assert _rules(case.body, case.agent, "/".join(origin)).allowed(case.url) is case.allowed, case


@pytest.mark.parametrize(
    ("source", "body", "agent", "delay"), CPYTHON_DELAYS + PROTEGO_DELAYS + REPPY_DELAYS
)
def test_crawl_delay(source: str, body: str, agent: str, delay: float | None) -> None:
    assert _rules(body, agent).crawl_delay() == pytest.approx(delay), source


@pytest.mark.parametrize(
    ("source", "body", "sitemaps"), CPYTHON_SITEMAPS + PROTEGO_SITEMAPS + REPPY_SITEMAPS
)
def test_sitemaps(source: str, body: str, sitemaps: list[str]) -> None:
    assert _rules(body, "foo").sitemaps() == sitemaps, source


@pytest.mark.parametrize(("source", "status", "allowed", "differs"), REPPY_STATUSES)
def test_what_a_status_allows(source: str, status: int, allowed: bool, differs: str) -> None:
    record = RobotsRecord(EXAMPLE, classify(status), status, 0.0, 100.0, "")
    assert RobotsRules(record, "agent").allowed(EXAMPLE + "/path") is allowed, source
