"""The registered-domain lookup (``crawler.frontier.urls.registered_domain_function``): the
partition of a host, the per-domain host budget and the canonical scope rest on it. It walks
tldextract's public-suffix rules itself (a flat table, not its trie) and must answer as
tldextract's own call does (``top_domain_under_public_suffix``, else ``domain``, else the
host): on a labelled list, on a host under every rule of the bundled snapshot, and on hosts
that are no plain names. (Where tldextract's walk misses a wildcard rule, the list's algorithm
decides: ``tests/test_vectors_psl.py``.)"""

from __future__ import annotations

import gc
import pkgutil

import idna
import pytest
import tldextract
from tldextract.suffix_list import extract_tlds_from_suffix_list

from crawler.frontier.urls import registered_domain_function

_EXTRACT = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=())


def reference(host: str) -> str:
    """tldextract's own answer, as the lookup gave it before it walked the trie itself."""
    parts = _EXTRACT(host)
    return parts.top_domain_under_public_suffix or parts.domain or host


LABELLED = {
    "example.com": "example.com",
    "www.example.com": "example.com",
    "a.b.c.example.com": "example.com",
    "docs.example.co.uk": "example.co.uk",
    "example.co.uk": "example.co.uk",
    "co.uk": "co.uk",  # a public suffix itself: no domain under it, the host
    "com": "com",
    "www.site1.test": "test",  # no public suffix: the last label (the shard map keeps the host)
    "localhost": "localhost",
    "intranet-host": "intranet-host",
    "127.0.0.1": "127.0.0.1",
    "10.0.0.300": "300",  # not an address: a name without a public suffix
    "192.168.1": "1",
    "foo.blogspot.com": "blogspot.com",  # a private suffix: not one here
    "user.github.io": "github.io",
    "a.b.kawasaki.jp": "a.b.kawasaki.jp",  # *.kawasaki.jp: b.kawasaki.jp is a suffix
    "city.kawasaki.jp": "city.kawasaki.jp",  # !city.kawasaki.jp
    "www.city.kawasaki.jp": "city.kawasaki.jp",
    "b.kawasaki.jp": "b.kawasaki.jp",  # a suffix by the wildcard: the host
    "kawasaki.jp": "kawasaki.jp",
    "x.y.ck": "x.y.ck",  # *.ck
    "www.ck": "www.ck",  # !www.ck
    "shop.example.com.au": "example.com.au",
    "a-b.c-d.org": "c-d.org",
    "123.example.net": "example.net",
    "www.Example.COM": "Example.COM",  # (not plain: tldextract's own call, case kept)
    "example.com.": "example.com",
    "xn--mnchen-3ya.de": "xn--mnchen-3ya.de",
    "www.xn--fiqs8s": "www.xn--fiqs8s",  # (an IDN suffix, .中国)
    "münchen.de": "münchen.de",
    "[::1]": "[::1]",
    "example.com:8080": "example.com",
    "": "",
    "a..example.com": "example.com",
    "-.example.org": "example.org",
}


@pytest.mark.parametrize("host", sorted(LABELLED))
def test_a_labelled_host_gets_its_domain_as_tldextract_gives_it(host: str) -> None:
    domain_of = registered_domain_function()
    assert domain_of(host) == LABELLED[host] == reference(host)


def test_a_host_under_every_rule_of_the_snapshot_gets_tldextracts_answer() -> None:
    text = (pkgutil.get_data("tldextract", ".tld_set_snapshot") or b"").decode("utf-8")
    public, private = extract_tlds_from_suffix_list(text)
    domain_of = registered_domain_function()
    hosts = set()
    for rule in public + private:
        name = rule.lstrip("!").replace("*", "wild")
        hosts.update({name, f"shop.{name}", f"www.shop.{name}", f"a.b.c.{name}"})
        hosts.add(".".join(name.split(".")[1:]) or name)
    wrong = {h: (domain_of(h), reference(h)) for h in hosts if domain_of(h) != reference(h)}
    assert not wrong, sorted(wrong.items())[:20]
    assert len(hosts) > 30_000


