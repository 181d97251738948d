"""The Redis frontier's compact queued entries (``crawler.backends.redis.entries``): what they
keep of a URL and that every URL comes back as it went in (what one costs in a partition's
queues: ``tests/test_frontier_partitioned.py``, ``bench/partition_costs.py``)."""

from __future__ import annotations

import pytest

from crawler.backends.redis import entries as entries_module
from crawler.backends.redis.entries import (
    huffman_decode,
    huffman_encode,
    is_first,
    pack_cash,
    pack_entry,
    unpack_cash,
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


HOSTS = {
    0: "docs.example.org",
    1: "d.test",
    2: "a.test",
    3: "127.0.0.1",
    4: "::1",
    700: "d.example",
}
HID = {name: hid for hid, name in HOSTS.items()}


def round_trip(entry: Entry, *, queue: int = -1) -> Entry:
    blob = pack_entry(entry, HID[entry.host], queue=queue)
    return unpack_entry(blob, HOSTS, queue if queue >= 0 else 99)


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
        for cash, policy in ((0.0, ""), (0.375, "favor")):
            entry = Entry(url, host, priority, depth, payload, cash=cash, policy=policy)
            assert round_trip(entry) == entry
            assert round_trip(entry, queue=priority) == entry


def test_the_host_form_of_a_url_is_not_stored() -> None:
    https = pack_entry(Entry("https://docs.example.org/a.html", "docs.example.org"), queue=0)
    http = pack_entry(Entry("http://docs.example.org/a.html", "docs.example.org"), queue=0)
    other = pack_entry(Entry("https://docs.example.org:444/a.html", "docs.example.org"), queue=0)
    assert b"docs.example.org" not in https and b"docs.example.org" not in http
    assert len(https) == len(http) < len(other)
    assert https[0] == 0 and http[0] == 1 and other[0] == 8 and other[1] == 128 and other[2] == 1


def test_a_front_entry_of_the_depth_order_is_its_host_number_and_its_tail() -> None:
    """In front queue 3 at depth 3 an entry stores neither (the queue says both); its host's
    number and four flags are one varint, 2 bytes under 1,024 hosts; under OPIC the depth and
    3 bytes of cash follow."""
    url = "https://d.example/std/collections/struct.HashMap.html"
    tail = huffman_encode(url[len("https://d.example/") :])
    entry = Entry(url, "d.example", 3, 3)
    assert pack_entry(entry, 700, queue=3) == bytes((0xC0 | 0x80, 700 >> 3)) + tail
    assert unpack_entry(pack_entry(entry, 700, queue=3), HOSTS, 3) == entry
    deep = Entry(url, "d.example", 3, 9)
    assert len(pack_entry(deep, 700, queue=3)) == 2 + 1 + len(tail)
    opic = Entry(url, "d.example", 3, 9, cash=0.05)
    assert len(pack_entry(opic, 700, queue=3)) == 2 + 1 + 3 + len(tail)
    elsewhere = pack_entry(entry, 700)  # a back queue or a lease: with its priority
    assert len(elsewhere) == 2 + 2 + len(tail)
    assert unpack_entry(elsewhere, HOSTS, 0) == entry
    with pytest.raises(ValueError):
        pack_entry(entry, 700, queue=2)


@pytest.mark.parametrize("cash", [1.0, 0.05, 1 / 3, 1e-30, 1e-44, 123456.789, 1e300, 2.0**-149])
def test_cash_keeps_five_digits_and_never_becomes_nothing(cash: float) -> None:
    """Cash decides a front queue by powers of two: 3 bytes keep it to 1.5e-5 (a float32's
    sign, exponent and 15 bits of mantissa), a positive amount stays positive."""
    back = round_trip(Entry("https://d.test/a", "d.test", 2, 5, cash=cash)).cash
    if 1e-37 < cash < 1e38:
        assert back == pytest.approx(cash, rel=1.6e-5)
    assert back > 0.0
    assert len(pack_cash(cash)) == 3 and unpack_cash(pack_cash(cash), 0) == back


def test_a_seed_is_a_flag_not_a_payload() -> None:
    plain = pack_entry(Entry("https://d.example/std/index.html", "d.example"), 700)
    seed = pack_entry(Entry("https://d.example/std/index.html", "d.example", payload=SEED), 700)
    assert len(seed) == len(plain) and seed[2] & 4 and not plain[2] & 4


def test_a_hosts_first_request_is_a_flag() -> None:
    entry = Entry("https://d.example/robots.txt", "d.example", 0, 0, SEED)
    assert is_first(pack_entry(entry, 700, first=True))
    assert not is_first(pack_entry(entry, 700)) and not is_first(pack_entry(entry, 700, queue=0))


def test_documentation_links_take_few_bytes() -> None:
    """About 4.6 bits a character of the path (``.html`` one symbol), 2 bytes of host number
    and flags."""
    sizes = []
    for path in DOC_PATHS:
        entry = Entry("https://docs.example.org" + path, "docs.example.org", 3, 3)
        blob = pack_entry(entry, 600, queue=3)
        sizes.append(len(blob))
        assert len(blob) <= 2 + (len(path) * 5 + 7) // 8
    assert sum(sizes) / len(sizes) < 23


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
        assert round_trip(entry) == entry
        assert round_trip(entry, queue=priority) == entry


def test_a_referrer_of_the_same_folder_costs_its_file_name() -> None:
    """The referrer is a delta against the URL: neither the host nor the shared folders are
    stored again."""
    url = "https://docs.example.org/std/collections/hash_map/struct.HashMap.html"
    plain = pack_entry(Entry(url, "docs.example.org", 3, 5), queue=3)
    near = pack_entry(
        Entry(
            url,
            "docs.example.org",
            3,
            5,
            referrer="https://docs.example.org/std/collections/hash_map/index.html",
        ),
        queue=3,
    )
    far = pack_entry(
        Entry(
            url,
            "docs.example.org",
            3,
            5,
            referrer="https://elsewhere.example.net/blog/2026/links-to-rust-docs.html",
        ),
        queue=3,
    )
    assert plain == bytes((4, 5)) + huffman_encode(url[len("https://docs.example.org/") :])
    assert len(near) - len(plain) <= 3 + (len("index.html") * 6 + 8) // 8
    assert len(near) < len(far)


def test_the_static_code_takes_any_ascii() -> None:
    text = "".join(chr(i) for i in range(128)) * 3
    for n in range(len(text)):
        assert huffman_decode(huffman_encode(text[:n])) == text[:n]
    assert huffman_encode("") == b""


def test_html_is_one_symbol() -> None:
    assert len(huffman_encode("a/b/index.html")) < len(huffman_encode("a/b/index.hxml")) - 1
    assert huffman_decode(huffman_encode(".html.htm.html")) == ".html.htm.html"


def test_the_padding_is_never_a_character() -> None:
    """The last byte is padded with ones, a prefix of the longest code: every tail decodes to
    itself, never to itself and a character more; bytes that end inside a code are refused."""
    for text in ("e", "et", "/", "index.html", "a" * 7):
        blob = huffman_encode(text)
        assert huffman_decode(blob) == text
    with pytest.raises(ValueError):
        huffman_decode(huffman_encode("e")[:-1] + bytes((0b11111110,)))


def test_an_entry_keeps_its_seen_key_when_its_url_is_not_canonical() -> None:
    """The queued URL is the request URL (the link as found); its seen key is stored with it
    only when the canonical form differs (8 bytes), else computed from the URL."""
    url = "http://a.test/index.php?/blog/post/1"
    plain = Entry(url, "a.test", 1, 2)
    keyed = Entry(url, "a.test", 1, 2, key=-(2**63) + 5)
    assert len(pack_entry(keyed, 2, queue=1)) == len(pack_entry(plain, 2, queue=1)) + 9
    for entry in (
        plain,
        keyed,
        Entry(url, "a.test", 9, 300, SEED, referrer="http://a.test/", key=12345),
    ):
        assert round_trip(entry) == entry


def test_an_entry_read_and_packed_again_reuses_its_tails_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A front queue's entry moved to a back queue, a letter's link queued: packed again as
    it was read, its tail is not coded again (the code decoded is the code), and the bytes
    are those a fresh coding gives; a tail changed since is coded afresh."""
    from crawler.backends.redis import entries

    coded: list[str] = []

    def counted(text: str) -> bytes:
        coded.append(text)
        return huffman_encode(text)

    entry = Entry("https://docs.example.org" + DOC_PATHS[2], "docs.example.org", 3, 3)
    blob = pack_entry(entry, 0, queue=3)
    fresh = pack_entry(entry, 0)
    monkeypatch.setattr(entries, "huffman_encode", counted)
    read = unpack_entry(blob, HOSTS, 3)
    assert pack_entry(read, 0) == fresh and coded == []
    read.url += "x"
    assert unpack_entry(pack_entry(read, 0), HOSTS).url == read.url
    assert coded == [DOC_PATHS[2][1:] + "x"]


def test_a_tail_coded_once_is_not_coded_again_on_another_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same path on many hosts (a documentation tree's, ``index.html``) is coded once:
    its code is kept, and the entries packed with it are the same bytes as coded afresh."""
    coded: list[str] = []

    def counted(text: str) -> bytes:
        coded.append(text)
        return huffman_encode(text)

    monkeypatch.setattr(entries_module, "_CODED", {})
    monkeypatch.setattr(entries_module, "huffman_encode", counted)
    path = "/std/collections/hash_map/struct.HashMap.html#a-tail-seen-once"
    blobs = [
        pack_entry(Entry(f"https://docs{i}.example{path}", f"docs{i}.example"), 1, queue=0)
        for i in range(3)
    ]
    assert coded == [path[1:]]
    assert blobs == [blobs[0]] * 3 and blobs[0].endswith(huffman_encode(path[1:]))
    back = unpack_entry(blobs[2], {1: "docs2.example"}, 0)
    assert back.url == f"https://docs2.example{path}"
