"""The Redis frontier's compact queued entries (``crawler.backends.redis.entries``): what they
keep of a URL and that every URL comes back as it went in (what one costs in a partition's
queues: ``tests/test_frontier_partitioned.py``, ``bench/partition_costs.py``)."""

from __future__ import annotations

import pytest

from crawler.backends.redis.entries import (
    huffman_decode,
    huffman_encode,
    pack_entry,
    unpack_entry,
)
from crawler.frontier import Entry
from crawler.frontier.api import SEED

# Real documentation link shapes (Debian's and the Rust toolchain's HTML docs)
DOC_PATHS = [
    "/nodejs/api/child_process.html",
    "/valgrind/html/mc-manual.html",
    "/std/collections/hash_map/struct.HashMap.html",
    "/core/arch/x86_64/fn._mm256_cvttps_epi64.html",
    "/libxslt1-dev/html/libxslt-transform.html",
    "/book/ch08-02-strings.html",
    "/cargo/reference/specifying-dependencies.html",
    "/git/html/git-rebase.html",
]


@pytest.mark.parametrize(
    "url, host",
    [
        ("https://docs.example.org/std/index.html", "docs.example.org"),
        ("http://docs.example.org/std/index.html", "docs.example.org"),
        ("https://docs.example.org", "docs.example.org"),
        ("https://docs.example.org/", "docs.example.org"),
        ("https://docs.example.org?q=1", "docs.example.org"),
        ("https://docs.example.org:8443/a", "docs.example.org"),  # a port: the whole URL
        ("http://127.0.0.1:8080/x?y=1&z=%C3%A9", "127.0.0.1"),
        ("https://docs.example.org.evil.test/a", "docs.example.org"),  # not the host's form
        ("https://docs.example.org/search?q=a+b&page=2&lang=en", "docs.example.org"),
        ("https://docs.example.org/r\u00e9sum\u00e9/\u65e5\u672c", "docs.example.org"),
        ("https://docs.example.org/\udcff-lone-surrogate", "docs.example.org"),
        ("https://[::1]:8000/p", "::1"),
        ("https://docs.example.org/~user/%7E/a;b=c,d!$'()*@:", "docs.example.org"),
        ("https://docs.example.org/" + "x" * 5000, "docs.example.org"),
    ],
)
@pytest.mark.parametrize("priority, depth", [(0, 0), (6, 127), (7, 128), (300, 100_000)])
def test_every_url_comes_back_as_it_went_in(url: str, host: str, priority: int, depth: int):
    for payload in (None, SEED, b"\x80\x00 bytes", {"meta": {"k": [1, 2.5, "v"]}}, "text"):
        entry = Entry(url, host, priority, depth, payload)
        assert unpack_entry(pack_entry(entry, priority), host) == entry


def test_the_host_form_of_a_url_is_not_stored() -> None:
    https = pack_entry(Entry("https://docs.example.org/a.html", "docs.example.org"), 0)
    http = pack_entry(Entry("http://docs.example.org/a.html", "docs.example.org"), 0)
    other = pack_entry(Entry("https://docs.example.org:444/a.html", "docs.example.org"), 0)
    assert b"docs.example.org" not in https and b"docs.example.org" not in http
    assert len(https) == len(http) < len(other)
    assert https[0] & 3 == 0 and http[0] & 3 == 1 and other[0] & 3 == 2


def test_a_seed_is_a_flag_not_a_payload() -> None:
    plain = pack_entry(Entry("https://d.example/std/index.html", "d.example"), 0)
    seed = pack_entry(Entry("https://d.example/std/index.html", "d.example", payload=SEED), 0)
    assert len(seed) == len(plain) and seed[0] & 8 and not plain[0] & 8


