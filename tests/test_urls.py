"""URL normalization, scope, filters and trap defenses."""

from __future__ import annotations

import pytest

from crawler.frontier import InvalidUrl, UrlPolicy, normalize_url
from crawler.frontier.urls import url_problem


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("HTTP://Example.COM:80/a/../b/./c?b=2&a=1#frag", "http://example.com/b/c?a=1&b=2"),
        ("https://x.test:443", "https://x.test/"),
        ("http://127.0.0.2:8080/p/../p/1.html", "http://127.0.0.2:8080/p/1.html"),
        ("http://a.test/%7Euser/ü", "http://a.test/~user/%C3%BC"),
        ("  http://a.test/  ", "http://a.test/"),
    ],
)
def test_normalize(raw, normalized):
    assert normalize_url(raw)[0] == normalized


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("http://[::1", "invalid_url"),
        ("http://exa mple.com/", "invalid_url"),
        ("http:///nohost", "invalid_url"),
        ("http://a.test:99999/", "invalid_url"),
        ("javascript:void(0)", "scheme"),
        ("mailto:a@b.test", "scheme"),
        ("ftp://a.test/f", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("data:text/plain,hi", "scheme"),
        ("", "scheme"),
        ("not a url", "scheme"),
    ],
)
def test_invalid(raw, reason):
    with pytest.raises(InvalidUrl) as info:
        normalize_url(raw)
    assert info.value.reason == reason


def test_scope_hosts_domains_and_added_hosts():
    p = UrlPolicy(hosts=["a.test"], domains=["b.test"])
    assert p.check("http://a.test/x")[0] == ""
    assert p.check("http://sub.a.test/x")[0] == "out_of_scope"
    assert p.check("http://deep.sub.b.test/x")[0] == ""
    assert p.check("http://b.test/x")[0] == ""
    assert p.check("http://notb.test/x")[0] == "out_of_scope"
    p.add_host("www.a.test")
    assert p.check("http://www.a.test/")[0] == ""


def test_filters_and_traps():
    p = UrlPolicy(
        any_host=True,
        allow=[r"/docs/"],
        deny=[r"/docs/private/"],
        max_depth=2,
        max_url_length=60,
        max_repeated_segments=2,
    )
    assert p.check("http://a.test/docs/x", depth=2) == ("", "http://a.test/docs/x", "a.test")
    assert p.check("http://a.test/docs/x", depth=3)[0] == "too_deep"
    assert p.check("http://a.test/blog/x")[0] == "not_allowed"
    assert p.check("http://a.test/docs/private/x")[0] == "denied"
    assert p.check("http://a.test/docs/" + "x" * 60)[0] == "too_long"
    assert p.check("http://a.test/docs/a/a/b/a")[0] == "repeated_segments"
    assert p.check("http://a.test/docs/a/a/b")[0] == ""


def test_without_filters_only_the_url_itself_is_checked():
    p = UrlPolicy(hosts=["a.test"], deny=["robots"], max_depth=0)
    assert p.check("http://b.test/robots.txt", depth=5, filters=False)[0] == ""
    assert p.check("ftp://b.test/robots.txt", filters=False)[0] == "scheme"


def test_credentials_in_links_are_dropped():
    assert normalize_url("http://user:pw@a.test:80/x") == ("http://a.test/x", "a.test")
    assert normalize_url("https://u@a.test:8443/y")[0] == "https://a.test:8443/y"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("http://a.test/x y", None),  # normalize_url takes it (percent-encoded), so we do too
        ("ftp://a.test/", "must be an http:// or https:// URL"),
        ("a.test", "must be an http:// or https:// URL"),
        ("http://[::1", "cannot be parsed as a URL"),
        ("http://a.test:99999/", "cannot be parsed as a URL"),
        ("http:///nohost", "has no host"),
        ("http://exa mple.com/", "has an invalid host"),
    ],
)
def test_url_problem_words_normalize_urls_verdict(raw: str, problem: str | None) -> None:
    words = url_problem(raw)
    assert (words is None) == (problem is None)
    if problem is not None:
        assert words is not None and words.startswith(problem)
        with pytest.raises(InvalidUrl):
            normalize_url(raw)