def test_a_host_as_tldextract_reads_it_gets_its_answer() -> None:
    """What is not a plain host (capitals, punycode, a port, a trailing or ideographic dot, a
    bracketed address) is read as tldextract reads it before the walk, both lookups."""
    text = (pkgutil.get_data("tldextract", ".tld_set_snapshot") or b"").decode("utf-8")
    public, private = extract_tlds_from_suffix_list(text)
    hosts = {
        "Docs.Example.co.uk", "WWW.EXAMPLE.COM", "example.com.", "example.com:8080",
        "user@www.example.com", "a\u3002example\uff0eco\uff61uk", "[2001:db8::1]", "[::1]",
        "xn--80ak6aa92e.com", "www.XN--80AK6AA92E.com", "xn--bad-.com", "1.2.3.4", "1.2.3.4.5",
        "MÜNCHEN.de", "shop.XN--FIQS8S", "xn--.com", "a.xn--", "example.com\u3002", "1.2.3.4:80",
        "1.2.3.4.", "[::1]:8080", "http://www.example.co.uk/x?y", " example.com ", "_dmarc.x.com",
        "www.!www.ck", "*.ck", "\uff21.example.com", "a.b..co.uk", ".", "..",
    }
    for rule in public + private:
        name = rule.lstrip("!").replace("*", "wild")
        if not name.isascii():
            puny = ".".join(idna.encode(label).decode() if not label.isascii() else label
                            for label in name.split("."))
            hosts.update({f"shop.{puny}", f"www.shop.{puny}", puny})
        hosts.update({f"Shop.{name}", f"www.shop.{name.upper()}"})
    plain, full = registered_domain_function(), registered_domain_function(private=True)
    wrong = {h: (plain(h), reference(h)) for h in hosts if plain(h) != reference(h)}
    wrong |= {h: (full(h), reference_private(h)) for h in hosts if full(h) != reference_private(h)}
    assert not wrong, sorted(wrong.items())[:20]


def test_the_lookup_holds_no_trie_of_objects() -> None:
    """The rules are a flat table of strings: each object a lookup keeps alive is walked by
    every full garbage collection of the crawl (tldextract's two tries were ~20,000 objects a
    lookup, and each lookup built its own)."""
    gc.collect()
    before = len(gc.get_objects())
    lookups = [registered_domain_function(private=p) for p in (False, True, False, True)]
    assert lookups[0]("www.example.co.uk") == "example.co.uk"
    gc.collect()
    assert len(gc.get_objects()) - before < 200


def reference_private(host: str) -> str:
    """tldextract's answer over the whole list, with the list's implicit ``*`` rule for a name
    under no listed suffix (its last two labels)."""
    parts = _EXTRACT(host, include_psl_private_domains=True)
    above = parts.subdomain.rpartition(".")[2]
    if not parts.suffix and above:
        return f"{above}.{parts.domain}"
    return parts.top_domain_under_public_suffix or parts.domain or host


def test_the_full_list_lookup_walks_as_tldextract_does_under_every_rule() -> None:
    """``private=True`` (the "same site" lookup): its walk over the trie with the private
    rules answers as tldextract's call with them, on a host under every rule."""
    text = (pkgutil.get_data("tldextract", ".tld_set_snapshot") or b"").decode("utf-8")
    public, private = extract_tlds_from_suffix_list(text)
    domain_of = registered_domain_function(private=True)
    hosts = set(LABELLED)
    for rule in public + private:
        name = rule.lstrip("!").replace("*", "wild")
        hosts.update({name, f"shop.{name}", f"www.shop.{name}", f"a.b.c.{name}"})
    wrong = {h: (domain_of(h), reference_private(h)) for h in hosts}
    wrong = {h: pair for h, pair in wrong.items() if pair[0] != pair[1]}
    assert not wrong, sorted(wrong.items())[:20]
    assert domain_of("alice.github.io") == "alice.github.io"
    assert domain_of("www.site1.test") == "site1.test"


