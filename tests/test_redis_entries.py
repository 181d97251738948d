"""The Redis frontier's compact queued entries (``crawler.backends.redis.entries``): what they
keep of a URL, that every URL comes back as it went in, what one costs in Redis, and that a
crawl stored with the msgpack entries of layout 1 is refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import msgpack
import pytest
import redis

from crawler.backends.redis.entries import (
    host_number,
    huffman_decode,
    huffman_encode,
    pack_entry,
    unpack_entry,
)
from crawler.backends.redis.frontier import RedisFrontier
from crawler.frontier import Entry, PolitenessPolicy
from crawler.frontier.api import SEED
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

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


def test_a_front_queue_element_starts_with_its_hosts_number() -> None:
    blob = pack_entry(Entry("https://a.test/x", "a.test"), 0)
    for number in (b"\x05", b"\x85\x01", b"\xff\xff\x7f"):
        assert host_number(number + blob) == (number, blob)


# -- in Redis ---------------------------------------------------------------------------------


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    c = redis_server.client()
    yield c
    c.close()


def data_memory(client: redis.Redis) -> int:
    """``used_memory`` less client buffers and the script cache: what the crawl's keys cost."""
    info = client.info("memory")
    return info["used_memory"] - info["mem_clients_normal"] - info["used_memory_scripts"]


def frontier(client: redis.Redis, key: str, **kwargs: object) -> RedisFrontier:
    kwargs.setdefault("clock", FakeClock())
    return RedisFrontier(client, key, PolitenessPolicy(min_delay=0.0), **kwargs)  # type: ignore[arg-type]


def test_front_queue_entries_carry_a_host_number_the_refill_takes_off(client) -> None:
    key = fresh_key()
    f = frontier(client, key, back_queues=1)
    entries = [Entry(f"https://h{i}.example/doc/p{j}.html", f"h{i}.example", 1, 2, SEED)
               for i in range(3) for j in range(2)]
    assert all(r.added for r in f.add_many(entries))
    f.due_in()  # URLs are routed to back queues when work is handed out or asked about
    numbers = {client.hget(f.keys.host(f"h{i}.example"), "id") for i in range(3)}
    assert len(numbers) == 3
    names = {client.hget(f.keys.host_ids, n).decode() for n in numbers}
    assert names == {"h0.example", "h1.example", "h2.example"}
    # one back queue: the refill moved the first URL there, the rest waits in the front queue
    front = client.lrange(f.keys.front(1), 0, -1)
    assert len(front) == 5
    queued = []
    for element in front:
        number, blob = host_number(element)
        queued.append(unpack_entry(blob, client.hget(f.keys.host_ids, number).decode()))
    [queue] = [k.decode() for k in client.scan_iter(match=f.keys.back_prefix + "*")]
    host = queue[len(f.keys.back_prefix):]
    queued += [unpack_entry(b, host) for b in client.lrange(queue, 0, -1)]
    assert sorted(queued, key=lambda e: e.url) == entries
    leases = []
    while len(leases) < 6:
        got = f.next_many(6)
        assert got, "every URL is handed out"
        leases += got
        for lease in got:
            f.finish(lease.token, 0.0)
    assert sorted(lease.entry.url for lease in leases) == sorted(e.url for e in entries)
    assert all(lease.entry.payload == SEED and lease.entry.depth == 2 for lease in leases)


def test_bytes_per_queued_documentation_url(client) -> None:
    """Printed for the record (BENCHMARKS.md has the million-URL figure); the bound is loose."""
    key = fresh_key()
    f = frontier(client, key, back_queues=16)
    n = 20_000
    entries = [
        Entry(f"https://docs.h{i % 200}.example{DOC_PATHS[i % len(DOC_PATHS)]}?v={i // 200}",
              f"docs.h{i % 200}.example", 2, 1, SEED)
        for i in range(n)
    ]
    f.add(Entry("https://warm.example/", "warm.example"))  # the script loaded before
    client.execute_command("MEMORY", "PURGE")
    base = data_memory(client)
    assert all(r.added for r in f.add_many(entries))
    used = data_memory(client) - base
    seen = sum(client.memory_usage(k, samples=0) or 0
               for pattern in (":seen*", ":sx:*")
               for k in client.scan_iter(match=f.prefix + pattern))
    per_queued = (used - seen) / n
    print(f"\ncompact entries: {per_queued:.1f} B per queued URL "
          f"(mean URL {sum(len(e.url) for e in entries) / n:.0f} chars), {seen / n:.1f} B seen")
    assert 10 < per_queued < 50


@pytest.mark.parametrize("old", ["1", "2", "4"])
def test_a_crawl_stored_by_another_version_is_refused_in_one_line(client, old: str) -> None:
    """Layout 5 keeps request URLs and their seen keys: a crawl of another layout is refused
    (no migration), in one line that says what to do."""
    key = fresh_key()
    f = frontier(client, key)
    client.hset(f.keys.meta, "layout", old)
    with pytest.raises(RuntimeError, match=rf"another version \(layout {old}, this code reads 5\)"):
        frontier(client, key)
    assert any("layout" in p for p in f.check_compatible({}))


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


def test_the_lease_record_holds_the_compact_entry(client) -> None:
    f = frontier(client, fresh_key())
    entry = Entry("http://a.test/p?q=1", "a.test", priority=3, depth=4, payload=b"\x80\x04")
    f.add(entry)
    lease = f.next()
    assert lease is not None and lease.entry == entry
    record = msgpack.unpackb(client.hget(f.prefix + ":lease", lease.token), raw=True)
    assert record[0] == b"a.test" and unpack_entry(record[4], "a.test") == entry
