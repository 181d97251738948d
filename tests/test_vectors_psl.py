"""The Public Suffix List's own test vectors, run through our registered-domain lookup
(``crawler.frontier.urls.registered_domain_function``).

Source: publicsuffix/list, ``tests/test_psl.txt`` (public domain, CC0), at commit
ffcfa83eb34cfbb25bfa24a486b8bd51aa180dcb: each ``checkPublicSuffix('a.b.example.com',
'example.com');`` line is one ``(host, registrable domain)`` pair below, ``None`` for the
file's ``null`` (no registrable domain). The file's commented-out ``.local`` lines and its
``checkPublicSuffix(null, null)`` (no host at all) are left out.

The vectors hold for the full list (``private=True``, the "same site" lookup), with what
differs by design (:data:`DIFFERS`):

- ``null``: the lookup always answers a string: for a host with no registrable domain (a
  public suffix itself, a bare unlisted TLD) it is the host itself, which no registrable
  domain of another host equals, so "same site" comparisons stay right;
- case: the crawl's hosts are lower-case (``url_forms``); a mixed-case host is read as
  tldextract reads it, its case kept ("example.COM"): compared lower-cased here;
- a leading dot (an invalid host, ``null`` in the file): the empty label is no public suffix,
  so the walk stops short of it, as tldextract's does; no URL the crawl takes has such a host;
- IDN: the crawl's hosts are punycode (``xn--``); the Unicode vectors, read as tldextract
  reads them, hold too.

The ICANN-only lookup (``private=False``, the host splitter) differs further, on purpose: the
list's private rules do not count ("example.uk.com" -> "uk.com": uk.com is a private rule),
and a name under no listed suffix gives its last label ("example.example" -> "example"), where
the list's implicit ``*`` rule gives two (see :data:`ICANN_ONLY_DIFFERS`).

(A later stored copy of the file, at 5daa4c735c34, gives "kobe.jp" for city.kobe.jp; every
other copy, and the list's algorithm for its ``!city.kobe.jp`` exception, give
"city.kobe.jp": the commit above is the one used.)
"""

from __future__ import annotations

import pkgutil

import pytest
from tldextract.suffix_list import extract_tlds_from_suffix_list

from crawler.frontier.urls import registered_domain_function

