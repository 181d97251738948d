"""Other projects' robots.txt test vectors, as data, run against our rules.

Sources (each case names its file and test):

* Google's parser: ``google/robotstxt``, ``robots_test.cc``: every ``EXPECT`` of
  ``IsUserAgentAllowed`` (a robots.txt, the name the crawler goes by, a URL: allowed?) and of
  ``IsValidUserAgentToObey``; the parse-only tests (line endings, byte-order mark, sitemaps)
  as the verdicts they imply. ``GoogleOnly_*`` tests are Google's behaviour where RFC 9309 is
  silent: followed unless the RFC says otherwise.
* crawler-commons, ``SimpleRobotRulesParserTest.java``: the classes Google's file lacks
  (crawl-delay, sitemaps, byte-order marks, an HTML page as robots.txt).

A verdict is asked as the crawl asks it: the crawler's name goes through
:func:`crawler.config.agent.crawler_token` (a ``User-Agent`` value, whose first product
token names the crawler), the body through :func:`crawler.robots.decode_body`, the URL to
:meth:`crawler.robots.RobotsRules.allowed`. A case where we deliberately differ carries our
verdict and, in ``differs``, the reason (the source's verdict is the opposite).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from crawler.config.agent import agent_problem, crawler_token
from crawler.robots import RULES, RobotsRecord, RobotsRules, decode_body

GOOGLE = "google/robotstxt robots_test.cc"
COMMONS = "crawler-commons SimpleRobotRulesParserTest.java"


@dataclass(frozen=True)
class Case:
    source: str  # file and test name
    body: str | bytes  # bytes: as served, decoded as a fetch's body is
    agent: str  # the crawler's name (its User-Agent)
    url: str
    allowed: bool  # our verdict
    differs: str = ""  # why ours is not the source's verdict


def _rules(body: str | bytes, agent: str, origin: str = "http://foo.bar") -> RobotsRules:
    text = decode_body(body)[0] if isinstance(body, bytes) else body
    return RobotsRules(RobotsRecord(origin, RULES, 200, 0.0, 100.0, text), crawler_token(agent))


def _cases(source: str, body: str | bytes, *checks: tuple) -> list[Case]:
    """One source test's checks on one robots.txt: ``(agent, url, allowed[, differs])``."""
    return [Case(source, body, *check) for check in checks]


def _g(test: str) -> str:
    return f"{GOOGLE}: {test}"


def _c(test: str) -> str:
    return f"{COMMONS}: {test}"


FOOBOT_DENIED = "user-agent: FooBot\ndisallow: /\n"
FOO = "http://foo.bar"

# --- google/robotstxt robots_test.cc -----------------------------------------------------------

GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)
CASE_NAMES = {
    "upper": "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
    "lower": "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
    "camel": "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
}
CASE_VALUES = {
    "upper": "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
    "lower": "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
    "camel": "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
}
GLOBAL = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
ONLY_SPECIFIC = (
    "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n"
    "user-agent: BazBot\ndisallow: /\n"
)
PAGE = f"{FOO}/x/page.html"
# Google's line limit: 2083 * 8 bytes, the rest of a longer line ignored. Its long paths are
# "/x/" then one letter, as long as makes ``field + path`` one byte over the limit.
GOOGLE_MAX_LINE = 2083 * 8


def _long_path(field: str, letter: str) -> str:
    return "/x/" + letter * (GOOGLE_MAX_LINE - len("/x/") - len(field) + 1 - len("/x/"))


LONG_DISALLOW = _long_path("disallow: ", "a")
LONG_ALLOW_A = _long_path("allow: ", "a")
LONG_ALLOW_B = _long_path("allow: ", "b")

