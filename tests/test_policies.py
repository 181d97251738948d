"""Crawl policies (crawler/frontier/policies.py): inheritance down the tree of pages, leaving a
domain, depth under a policy, distrusted and trusted domains, content rules, the rule for a URL
found under several policies, site-config validation naming file and key, and distrust on a
web graph with link farms (the frontier driven directly, no network)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy
from crawler.frontier.opic import CashLedger, selector_weights
from crawler.frontier.policies import (
    CrawlPolicy,
    PolicyBook,
    PolicyError,
    book_from_config,
    read_domains,
    split_label,
)
from crawler.sites import SiteConfigError, load_site_config
from crawler.sites.seeds import iter_seed_lines
from devsite.webgraph import build_webgraph


def book(**policies: dict) -> PolicyBook:
    return book_from_config(policies)


def test_links_inherit_the_policy_of_the_page_that_found_them() -> None:
    b = book(favor={"multiplier": 4.0, "dampening": 0.5})
    seed = b.seed("a.test", "favor")
    assert split_label(seed.label) == ("favor", 0) and seed.factor == 4.0
    child = b.link(seed.label, "a.test", 1, "http://a.test/x", "a.test")
    assert child is not None and split_label(child.label)[0] == "favor"
    assert child.factor == pytest.approx(0.5 * 4.0)  # dampened per hop, then multiplied
    grandchild = b.link(child.label, "a.test", 2, "http://b.test/", "b.test")  # inherit
    assert grandchild is not None and split_label(grandchild.label)[0] == "favor"
    assert b.counts["favor"] == 2


def test_leaving_the_registered_domain() -> None:
    b = book_from_config(
        {
            "stay": {"on_leave": "drop"},
            "reset": {"on_leave": "default", "multiplier": 3.0},
            "picky": {"on_leave": "trusted"},
        },
        domain_of=lambda host: ".".join(host.split(".")[-2:]),
    )
    b.trusted = frozenset({"good.test"})
    assert b.link("stay", "a.x.test", 1, "http://b.x.test/", "b.x.test") is not None  # same domain
    assert b.link("stay", "a.x.test", 1, "http://y.test/", "y.test") is None
    reset = b.link("reset", "x.test", 1, "http://y.test/", "y.test")
    assert reset is not None and split_label(reset.label) == ("default", 1)
    assert b.link("picky", "x.test", 1, "http://y.test/", "y.test") is None
    trusted = b.link("picky", "x.test", 1, "http://good.test/", "good.test")
    assert trusted is not None and split_label(trusted.label)[0] == "default"


def test_max_depth_counts_hops_under_the_policy() -> None:
    b = book(shallow={"max_depth": 2}, other={"switch_to": "shallow", "switch_words": ["x"]})
    assert b.link("shallow", "a.test", 2, "http://a.test/2", "a.test") is not None
    assert b.link("shallow", "a.test", 3, "http://a.test/3", "a.test") is None
    # switched at depth 5: hops count from there
    assert b.link("shallow@5", "a.test", 7, "http://a.test/7", "a.test") is not None
    assert b.link("shallow@5", "a.test", 8, "http://a.test/8", "a.test") is None


def test_url_filters_of_a_policy() -> None:
    b = book(docs={"allow": [r"/docs/"], "deny": [r"\.pdf$"]})
    assert b.link("docs", "a.test", 1, "http://a.test/docs/x", "a.test") is not None
    assert b.link("docs", "a.test", 1, "http://a.test/blog/x", "a.test") is None
    assert b.link("docs", "a.test", 1, "http://a.test/docs/x.pdf", "a.test") is None


def test_a_distrusted_domain_takes_the_distrust_policy_whatever_linked_it(tmp_path) -> None:
    listing = tmp_path / "distrusted.txt"
    listing.write_text("# spammers\nspam.test\n\nFarm.TEST.  # trailing comment\n")
    assert read_domains(listing) == {"spam.test", "farm.test"}
    b = book_from_config(
        {"distrust": {"multiplier": 0.001, "dampening": 0.5}}, distrusted_file=listing
    )
    assert split_label(b.seed("spam.test").label)[0] == "distrust"
    assert b.seed("good.test").label == ""  # the default policy
    link = b.link("", "good.test", 1, "http://farm.test/", "farm.test")
    assert link is not None and split_label(link.label)[0] == "distrust"
    assert link.factor == pytest.approx(0.001)
    # pages a distrusted page leads to stay distrusted
    deeper = b.link(link.label, "farm.test", 2, "http://other.test/", "other.test")
    assert deeper is not None and split_label(deeper.label)[0] == "distrust"
    assert deeper.factor == pytest.approx(0.5 * 0.001)


def test_a_content_rule_switches_the_policy() -> None:
    seen: list[tuple[str, str]] = []

    b = book(
        news={"switch_to": "docs", "switch_words": ["Reference Manual"]},
        docs={"switch_to": "news", "switch_selector": "div.blog"},
        hooked={"switch_hook": "tests.test_policies:hook"},
    )
    assert split_label(b.page_policy("news", "u", "the reference manual", depth=3)) == ("docs", 3)
    assert b.page_policy("news", "u", "nothing here") == "news"
    assert b.page_policy("docs", "u", "", select=lambda css: css == "div.blog", depth=2) == "news@2"
    assert b.page_policy("hooked", "http://a.test/", "spam spam", depth=1) == "docs@1"
    assert b.page_policy("", "u", "text") == ""  # the default has no rule
    del seen


def hook(url: str, text: str, policy: str) -> str | None:
    """A content hook for the test above: spam pages switch to docs (any rule will do)."""
    return "docs" if "spam" in text else None


def test_a_url_found_under_several_policies_takes_the_largest_shares_policy() -> None:
    clock = lambda: 0.0  # noqa: E731
    f = MercatorFrontier(
        PolitenessPolicy(min_delay=0, delay_factor=0), clock=clock, back_queues=1,
        ledger=CashLedger(8),
    )
    f.add(Entry("http://busy.test/0", "busy.test", cash=1.0))
    f.add(Entry("http://busy.test/1", "busy.test", cash=1.0))
    lease = f.next()  # busy.test holds the one back queue: the others wait in front queues
    f.add(Entry("http://good.test/", "good.test", cash=0.001, policy="distrust"))
    f.add(Entry("http://good.test/", "good.test", cash=0.2, policy=""))  # a good page links
    f.add(Entry("http://good.test/", "good.test", cash=0.001, policy="distrust"))
    f.finish(lease.token, 0.1)
    got = {}
    while (lease := f.next()) is not None:
        got[lease.entry.url] = lease.entry
        f.finish(lease.token, 0.1)
    assert got["http://good.test/"].policy == ""
    assert got["http://good.test/"].cash == pytest.approx(0.202)


def test_a_seeds_file_line_may_name_a_policy(tmp_path: Path) -> None:
    path = tmp_path / "seeds.txt"
    path.write_text("https://a.test/\nhttps://b.test/ favor  # comment\nnot a url\n")
    assert list(iter_seed_lines(path)) == [
        ("https://a.test/", ""), ("https://b.test/", "favor"), ("not a url", "")
    ]


def _site(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pol.toml"
    path.write_text('name = "pol"\nseeds = ["https://a.test/"]\n' + text)
    return path


def test_a_site_config_with_policies_loads(tmp_path: Path) -> None:
    (tmp_path / "bad-domains.txt").write_text("spam.test\n")
    site = load_site_config(_site(tmp_path, (
        'distrusted_domains = "bad-domains.txt"\n'
        "[policies.favor]\n"
        'seeds = ["https://docs.test/"]\nmultiplier = 4.0\non_leave = "default"\n'
        "[policies.distrust]\nmultiplier = 0.001\ndampening = 0.5\nmax_depth = 3\n"
    )))
    assert site.policy_seeds == (("https://docs.test/", "favor"),)
    assert dict(site.policies["favor"]) == {"multiplier": 4.0, "on_leave": "default"}
    assert site.distrusted_domains == str(tmp_path / "bad-domains.txt")


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("[policies.x]\nmultiplier = -1\n", "policies.x.multiplier", "must be >= 0"),
        ("[policies.x]\ndampening = 2\n", "policies.x.dampening", "between 0.0 and 1.0"),
        ("[policies.x]\non_leave = \"away\"\n", "policies.x.on_leave", "must be one of"),
        ("[policies.x]\nmax_depth = 1.5\n", "policies.x.max_depth", "an integer >= 0"),
        ("[policies.x]\nallow = [\"(\"]\n", "policies.x.allow", "bad pattern"),
        ("[policies.x]\nmultiplyer = 2\n", "policies.x", "unknown key(s) multiplyer"),
        ("[policies.x]\nswitch_to = \"y\"\n", "policies.x.switch_to", "no policy named"),
        ("[policies.x]\nswitch_hook = \"no.such:thing\"\n", "policies.x.switch_hook",
         "cannot import"),
        ("[policies.x]\nseeds = [\"ftp://a/\"]\n", "policies.x.seeds[0]", "http"),
        ('distrusted_policy = "nope"\n', "distrusted_policy", "no policy named"),
        ('trusted_domains = "missing.txt"\n', "trusted_domains", "no such file"),
    ],
)
def test_a_bad_policy_is_named_by_file_and_key(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    path = _site(tmp_path, text)
    with pytest.raises(SiteConfigError) as info:
        load_site_config(path)
    assert info.value.key == key, str(info.value)
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{path}: {key}: ")


def test_a_policy_error_names_its_key() -> None:
    with pytest.raises(PolicyError, match=r"^policies\.x\.dampening: "):
        book(x={"dampening": -1})
    with pytest.raises(PolicyError, match=r"^distrusted_policy: "):
        PolicyBook({"a": CrawlPolicy("a")}, distrusted_policy="b")


def test_distrust_keeps_the_crawl_out_of_the_farms_yet_follows_good_links_out() -> None:
    """A small web graph: OPIC with the spam seed's domain distrusted spends almost none of
    its first fifth in the farms, and still fetches, by the end, the good pages the farm links
    to (coverage does not change)."""
    graph = build_webgraph(3, hosts=160, pages=8000, farms=2, farm_hosts=10, farm_pages=600,
                           good_seeds=8)
    spam_host = graph.hosts[graph.host_of[graph.spam_seed]]
    policies = PolicyBook(
        {"distrust": CrawlPolicy("distrust", multiplier=0.001, dampening=0.5)},
        distrusted=frozenset({spam_host}), distrusted_policy="distrust",
    )
    fetched = _crawl(graph, policies)
    farm = graph.farm[graph.host_of] >= 0
    first = np.array(fetched[: len(fetched) // 5])
    assert farm[first].mean() <= 0.01
    assert len(fetched) == graph.pages  # to completion: every page, farms included
    plain = _crawl(graph, None)
    assert farm[np.array(plain[: len(plain) // 5])].mean() > 2 * farm[first].mean()


def _crawl(graph, book: PolicyBook | None) -> list[int]:
    """Fetch the whole graph through a MercatorFrontier with OPIC, no delays, in order."""
    clock = lambda: 0.0  # noqa: E731
    f = MercatorFrontier(
        PolitenessPolicy(min_delay=0, delay_factor=0), clock=clock, back_queues=16,
        ledger=CashLedger(8), selector_weights=selector_weights(8), back_run=4,
    )
    urls = [graph.url(p) for p in range(graph.pages)]
    page_of = {u: i for i, u in enumerate(urls)}
    hosts = graph.hosts
    for p in [*graph.seeds, graph.spam_seed]:
        host = hosts[graph.host_of[p]]
        label, cash = ("", 1.0) if book is None else (book.seed(host).label, book.seed(host).factor)
        f.add(Entry(urls[p], host, cash=cash, policy=label), force=True)
    fetched: list[int] = []
    while (lease := f.next()) is not None:
        page = page_of[lease.entry.url]
        fetched.append(page)
        links = graph.links(page).tolist()
        share = lease.entry.cash / max(1, len(links))
        batch = []
        for t in links:
            factor, label = 1.0, ""
            if book is not None:
                decided = book.link(lease.entry.policy, hosts[graph.host_of[page]],
                                    lease.entry.depth + 1, urls[t], hosts[graph.host_of[t]])
                if decided is None:
                    continue
                factor, label = decided.factor, decided.label
            batch.append(Entry(urls[t], hosts[graph.host_of[t]], depth=lease.entry.depth + 1,
                               cash=share * factor, policy=label))
        f.add_many(batch)
        f.finish(lease.token, 0.0)
    return fetched


def test_a_sites_policies_read_sites_as_the_whole_public_suffix_list_does(
    tmp_path: Path,
) -> None:
    """The book a site config gets (``policy_book_for``): alice.github.io and bob.github.io
    are two sites (github.io is a rule of the list's private section), as are two names
    under an unlisted TLD (the list's implicit ``*`` rule); a distrusted entry names one."""
    from types import SimpleNamespace

    from crawler.sites.policy import policy_book_for

    (tmp_path / "bad.txt").write_text("spam.blogspot.com\nfarm.test\n")
    site = load_site_config(_site(tmp_path, (
        'distrusted_domains = "bad.txt"\n'
        '[policies.own]\nseeds = ["https://alice.github.io/"]\non_leave = "drop"\n'
    )))
    b = policy_book_for(SimpleNamespace(site=site), {})
    assert b is not None
    seed = b.seed("alice.github.io", "own")
    assert b.link(seed.label, "alice.github.io", 1, "https://bob.github.io/", "bob.github.io") \
        is None  # another site: dropped
    assert b.link(seed.label, "alice.github.io", 1, "https://www.alice.github.io/",
                  "www.alice.github.io") is not None  # the same site
    assert split_label(b.seed("spam.blogspot.com").label)[0] == "distrust"
    assert b.seed("good.blogspot.com").label == ""
    assert split_label(b.seed("www.farm.test").label)[0] == "distrust"
    assert b.seed("www.good.test").label == ""


def test_a_listed_name_above_a_site_lists_every_site_under_it(tmp_path: Path) -> None:
    """``blogspot.com`` in a distrusted list distrusts every user's blog under it (a site of
    its own for the public suffix list); trusted entries are read alike."""
    from types import SimpleNamespace

    from crawler.sites.policy import policy_book_for

    (tmp_path / "bad.txt").write_text("blogspot.com\n")
    (tmp_path / "good.txt").write_text("github.io\n")
    site = load_site_config(_site(tmp_path, (
        'distrusted_domains = "bad.txt"\ntrusted_domains = "good.txt"\n'
        '[policies.own]\nseeds = ["https://alice.test/"]\non_leave = "trusted"\n'
    )))
    b = policy_book_for(SimpleNamespace(site=site), {})
    assert b is not None
    assert split_label(b.seed("spam.blogspot.com").label)[0] == "distrust"
    assert split_label(b.seed("www.spam.blogspot.com").label)[0] == "distrust"
    assert b.seed("blogspot.org").label == ""
    seed = b.seed("alice.test", "own")
    assert b.link(seed.label, "alice.test", 1, "https://bob.github.io/", "bob.github.io") \
        is not None  # a trusted site: followed
    assert b.link(seed.label, "alice.test", 1, "https://bob.example/", "bob.example") is None


def test_a_listed_name_below_a_site_lists_itself_as_it_lists_its_subdomains() -> None:
    """``listed`` reads the names above a host, so a line ``shop.example.com`` (below the
    site example.com) lists ``www.shop.example.com``: it lists ``shop.example.com`` itself
    too, or that host alone of its whole subtree escaped the line naming it."""
    names = frozenset({"shop.example.com"})
    assert PolicyBook.listed(names, "www.shop.example.com", "example.com")
    assert PolicyBook.listed(names, "shop.example.com", "example.com")
    assert not PolicyBook.listed(names, "example.com", "example.com")
    assert not PolicyBook.listed(names, "www.example.com", "example.com")
    assert not PolicyBook.listed(names, "myshop.example.com", "example.com")