VECTORS: list[tuple[str, str | None]] = [
    # Mixed case.
    ("COM", None),
    ("example.COM", "example.com"),
    ("WwW.example.COM", "example.com"),
    # Leading dot.
    (".com", None),
    (".example", None),
    (".example.com", None),
    (".example.example", None),
    # Unlisted TLD.
    ("example", None),
    ("example.example", "example.example"),
    ("b.example.example", "example.example"),
    ("a.b.example.example", "example.example"),
    # TLD with only 1 rule.
    ("biz", None),
    ("domain.biz", "domain.biz"),
    ("b.domain.biz", "domain.biz"),
    ("a.b.domain.biz", "domain.biz"),
    # TLD with some 2-level rules.
    ("com", None),
    ("example.com", "example.com"),
    ("b.example.com", "example.com"),
    ("a.b.example.com", "example.com"),
    ("uk.com", None),
    ("example.uk.com", "example.uk.com"),
    ("b.example.uk.com", "example.uk.com"),
    ("a.b.example.uk.com", "example.uk.com"),
    ("test.ac", "test.ac"),
    # TLD with only 1 (wildcard) rule.
    ("mm", None),
    ("c.mm", None),
    ("b.c.mm", "b.c.mm"),
    ("a.b.c.mm", "b.c.mm"),
    # More complex TLD.
    ("jp", None),
    ("test.jp", "test.jp"),
    ("www.test.jp", "test.jp"),
    ("ac.jp", None),
    ("test.ac.jp", "test.ac.jp"),
    ("www.test.ac.jp", "test.ac.jp"),
    ("kyoto.jp", None),
    ("test.kyoto.jp", "test.kyoto.jp"),
    ("ide.kyoto.jp", None),
    ("b.ide.kyoto.jp", "b.ide.kyoto.jp"),
    ("a.b.ide.kyoto.jp", "b.ide.kyoto.jp"),
    ("c.kobe.jp", None),
    ("b.c.kobe.jp", "b.c.kobe.jp"),
    ("a.b.c.kobe.jp", "b.c.kobe.jp"),
    ("city.kobe.jp", "city.kobe.jp"),  # !city.kobe.jp: kobe.jp is its public suffix
    ("www.city.kobe.jp", "city.kobe.jp"),
    # TLD with a wildcard rule and exceptions.
    ("ck", None),
    ("test.ck", None),
    ("b.test.ck", "b.test.ck"),
    ("a.b.test.ck", "b.test.ck"),
    ("www.ck", "www.ck"),
    ("www.www.ck", "www.ck"),
    # US K12.
    ("us", None),
    ("test.us", "test.us"),
    ("www.test.us", "test.us"),
    ("ak.us", None),
    ("test.ak.us", "test.ak.us"),
    ("www.test.ak.us", "test.ak.us"),
    ("k12.ak.us", None),
    ("test.k12.ak.us", "test.k12.ak.us"),
    ("www.test.k12.ak.us", "test.k12.ak.us"),
    # IDN labels.
    ("食狮.com.cn", "食狮.com.cn"),
    ("食狮.公司.cn", "食狮.公司.cn"),
    ("www.食狮.公司.cn", "食狮.公司.cn"),
    ("shishi.公司.cn", "shishi.公司.cn"),
    ("公司.cn", None),
    ("食狮.中国", "食狮.中国"),
    ("www.食狮.中国", "食狮.中国"),
    ("shishi.中国", "shishi.中国"),
    ("中国", None),
    # Same as above, but punycoded.
    ("xn--85x722f.com.cn", "xn--85x722f.com.cn"),
    ("xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),
    ("www.xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),
    ("shishi.xn--55qx5d.cn", "shishi.xn--55qx5d.cn"),
    ("xn--55qx5d.cn", None),
    ("xn--85x722f.xn--fiqs8s", "xn--85x722f.xn--fiqs8s"),
    ("www.xn--85x722f.xn--fiqs8s", "xn--85x722f.xn--fiqs8s"),
    ("shishi.xn--fiqs8s", "shishi.xn--fiqs8s"),
    ("xn--fiqs8s", None),
]

# What the full-list lookup answers where the file says otherwise, and why.
DIFFERS: dict[str, str] = {
    # A leading dot: an empty first label, left out as tldextract leaves it; the file calls
    # the host invalid (null). A URL's host never starts with a dot.
    ".example": "example",
    ".example.com": "example.com",
    ".example.example": "example.example",
}

# Where the ICANN-only lookup (the splitter's) differs from the full list on these vectors:
# uk.com is a rule of the list's private section (so the vectors count private rules), and a
# name under no listed suffix keeps its last label only (no implicit "*" rule).
ICANN_ONLY_DIFFERS: dict[str, str] = {
    "example.uk.com": "uk.com",
    "b.example.uk.com": "uk.com",
    "a.b.example.uk.com": "uk.com",
    ".example.example": "example",
    "example.example": "example",
    "b.example.example": "example",
    "a.b.example.example": "example",
}


def expected(host: str, domain: str | None) -> str:
    """The file's answer in our terms: ``null`` is the host itself (lower-cased)."""
    return (domain if domain is not None else host).lower()


@pytest.mark.parametrize(("host", "domain"), VECTORS)
def test_the_full_list_lookup_gives_the_lists_registrable_domain(
    host: str, domain: str | None
) -> None:
    domain_of = registered_domain_function(private=True)
    want = DIFFERS.get(host, expected(host, domain))
    assert domain_of(host).lower() == want


@pytest.mark.parametrize(("host", "domain"), VECTORS)
def test_the_icann_only_lookup_differs_on_private_rules_and_unlisted_tlds(
    host: str, domain: str | None
) -> None:
    domain_of = registered_domain_function()
    want = ICANN_ONLY_DIFFERS.get(host) or DIFFERS.get(host) or expected(host, domain)
    assert domain_of(host).lower() == want


def test_a_null_answer_equals_no_registrable_domain_of_another_host() -> None:
    """The file's ``null`` is the host itself here: never another host's site."""
    domain_of = registered_domain_function(private=True)
    nulls = {h for h, d in VECTORS if d is None and h not in DIFFERS}
    sites = {domain_of(h).lower() for h, d in VECTORS if d is not None}
    assert not {domain_of(h).lower() for h in nulls} & sites


@pytest.mark.parametrize(
    ("host", "site"),
    [
        ("alice.github.io", "alice.github.io"),
        ("www.alice.github.io", "alice.github.io"),
        ("foo.blogspot.com", "foo.blogspot.com"),
        ("github.io", "github.io"),
        ("www.site1.test", "site1.test"),
    ],
)
def test_private_rules_count_in_the_full_list_lookup(host: str, site: str) -> None:
    """The list's private section (github.io, blogspot.com) and its implicit ``*`` rule:
    what browsers and cookies read as one site."""
    assert registered_domain_function(private=True)(host) == site


def psl_suffix(host: str, rules: set[str]) -> int | None:
    """The list's own algorithm (publicsuffix.org/list, "Algorithm"), written out plainly as a
    reference: of the rules that match (``*`` any one label; the list writes a wildcard only
    leftmost), an exception rule prevails (less its leftmost label), else the one with the
    most labels. The public suffix's number of labels; None when no rule matches (the
    implicit ``*`` rule: one label)."""
    labels = host.split(".")
    matching = []
    for i in range(len(labels)):
        name, rest = ".".join(labels[i:]), ".".join(labels[i + 1:])
        if "!" + name in rules:
            return name.count(".")  # an exception: its labels less the leftmost
        if name in rules or (rest and "*." + rest in rules):
            matching.append(len(labels) - i)
    return max(matching, default=None)


def psl_registrable(host: str, rules: set[str]) -> str | None:
    """The registrable domain by :func:`psl_suffix` (the implicit ``*`` where no rule
    matches): the public suffix and one more label; None when there is none."""
    size = psl_suffix(host, rules) or 1
    labels = host.split(".")
    return ".".join(labels[-size - 1:]) if len(labels) > size else None


def snapshot_rules() -> tuple[list[str], list[str]]:
    text = (pkgutil.get_data("tldextract", ".tld_set_snapshot") or b"").decode("utf-8")
    public, private = extract_tlds_from_suffix_list(text)
    assert all("*" not in rule.partition(".")[2] for rule in public + private)  # (psl_suffix)
    return public, private


def hosts_under_every_rule(rules: set[str]) -> set[str]:
    """Every rule's name (its ``*`` a label), each of its suffixes, and one and two labels
    more: a suffix a wildcard makes public that is also on the way to a longer rule
    ("svc.firenet.ch": ``*.firenet.ch``, and ``*.svc.firenet.ch``) among them."""
    hosts = set()
    for rule in rules:
        labels = rule.lstrip("!").replace("*", "wild").split(".")
        for i in range(len(labels)):
            name = ".".join(labels[i:])
            hosts.update({name, f"x.{name}", f"y.x.{name}"})
    return hosts


def test_the_reference_algorithm_gives_the_files_vectors() -> None:
    """:func:`psl_registrable` over the bundled snapshot answers the file's vectors (those in
    the list's own form: lower-case, Unicode, no leading dot)."""
    public, private = snapshot_rules()
    rules = set(public + private)
    vectors = [(h, d) for h, d in VECTORS if h == h.lower() and "xn--" not in h and h[0] != "."]
    assert [psl_registrable(h, rules) for h, _ in vectors] == [d for _, d in vectors]
    assert len(vectors) > 50


def test_the_full_list_lookup_answers_as_the_lists_algorithm_under_every_rule() -> None:
    """Not only tldextract's answer: the list's algorithm itself, on the bundled snapshot (a
    wildcard rule counts for a label that also leads on to a longer rule)."""
    public, private = snapshot_rules()
    rules = set(public + private)
    domain_of = registered_domain_function(private=True)
    hosts = hosts_under_every_rule(rules)
    wrong = {h: (domain_of(h), want) for h in hosts
             if domain_of(h) != (want := psl_registrable(h, rules) or h)}
    assert not wrong, sorted(wrong.items())[:20]
    assert len(hosts) > 30_000


def test_the_icann_only_lookup_answers_as_the_lists_algorithm_over_its_rules() -> None:
    """The ICANN rules alone, the same algorithm, but for a name no rule matches: its last
    label (no implicit ``*`` rule; :data:`ICANN_ONLY_DIFFERS`)."""
    public, _ = snapshot_rules()
    rules = set(public)
    domain_of = registered_domain_function()
    wrong = {}
    for host in hosts_under_every_rule(rules):
        matched = psl_suffix(host, rules) is not None
        want = (psl_registrable(host, rules) or host) if matched else host.rpartition(".")[2]
        if domain_of(host) != want:
            wrong[host] = (domain_of(host), want)
    assert not wrong, sorted(wrong.items())[:20]