# RFC 9309 2.2.2: octets outside US-ASCII, and reserved ones, are percent-encoded in the URL and
# in the rule before they are compared; its own table reads "/foo/bar/%62%61%7A" as
# "/foo/bar/baz" (RFC 3986 6.2.2.2: encoded unreserved characters are the characters). Google's
# parser compares as written and asks the caller to encode the URL.
ENCODED = "RFC 9309 2.2.2: URL and rule are percent-encoded the same way before comparison"
UNRESERVED = "RFC 9309 2.2.2 (its table): %62%61%7A matches /baz, RFC 3986 6.2.2.2"
# RFC 9110 10.1.5: a User-Agent is products separated by spaces; its first product token
# names the crawler (RFC 9309 2.2.1), so "Foo Bar" is the crawler "foo" and obeys "Foo" groups.
# Google's matcher compares the whole given string with the group's first word.
FIRST_PRODUCT = "RFC 9309 2.2.1 / RFC 9110 10.1.5: the User-Agent's first product token, foo"

GOOGLE_CASES = [
    *_cases(
        _g("GoogleOnly_SystemTest"),
        "",
        ("FooBot", "", True),
        ("", "", True),
    ),
    *_cases(
        _g("GoogleOnly_SystemTest"),
        FOOBOT_DENIED,
        ("", "", True),
        ("FooBot", "", False),
    ),
    *_cases(_g("ID_LineSyntax_Line"), FOOBOT_DENIED, ("FooBot", f"{FOO}/x/y", False)),
    *_cases(_g("ID_LineSyntax_Line"), "foo: FooBot\nbar: /\n", ("FooBot", f"{FOO}/x/y", True)),
    *_cases(
        _g("ID_LineSyntax_Line"),
        "user-agent FooBot\ndisallow /\n",
        ("FooBot", f"{FOO}/x/y", False),
    ),
    *_cases(
        _g("ID_LineSyntax_Groups"),
        GROUPS,
        ("FooBot", f"{FOO}/x/b", True),
        ("FooBot", f"{FOO}/z/d", True),
        ("FooBot", f"{FOO}/y/c", False),
        ("BarBot", f"{FOO}/y/c", True),
        ("BarBot", f"{FOO}/w/a", True),
        ("BarBot", f"{FOO}/z/d", False),
        ("BazBot", f"{FOO}/z/d", True),
        ("FooBot", f"{FOO}/foo/bar/", False),
        ("BarBot", f"{FOO}/foo/bar/", False),
        ("BazBot", f"{FOO}/foo/bar/", False),
    ),
    *_cases(
        _g("ID_LineSyntax_Groups_OtherRules"),
        "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
        ("FooBot", f"{FOO}/", False),
        ("BarBot", f"{FOO}/", False),
    ),
    *_cases(
        _g("ID_LineSyntax_Groups_OtherRules"),
        "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
        ("FooBot", f"{FOO}/", False),
        ("BarBot", f"{FOO}/", False),
    ),
    *[
        case
        for body in CASE_NAMES.values()
        for case in _cases(
            _g("ID_REPLineNamesCaseInsensitive"),
            body,
            ("FooBot", f"{FOO}/x/y", True),
            ("FooBot", f"{FOO}/a/b", False),
        )
    ],
    *[
        case
        for body in CASE_VALUES.values()
        for agent in ("Foo", "foo")
        for case in _cases(
            _g("ID_UserAgentValueCaseInsensitive"),
            body,
            (agent, f"{FOO}/x/y", True),
            (agent, f"{FOO}/a/b", False),
        )
    ],
    *_cases(
        _g("GoogleOnly_AcceptUserAgentUpToFirstSpace"),
        "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
        ("Foo", f"{FOO}/x/y", True),
        ("Foo Bar", f"{FOO}/x/y", True, FIRST_PRODUCT),
    ),
    *_cases(_g("ID_GlobalGroups_Secondary"), "", ("FooBot", f"{FOO}/x/y", True)),
    *_cases(
        _g("ID_GlobalGroups_Secondary"),
        GLOBAL,
        ("FooBot", f"{FOO}/x/y", False),
        ("BarBot", f"{FOO}/x/y", True),
    ),
    *_cases(_g("ID_GlobalGroups_Secondary"), ONLY_SPECIFIC, ("QuxBot", f"{FOO}/x/y", True)),
    *_cases(
        _g("ID_AllowDisallow_Value_CaseSensitive"),
        "user-agent: FooBot\ndisallow: /x/\n",
        ("FooBot", f"{FOO}/x/y", False),
    ),
    *_cases(
        _g("ID_AllowDisallow_Value_CaseSensitive"),
        "user-agent: FooBot\ndisallow: /X/\n",
        ("FooBot", f"{FOO}/x/y", True),
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
        ("FooBot", PAGE, False),
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        ("FooBot", PAGE, True),
        ("FooBot", f"{FOO}/x/", False),
    ),
    *_cases(
        _g("ID_LongestMatch"), "user-agent: FooBot\ndisallow: \nallow: \n", ("FooBot", PAGE, True)
    ),
    *_cases(
        _g("ID_LongestMatch"), "user-agent: FooBot\ndisallow: /\nallow: /\n", ("FooBot", PAGE, True)
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        ("FooBot", f"{FOO}/x", False),
        ("FooBot", f"{FOO}/x/", True),
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
        ("FooBot", PAGE, True),
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        ("FooBot", f"{FOO}/page.html", False),
        ("FooBot", f"{FOO}/page", True),
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        ("FooBot", PAGE, True),
        ("FooBot", f"{FOO}/x/y.html", False),
    ),
    *_cases(
        _g("ID_LongestMatch"),
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        ("FooBot", f"{FOO}/x/page", True),
        ("FooBot", f"{FOO}/y/page", False),
    ),
    *_cases(
        _g("ID_Encoding"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        ("FooBot", f"{FOO}/foo/bar?qux=taz&baz=http://foo.bar?tar&par", True),
    ),
    *_cases(
        _g("ID_Encoding"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        ("FooBot", f"{FOO}/foo/bar/%E3%83%84", True),
        ("FooBot", f"{FOO}/foo/bar/ツ", True, ENCODED),
    ),
    *_cases(
        _g("ID_Encoding"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        ("FooBot", f"{FOO}/foo/bar/%E3%83%84", True),
        ("FooBot", f"{FOO}/foo/bar/ツ", True, ENCODED),
    ),
    *_cases(
        _g("ID_Encoding"),
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        ("FooBot", f"{FOO}/foo/bar/baz", True, UNRESERVED),
        ("FooBot", f"{FOO}/foo/bar/%62%61%7A", True),
    ),
    *_cases(
        _g("ID_SpecialCharacters"),
        "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
        ("FooBot", f"{FOO}/foo/bar/quz", False),
        ("FooBot", f"{FOO}/foo/quz", True),
        ("FooBot", f"{FOO}/foo//quz", True),
        ("FooBot", f"{FOO}/foo/bax/quz", True),
    ),
    *_cases(
        _g("ID_SpecialCharacters"),
        "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
        ("FooBot", f"{FOO}/foo/bar", False),
        ("FooBot", f"{FOO}/foo/bar/qux", True),
        ("FooBot", f"{FOO}/foo/bar/", True),
        ("FooBot", f"{FOO}/foo/bar/baz", True),
    ),
    *_cases(
        _g("ID_SpecialCharacters"),
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        ("FooBot", f"{FOO}/foo/bar", True),
        ("FooBot", f"{FOO}/foo/quz", False),
    ),
    # Google-only, RFC 9309 silent: an allowed ".../index.htm[l]" allows its directory too.
    *_cases(
        _g("GoogleOnly_IndexHTMLisDirectory"),
        "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        ("foobot", "http://foo.com/allowed-slash/", True),
        ("foobot", "http://foo.com/allowed-slash/index.htm", False),
        ("foobot", "http://foo.com/allowed-slash/index.html", True),
        ("foobot", "http://foo.com/anyother-url", False),
    ),
    # Google-only, RFC 9309 silent: the rest of an overlong line is ignored (ours cuts a
    # little earlier, crawler.robots.groups.MAX_LINE: the same verdicts).
    *_cases(
        _g("GoogleOnly_LineTooLong"),
        f"user-agent: FooBot\ndisallow: {LONG_DISALLOW}/qux\n",
        ("FooBot", f"{FOO}/fux", True),
        ("FooBot", f"{FOO}{LONG_DISALLOW}/fux", False),
    ),
    *_cases(
        _g("GoogleOnly_LineTooLong"),
        f"user-agent: FooBot\ndisallow: /\nallow: {LONG_ALLOW_A}/qux\nallow: {LONG_ALLOW_B}/qux\n",
        ("FooBot", f"{FOO}/", False),
        ("FooBot", f"{FOO}{LONG_ALLOW_A}/qux", True),
        ("FooBot", f"{FOO}{LONG_ALLOW_B}/fux", True),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
        ("FooBot", f"{FOO}/bar", False),
        ("FooBot", f"{FOO}/fish", True),
        ("FooBot", f"{FOO}/fish.html", True),
        ("FooBot", f"{FOO}/fish/salmon.html", True),
        ("FooBot", f"{FOO}/fishheads", True),
        ("FooBot", f"{FOO}/fishheads/yummy.html", True),
        ("FooBot", f"{FOO}/fish.html?id=anything", True),
        ("FooBot", f"{FOO}/Fish.asp", False),
        ("FooBot", f"{FOO}/catfish", False),
        ("FooBot", f"{FOO}/?id=fish", False),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
        ("FooBot", f"{FOO}/bar", False),
        ("FooBot", f"{FOO}/fish", True),
        ("FooBot", f"{FOO}/fish.html", True),
        ("FooBot", f"{FOO}/fish/salmon.html", True),
        ("FooBot", f"{FOO}/fishheads", True),
        ("FooBot", f"{FOO}/fishheads/yummy.html", True),
        ("FooBot", f"{FOO}/fish.html?id=anything", True),
        ("FooBot", f"{FOO}/Fish.bar", False),
        ("FooBot", f"{FOO}/catfish", False),
        ("FooBot", f"{FOO}/?id=fish", False),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
        ("FooBot", f"{FOO}/bar", False),
        ("FooBot", f"{FOO}/fish/", True),
        ("FooBot", f"{FOO}/fish/salmon", True),
        ("FooBot", f"{FOO}/fish/?salmon", True),
        ("FooBot", f"{FOO}/fish/salmon.html", True),
        ("FooBot", f"{FOO}/fish/?id=anything", True),
        ("FooBot", f"{FOO}/fish", False),
        ("FooBot", f"{FOO}/fish.html", False),
        ("FooBot", f"{FOO}/Fish/Salmon.html", False),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
        ("FooBot", f"{FOO}/bar", False),
        ("FooBot", f"{FOO}/filename.php", True),
        ("FooBot", f"{FOO}/folder/filename.php", True),
        ("FooBot", f"{FOO}/folder/filename.php?parameters", True),
        ("FooBot", f"{FOO}//folder/any.php.file.html", True),
        ("FooBot", f"{FOO}/filename.php/", True),
        ("FooBot", f"{FOO}/index?f=filename.php/", True),
        ("FooBot", f"{FOO}/php/", False),
        ("FooBot", f"{FOO}/index?php", False),
        ("FooBot", f"{FOO}/windows.PHP", False),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
        ("FooBot", f"{FOO}/bar", False),
        ("FooBot", f"{FOO}/filename.php", True),
        ("FooBot", f"{FOO}/folder/filename.php", True),
        ("FooBot", f"{FOO}/filename.php?parameters", False),
        ("FooBot", f"{FOO}/filename.php/", False),
        ("FooBot", f"{FOO}/filename.php5", False),
        ("FooBot", f"{FOO}/php/", False),
        ("FooBot", f"{FOO}/filename?php", False),
        ("FooBot", f"{FOO}/aaaphpaaa", False),
        ("FooBot", f"{FOO}//windows.PHP", False),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
        ("FooBot", f"{FOO}/bar", False),
        ("FooBot", f"{FOO}/fish.php", True),
        ("FooBot", f"{FOO}/fishheads/catfish.php?parameters", True),
        ("FooBot", f"{FOO}/Fish.PHP", False),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\nallow: /p\ndisallow: /\n",
        ("FooBot", "http://example.com/page", True),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
        ("FooBot", "http://example.com/folder/page", True),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
        ("FooBot", "http://example.com/page.htm", False),
    ),
    # TestMaybeEscapePattern: a rule's non-ASCII is percent-encoded, its escapes upper-cased
    *_cases(
        _g("TestMaybeEscapePattern"),
        "user-agent: FooBot\ndisallow: /\u00e1\ndisallow: /%aa\n",
        ("FooBot", f"{FOO}/%C3%A1", False),
        ("FooBot", f"{FOO}/%AA", False),
        ("FooBot", f"{FOO}/a", True),
    ),
    *_cases(
        _g("GoogleOnly_DocumentationChecks"),
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        ("FooBot", "http://example.com/", True),
        ("FooBot", "http://example.com/page.html", False),
    ),
]

# The parse-only tests, as the verdicts they imply: every line ending, with or without a final
# one, reads the same four records (bar's Disallow is the last line).
LINE_ENDINGS = {
    "unix": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
    "dos": "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
    "mac": "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
    "no final newline": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
    "mixed": "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\n\nDisallow: /",
}
# A byte-order mark, whole or partial, is skipped; a broken one makes the first line garbage;
# one in the middle of the file makes its line garbage.
BOM_BODIES = {
    "full": (b"\xef\xbb\xbfUser-Agent: foo\nAllow: /AnyValue\n", True),
    "partial 2": (b"\xef\xbbUser-Agent: foo\nAllow: /AnyValue\n", True),
    "partial 1": (b"\xefUser-Agent: foo\nAllow: /AnyValue\n", True),
}
PARSE_CASES = [
    *[
        case
        for body in LINE_ENDINGS.values()
        for case in _cases(
            _g("ID_LinesNumbersAreCountedCorrectly"),
            body,
            ("foo", f"{FOO}/some/path", True),
            ("bar", f"{FOO}/some/path", False),
        )
    ],
    # "Disallow: /" makes the group's Allow line the one that tells a read record from a lost one
    *[
        case
        for body, _ in BOM_BODIES.values()
        for case in _cases(
            _g("ID_UTF8ByteOrderMarkIsSkipped"),
            body.replace(b"Allow: /AnyValue\n", b"Disallow: /\nAllow: /AnyValue\n"),
            ("foo", f"{FOO}/AnyValue", True),
            ("foo", f"{FOO}/other", False),
        )
    ],
    # A broken mark: Google reads "\x11\xbfUser-Agent" as an unknown field; ours drops the stray
    # bytes around a field name (crawler.robots.groups), so the group still names foo.
    *_cases(
        _g("ID_UTF8ByteOrderMarkIsSkipped"),
        b"\xef\x11\xbfUser-Agent: foo\nDisallow: /\n",
        ("foo", f"{FOO}/x", False, "our reading is lenient: stray bytes by a field name"),
    ),
    # A mark mid-file: Google loses that line. Ours keeps it (the same leniency).
    *_cases(
        _g("ID_UTF8ByteOrderMarkIsSkipped"),
        b"User-Agent: foo\n\xef\xbb\xbfDisallow: /\n",
        ("foo", f"{FOO}/x", False, "our reading is lenient: stray bytes by a field name"),
    ),
]

# --- crawler-commons SimpleRobotRulesParserTest.java -------------------------------------------

HTML_ROBOTS = (
    '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN"><HTML>\n<HEAD>\n'
    "<TITLE>/robots.txt</TITLE>\n</HEAD>\n<BODY>\nUser-agent: anybot<BR>\nDisallow: <BR>\n"
    "Crawl-Delay: 10<BR>\n\nUser-agent: *<BR>\nDisallow: /<BR>\nCrawl-Delay: 30<BR>\n\n"
    "</BODY>\n</HTML>\n"
)
HERITRIX = (
    "User-agent: *\nDisallow: /cgi-bin/\nDisallow: /details/software\n\nUser-agent: denybot\n"
    "Disallow: /\n\nUser-agent: allowbot1\nDisallow: \n\nUser-agent: allowbot2\n"
    "Disallow: /foo\nAllow: /\n\nUser-agent: delaybot\nDisallow: /\nCrawl-Delay: 20\n"
    "Allow: /images/\n"
)
# The resource files robots-with-utf*-bom.txt: a "*" group disallowing /profile, saved with a
# byte-order mark (their rules as the test reads them, not their exact text).
BOM_TEXT = "User-agent: *\r\nDisallow: /profile\r\n"

COMMONS_CASES = [
    *_cases(
        _c("testHtmlMarkupInRobotsTxt"),
        HTML_ROBOTS,
        ("anybot", "http://www.domain.com/index.html", True),
        ("bogusbot", "http://www.domain.com/index.html", False),
    ),
    *_cases(
        _c("testIgnoreOfHtml"),
        "<HTML><HEAD><TITLE>Site under Maintenance</TITLE></HTML>",
        ("anybot", "http://www.domain.com/", True),
    ),
    *_cases(
        _c("testRobotsWithUTF8BOM"),
        b"\xef\xbb\xbf" + BOM_TEXT.encode(),
        ("foobot", "http://www.domain.com/profile", False),
    ),
    *_cases(
        _c("testRobotsWithUTF16LEBOM"),
        b"\xff\xfe" + BOM_TEXT.encode("utf-16-le"),
        ("foobot", "http://www.domain.com/profile", False),
    ),
    *_cases(
        _c("testRobotsWithUTF16BEBOM"),
        b"\xfe\xff" + BOM_TEXT.encode("utf-16-be"),
        ("foobot", "http://www.domain.com/profile", False),
    ),
    *_cases(
        _c("testBrokenKrugleRobotsTxtFile"),
        "User-agent: *\rDisallow: /maintenance.html\rDisallow: /perl/\rDisallow: /cgi-bin/\r"
        "Disallow: /examples/\rCrawl-delay: 3\r\rUser-agent: googlebot\rCrawl-delay: 1\r\r"
        "User-agent: qihoobot\rDisallow: /",
        # crawler-commons ends googlebot's group at its Crawl-delay; RFC 9309 2.2.4 (and
        # Google's ID_LineSyntax_Groups_OtherRules) does not let another record end a group,
        # so googlebot shares qihoobot's "Disallow: /"
        (
            "googlebot/2.1",
            "http://www.krugle.com/examples/index.html",
            False,
            "RFC 9309 2.2.4: a Crawl-delay does not end a group",
        ),
    ),
]

VERDICTS = GOOGLE_CASES + PARSE_CASES + COMMONS_CASES


@pytest.mark.parametrize(
    "case", VERDICTS, ids=[f"{c.source.rsplit(' ', 1)[-1]}-{i}" for i, c in enumerate(VERDICTS)]
)
def test_verdict(case: Case) -> None:
    assert _rules(case.body, case.agent).allowed(case.url) is case.allowed, case


# --- IsValidUserAgentToObey: a name robots.txt can call the crawler by ---------------------------

# Our equivalent: ROBOTSTXT_USER_AGENT, "the product token", must be one: a value robots.txt
# cannot write as a group's name (empty, a space, a version, a wildcard, non-ASCII) is refused
# before a crawl. Digits and dots are tokens here (MJ12bot, Mail.RU_Bot: issue 29), where RFC
# 9309 2.2.1's grammar and Google allow letters, "_" and "-" only; no Google case has one.
VALID_TOKENS = [
    ("Foobot", True),
    ("Foobot-Bar", True),
    ("Foo_Bar", True),
    ("", False),  # absl::string_view(): C++'s null view is the empty string
    ("", False),
    ("ツ", False),
    ("Foobot*", False),
    (" Foobot ", False),
    ("Foobot/2.1", False),
    ("Foobot Bar", False),
    ("MJ12bot", True),  # ours, not Google's: a token with digits (issue 29)
    ("Mail.RU_Bot", True),  # ours: with a dot
]


@pytest.mark.parametrize(("name", "valid"), VALID_TOKENS)
def test_a_name_robots_txt_can_call_the_crawler_by(name: str, valid: bool) -> None:
    """``GoogleOnly_AcceptUserAgentUpToFirstSpace`` and ``ID_VerifyValidUserAgentsToObey``."""
    problem = agent_problem("crawler-bot/1.0", name)
    assert (problem is None) is valid, problem


# --- crawl-delay and sitemaps -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "body", "agent", "delay"),
    [
        (_c("testHtmlMarkupInRobotsTxt"), HTML_ROBOTS, "anybot", 10.0),
        (_c("testHtmlMarkupInRobotsTxt"), HTML_ROBOTS, "bogusbot", 30.0),
        (_c("testHeritrixCases"), HERITRIX, "denybot", None),
        # crawler-commons' name is "Mozilla delaybot 99.9", a list of names it matches one by
        # one; ours is a User-Agent, whose first product names the crawler (RFC 9309 2.2.1)
        (_c("testHeritrixCases"), HERITRIX, "delaybot", 20.0),
        (
            _c("testCrawlDelay"),
            "User-agent: bixo\rCrawl-delay: 10\rUser-agent: foobot\rCrawl-delay: 20\r"
            "User-agent: *\rDisallow:/baz\r",
            "bixo",
            10.0,
        ),
        (
            _c("testCrawlDelay"),
            "User-agent: foobot\rCrawl-delay: 20\rUser-agent: *\rDisallow:/baz\r",
            "bixo",
            None,
        ),
        (
            _c("testFloatingPointCrawlDelay"),
            "User-agent: *\rCrawl-delay: 0.5\rDisallow:\r",
            "bixo",
            0.5,
        ),
        # crawler-commons disallows everything for a huge delay; ours reports it, and the
        # frontier skips a host asking for more than FRONTIER_MAX_CRAWL_DELAY (host_skipped)
        (_c("testBigCrawlDelay"), "User-agent: *\rCrawl-delay: 3600\rDisallow:\r", "bixo", 3600.0),
        (
            _c("testDOSlineEndings"),
            "User-agent: *\r\nCrawl-delay: 1\r\nDisallow: /private/\r\n",
            "bot1",
            1.0,
        ),
    ],
)
def test_crawl_delay(source: str, body: str, agent: str, delay: float | None) -> None:
    assert _rules(body, agent).crawl_delay() == delay


SITEMAP_LOC = "http://foo.bar/sitemap.xml"


@pytest.mark.parametrize(
    ("source", "body", "sitemaps"),
    [
        (
            _g("ID_NonStandardLineExample_Sitemap"),
            f"User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nSitemap: {SITEMAP_LOC}\n",
            [SITEMAP_LOC],
        ),
        (
            _g("ID_NonStandardLineExample_Sitemap"),
            f"Sitemap: {SITEMAP_LOC}\nUser-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n",
            [SITEMAP_LOC],
        ),
        (
            _c("testSitemapAtEndOfFile"),
            "User-agent: a\r\nDisallow: /content/dam/\r\n\r\nUser-agent: b\r\n"
            "Disallow: /content/dam/\r\n\r\nUser-agent: c\r\nDisallow: /content/dam/\r\n\r\n\r\n"
            "Sitemap: https://wwwfoocom/sitemapxml",
            ["https://wwwfoocom/sitemapxml"],
        ),
        # testRelativeSitemap: a relative location is resolved against the robots.txt origin
        (
            _c("testRelativeSitemap"),
            "User-agent: *\nDisallow:\nSitemap: /sitemap.xml\n",
            ["http://foo.bar/sitemap.xml"],
        ),
        # testSitemap: a location's case is kept
        (
            _c("testSitemap"),
            "Sitemap: http://foo.bar/Sitemap-A.xml\nsitemap: http://foo.bar/b.xml\n",
            ["http://foo.bar/Sitemap-A.xml", "http://foo.bar/b.xml"],
        ),
    ],
)
def test_sitemaps(source: str, body: str, sitemaps: list[str]) -> None:
    assert _rules(body, "foo").sitemaps() == sitemaps


# --- the token as a caller passes it --------------------------------------------------------------


@pytest.mark.parametrize("token", ["FooBot", "foobot", "FOOBOT", "FooBot/2.1"])
def test_rules_match_the_token_whatever_its_case(token: str) -> None:
    """Google's matcher takes the name as given and compares it case-insensitively
    (ID_UserAgentValueCaseInsensitive); :class:`RobotsRules` takes any spelling of the product
    token too, not only the lower-case one :func:`crawler_token` makes."""
    record = RobotsRecord(FOO, RULES, 200, 0.0, 100.0, FOOBOT_DENIED + "user-agent: *\nallow: /\n")
    assert not RobotsRules(record, token).allowed(f"{FOO}/x/y")