IPV6_HOSTS = [
    "2001:db8::1",  # compressed, as normalize_url gives every address
    "2001:db8:ffff::2",
    "2001:0db8:0000:0000:0000:0000:0000:0003",  # full
    "2001:DB8::4",  # capitals
    "fe80::1",
    "fe80::1%eth0",  # a zone id (the URL parser refuses one; the lookup reads it)
    "::1",
    "::",
    "::ffff:1.2.3.4",  # IPv4-mapped, dotted
    "::ffff:102:305",  # IPv4-mapped, as Python < 3.13 compresses it
    "64:ff9b::1.2.3.4",  # NAT64
    "ac::1",  # a first group that is a public suffix (.ac)
    "2a00:1450::1",
]


@pytest.mark.parametrize("private", [False, True])
@pytest.mark.parametrize("host", IPV6_HOSTS)
def test_an_ipv6_address_is_its_own_registered_domain(host: str, private: bool) -> None:
    """An IPv6 literal (as normalize_url gives it, without brackets) is itself in both lookups,
    as an IPv4 address is: tldextract reads "2001:db8::1" as the host "2001" and a port, which
    made all of 2001::/16 one registered domain."""
    assert registered_domain_function(private=private)(host) == host


@pytest.mark.parametrize("private", [False, True])
def test_a_bracketed_ipv6_address_is_itself_in_both_lookups(private: bool) -> None:
    domain_of = registered_domain_function(private=private)
    assert domain_of("[2001:db8::1]") == "[2001:db8::1]"
    assert domain_of("[::ffff:1.2.3.4]") == "[::ffff:1.2.3.4]"
    assert domain_of("[2001:db8::1]:8080") == "[2001:db8::1]"  # tldextract's reading, a port


def _url_hosts() -> list[str]:
    """The hosts of IPv6 URLs in several forms, as the frontier meets them (url_forms): one
    address written compressed and in full is one host; a zone id is refused."""
    from crawler.frontier.urls import url_forms
    from crawler.net.weburl import InvalidUrl

    assert url_forms("http://[2001:0DB8:0:0:0:0:0:1]:8080/")[2] == "2001:db8::1"
    with pytest.raises(InvalidUrl):
        url_forms("http://[fe80::1%25eth0]/")
    urls = [
        "http://[2001:db8::1]/", "http://[2001:0db8:0000:0000:0000:0000:0000:0002]/",
        "https://[2001:db8:1::1]:8443/", "http://[::1]/", "http://[::ffff:1.2.3.4]/",
        "http://[::ffff:1.2.3.5]/", "http://[64:ff9b::1.2.3.4]/", "http://[fe80::1]/",
        "http://[ac::1]/", "http://[2001:db8::1:0:0:1]/",
    ]
    hosts = [url_forms(u)[2] for u in urls]
    assert len(set(hosts)) == len(urls)
    return hosts


def test_ipv6_hosts_each_get_their_own_partition() -> None:
    """The host splitter keys a host by its registered domain: each IPv6 host its own key.
    (A 2**62-way map makes the partition the key's hash: distinct keys, distinct numbers.)"""
    from crawler.backends.redis.shards import ShardMap

    hosts = _url_hosts()
    assert [registered_domain_function()(h) for h in hosts] == hosts
    shard = ShardMap(1 << 62)
    assert len({shard(h) for h in hosts}) == len(hosts)


def test_ipv6_hosts_each_get_their_own_host_budget() -> None:
    from crawler.frontier.urls import UrlPolicy

    policy = UrlPolicy(any_host=True, max_hosts_per_domain=1)
    verdicts = [policy.check(f"http://[{h}]/page")[0] for h in _url_hosts()]
    assert verdicts == [""] * len(verdicts)
    assert not policy._hosting_hosts  # no ICANN domain above them: no hosting budget shared
    verdicts = [policy.check(f"http://[2001:db8::{i}]/page")[0] for i in range(2, 6)]
    assert verdicts == [""] * 4