def test_documentation_links_take_few_bytes() -> None:
    """About 5 bits a character of the path, 2 bytes of flags, priority and depth."""
    sizes = []
    for path in DOC_PATHS:
        entry = Entry("https://docs.example.org" + path, "docs.example.org", 3, 5)
        blob = pack_entry(entry, 3)
        sizes.append(len(blob))
        assert len(blob) <= 2 + (len(path) * 6 + 8) // 8
    assert sum(sizes) / len(sizes) < 30


@pytest.mark.parametrize(
    "url, host, referrer",
    [
        ("https://d.test/book/ch08-02-strings.html", "d.test", "https://d.test/book/ch08-01.html"),
        ("https://d.test/a/b.html", "d.test", "https://d.test/a/b.html"),  # the page itself
        ("https://d.test/a/b.html", "d.test", "https://d.test/"),  # a prefix of the URL
        ("https://d.test/a/b.html", "d.test", "https://d.test/a/b.html/c?x=1"),  # longer
        ("http://d.test/a", "d.test", "https://other.example/links.html"),  # another site
        ("https://d.test:8443/a", "d.test", "https://d.test:8443/index"),  # a port: whole URL
        ("https://d.test/r\u00e9sum\u00e9", "d.test", "https://d.test/caf\u00e9/\u65e5"),
        ("https://d.test/a", "d.test", "https://d.test/\udcff-lone"),
        ("https://d.test/x", "d.test", "https://d.test/" + "y" * 5000),
    ],
)
@pytest.mark.parametrize("priority, depth", [(0, 1), (6, 127), (7, 128), (300, 100_000)])
def test_every_referrer_comes_back_as_it_went_in(
    url: str, host: str, referrer: str, priority: int, depth: int
) -> None:
    for payload in (None, SEED, b"\x80 bytes", {"meta": {"k": [1, "v"]}}):
        entry = Entry(url, host, priority, depth, payload, referrer=referrer)
        blob = pack_entry(entry, priority)
        assert blob[0] & 3 == 3 and blob[1] & 3 == pack_entry(Entry(url, host), 0)[0] & 3
        assert unpack_entry(blob, host) == entry


def test_a_referrer_of_the_same_folder_costs_its_file_name() -> None:
    """The referrer is a delta against the URL: neither the host nor the shared folders are
    stored again; an entry without a referrer is the same bytes as in layout 2."""
    url = "https://docs.example.org/std/collections/hash_map/struct.HashMap.html"
    plain = pack_entry(Entry(url, "docs.example.org", 3, 5), 3)
    near = pack_entry(
        Entry(url, "docs.example.org", 3, 5,
              referrer="https://docs.example.org/std/collections/hash_map/index.html"), 3)
    far = pack_entry(
        Entry(url, "docs.example.org", 3, 5,
              referrer="https://elsewhere.example.net/blog/2026/links-to-rust-docs.html"), 3)
    assert plain == bytes((16 | 3 << 5, 5)) + huffman_encode(url[len("https://docs.example.org"):])
    assert len(near) - len(plain) <= 3 + (len("index.html") * 6 + 8) // 8
    assert len(near) < len(far)


def test_the_static_code_takes_any_ascii() -> None:
    text = "".join(chr(i) for i in range(128)) * 3
    assert huffman_decode(huffman_encode(text)) == text
    assert huffman_decode(huffman_encode("")) == ""


def test_an_entry_keeps_its_seen_key_when_its_url_is_not_canonical() -> None:
    """The queued URL is the request URL (the link as found); its seen key is stored with it
    only when the canonical form differs (8 bytes), else computed from the URL."""
    url = "http://a.test/index.php?/blog/post/1"
    plain = Entry(url, "a.test", 1, 2)
    keyed = Entry(url, "a.test", 1, 2, key=-(2**63) + 5)
    assert len(pack_entry(keyed, 1)) == len(pack_entry(plain, 1)) + 9
    for entry in (plain, keyed, Entry(url, "a.test", 9, 300, SEED, referrer="http://a.test/",
                                      key=12345)):
        assert unpack_entry(pack_entry(entry, entry.priority), "a.test") == entry

