"""URL normalization, scope, filters and trap defenses."""

from __future__ import annotations

import random

import pytest

from crawler.frontier import InvalidUrl, UrlPolicy, normalize_url
from crawler.frontier.urls import link_problem, url_problem


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
    url = "http://a.test/docs/x"
    assert p.check(url, depth=2) == ("", url, "a.test", url)
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
        ("http://", "has no host"),
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


def _frontier_verdict(url: str) -> str | None:
    try:
        normalize_url(url)
    except InvalidUrl as exc:
        return exc.reason
    return None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://a.example/x?y#z", None),
        ("HTTP://A.EXAMPLE:8080/", None),
        ("http://user:pw@a.example/", None),
        ("http://[::1]:8080/", None),
        ("http://münchen.example/", None),  # IDNA
        ("http://a\\b.example/", None),  # "\" ends the host: http://a/b.example/
        ("http:\\\\a.example", None),
        ("mailto:x@a.example", "scheme"),
        ("javascript:void(0)", "scheme"),
        ("ftp://a.example/", "scheme"),
        ("http://", "invalid_url"),
        ("http://exa mple.com/", "invalid_url"),
        ("http://a!b.example/", "invalid_url"),
        ("http://a.example:99999/", "invalid_url"),
        ("http://a.example:port/", "invalid_url"),
        ("http://[::1/", "invalid_url"),
    ],
)
def test_link_problem_is_the_frontiers_verdict(url: str, problem: str | None) -> None:
    """The spider's per-link check (no normalization) says what normalize_url would."""
    assert link_problem(url) == problem == _frontier_verdict(url)


def test_link_problem_agrees_with_normalize_url_on_odd_urls() -> None:
    rnd = random.Random(7)
    alphabets = ["aB.-_:/@%?#[]\\ 19;=&+$!'()*,~", "aé.ü:/@%20[]\\xn-", "a.\x00\x7f\n\t <>^|{}`\"/"]
    urls = [
        prefix + "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 16)))
        for alphabet in alphabets
        for _ in range(1500)
        for prefix in ("http://", "HTTPS://", "http:", "http:\\\\")
    ]
    differ = [u for u in urls if link_problem(u) != _frontier_verdict(u)]
    assert differ == []


def test_the_trap_budgets_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broad crawl's worker meets millions of paths and hosts: past the bounds, paths with a
    single variant are forgotten (a path that used several keeps its count) and the host
    budget starts a new generation; nothing grows without bound."""
    import crawler.frontier.urls as urls

    monkeypatch.setattr(urls, "MAX_VARIANT_PATHS", 100)
    monkeypatch.setattr(urls, "MAX_BUDGET_HOSTS", 100)
    policy = UrlPolicy(any_host=True, max_query_variants=3, max_hosts_per_domain=2)
    trap = [f"https://t.example/cal?d={i}" for i in range(5)]
    assert [policy.check(u)[0] for u in trap] == ["", "", "", "query_variants", "query_variants"]
    for i in range(1000):
        assert policy.check(f"https://h{i}.example{i}.com/p?q=1")[0] == ""
        assert len(policy._variants) <= 100 and len(policy._known_hosts) <= 100
    assert policy.check(trap[4])[0] == "query_variants"  # the trap's count was kept
    sub = [f"https://s{i}.generated.com/" for i in range(3)]
    assert [policy.check(u)[0] for u in sub] == ["", "", "domain_hosts"]
