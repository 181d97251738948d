"""Seeds in bulk: a seeds file's or ``<site>:start_urls``' URLs checked in batches and queued as
plain seed entries (a flag, no serialized Request) in one ``add_many`` a batch, into a Redis
frontier of one partition and of three, and the fast path of URL
normalization that makes a million of them cheap."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import crawler.frontier.urls as urls_module
from crawler.backends.redis.inbox import SEED_BATCH, RedisScopeRegistry, SharedInbox
from crawler.backends.redis.keys import PartitionKeys
from crawler.frontier import PolitenessPolicy, Prioritizer, UrlPolicy
from crawler.frontier.api import SEED, Frontier
from crawler.frontier.urls import normalize_url
from crawler.scheduler import codec
from crawler.scheduler.admission import Admission
from crawler.scheduler.intake import LinkIntake
from crawler.scheduler.stats import FrontierStats
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned
from tests.test_redis_entries import DOC_PATHS
from tests.test_scheduler_intake import Stats

TRICKY = [
    "https://a.org", "https://a.org/", "https://a.org/./x", "https://a.org/a/../b",
    "https://a.org/a/..", "https://a.org/a/.", "https://a.org/.hidden/x", "https://a.org/...",
    "https://a.org/a//b", "https://A.org/x", "HTTPS://a.org/x", "https://a.org:443/x",
    "https://a.org:8080/x", "https://a.org/x?b=1&a=2", "https://a.org/x#f",
    "https://a.org/x;jsessionid=1", "https://a.org/%7Ex", "https://a.org/~x",
    "https://xn--bcher-kva.example/x", "https://a_b.org/x", "https://a.org./x",
    "https://-a.org/x", "https://1.2.3.4/x", "https://a.org/x y", "http://a.org/\u00e4",
    "https://a.org/a.", "https://a.org/a..", "https://a.org/..a/b", "https://a.org/a/.b",
    "https://u@a.org/x", "https://a.org/x/", " https://a.org/x ", "https://a.org/x\n",
    "https://www.a.org/std/collections/hash_map/struct.HashMap.html",
]


def test_a_url_in_canonical_form_is_normalized_as_w3lib_would(monkeypatch) -> None:
    urls = TRICKY + [f"https://docs{i}.example.org{p}" for i, p in enumerate(DOC_PATHS)]
    policy = UrlPolicy(any_host=True)
    fast = {}
    for url in urls:
        try:
            fast[url] = normalize_url(url), policy.link_form(url)
        except ValueError as exc:
            fast[url] = type(exc), policy.link_form(url)
    monkeypatch.setattr(urls_module, "_CANONICAL", re.compile(r"(?!)"))  # never matches
    for url in urls:
        try:
            slow = normalize_url(url), policy.link_form(url)
        except ValueError as exc:
            slow = type(exc), policy.link_form(url)
        assert fast[url] == slow, url
    assert sum(urls_module._CANONICAL.match(u) is None for u in urls) == len(urls)


# -- a frontier of one shard and of three ------------------------------------------------------


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    c = redis_server.client()
    yield c
    c.close()


def one_shard(client: redis.Redis, key: str) -> Frontier:
    return partitioned(client, key, FakeClock(), count=1, policy=PolitenessPolicy(min_delay=0.0))


def three_shards(client: redis.Redis, key: str) -> Frontier:
    return partitioned(client, key, FakeClock(), count=3, policy=PolitenessPolicy(min_delay=0.0))


def seed_intake(
    client: redis.Redis, frontier: Frontier, key: str
) -> tuple[LinkIntake, Stats, RedisScopeRegistry, list[tuple[str, str]]]:
    scope = RedisScopeRegistry(client, "{" + key + "}:scope")
    origins: list[tuple[str, str]] = []
    admission = Admission(
        UrlPolicy(), Prioritizer("depth", 8), scope, lambda o, h: origins.append((o, h))
    )
    stats = Stats()
    intake = LinkIntake(
        admission, frontier, FrontierStats(stats), slice_size=1000, cache_size=1000
    )
    return intake, stats, scope, origins


def seeds(hosts: int, per_host: int) -> list[str]:
    return [
        f"{'https' if h % 4 else 'http'}://docs.h{h}.example{DOC_PATHS[i % len(DOC_PATHS)]}"
        + (f"?page={i}" if i >= len(DOC_PATHS) else "")
        for h in range(hosts)
        for i in range(per_host)
    ]


@pytest.mark.parametrize("make", [one_shard, three_shards], ids=["one shard", "3 shards"])
def test_a_bulk_seed_load_queues_every_seed_with_its_flag(client, make: Any) -> None:
    key = fresh_key()
    frontier = make(client, key)
    intake, stats, scope, origins = seed_intake(client, frontier, key)
    urls = seeds(30, 40)
    given = [(u, "seeds.txt") for u in urls] + [
        ("not a url", "seeds.txt"), ("ftp://x.example/", "seeds.txt"), (urls[0], "seeds.txt")
    ]
    for start in range(0, len(given), 500):  # batches, as the spider sends them
        intake.take_seeds(given[start : start + 500])
    assert stats.values["seeds/valid"] == len(urls) + 1
    assert stats.values["seeds/invalid"] == 2
    assert stats.values["frontier/enqueued"] == len(urls)
    assert stats.values["frontier/rejected/seen"] == 1  # the repeated seed
    assert len(frontier) == len(urls)
    hosts = {f"docs.h{h}.example" for h in range(30)}
    assert scope.load() == hosts  # one SADD a batch
    assert sorted(h for _, h in origins) == sorted(hosts)  # one origin per host, announced once
    leased = []
    while True:
        got = frontier.next_many(200)
        if not got:
            break
        for lease in got:
            frontier.finish(lease.token, 0.0)
        leased += got
    assert sorted(lease.entry.url for lease in leased) == sorted(urls)
    for lease in leased:
        assert lease.entry.payload == SEED and lease.entry.depth == 0
        request = codec.decode(lease.entry, None)
        assert request.url == lease.entry.url and request.meta == {"depth": 0, "seed": True}
        assert request.callback is None  # the spider's parse, as a seed's own request had


def test_seed_entries_take_as_little_as_links(client) -> None:
    """A seed is a flag in its entry's first byte: the queues hold no serialized request."""
    key = fresh_key()
    frontier = one_shard(client, key)
    intake, _, _, _ = seed_intake(client, frontier, key)
    intake.take_seeds([(u, "s") for u in seeds(5, 20)])
    keys = PartitionKeys(key, 0, 1)
    blobs = [b for q in range(8) for b in client.lrange(keys.front(q), 0, -1)]
    assert len(blobs) == 100
    assert max(len(b) for b in blobs) < 45
    assert all(b"docs.h" not in b and b"html" not in b for b in blobs)


def test_a_plain_seed_request_becomes_the_seed_flag() -> None:
    from scrapy import Request, Spider

    class S(Spider):
        name = "s"

        def parse(self, response: Any) -> None:
            pass

        def other(self, response: Any) -> None:
            pass

    spider = S()
    plain = Request("https://a.example/", callback=spider.parse, meta={"seed": True})
    assert codec.encode(plain, spider, serialize=True) == SEED
    for other in (
        Request("https://a.example/", callback=spider.parse, meta={"seed": True, "x": 1}),
        Request("https://a.example/", meta={"seed": True}, headers={"X": "1"}),
        Request("https://a.example/", meta={"seed": True}, dont_filter=True),
        Request("https://a.example/", callback=spider.other, meta={"seed": True}),
    ):
        assert codec.encode(other, spider, serialize=True) not in (None, SEED)


def test_seeds_pushed_to_start_urls_come_in_batches(client) -> None:
    key = fresh_key()
    batches: list[list[str]] = []
    inbox = SharedInbox(
        client, f"{key}:start_urls", RedisScopeRegistry(client, "{" + key + "}:scope"),
        on_seeds=batches.append, on_scope=None,
    )
    urls = seeds(10, SEED_BATCH // 4)
    client.rpush(f"{key}:start_urls", *urls, "   ")
    while inbox.poll():
        pass
    assert [u for b in batches for u in b] == urls
    assert len(batches) == 3 and len(batches[0]) == SEED_BATCH


def test_seeds_pushed_to_start_urls_load_as_seed_entries(client) -> None:
    key = fresh_key()
    frontier = three_shards(client, key)
    intake, stats, _, _ = seed_intake(client, frontier, key)
    inbox = SharedInbox(
        client, f"{key}:start_urls", RedisScopeRegistry(client, "{" + key + "}:scope"),
        on_seeds=lambda urls: intake.take_seeds([(u, "start_urls") for u in urls], counted=False),
        on_scope=None,
    )
    urls = seeds(12, 25)
    client.rpush(f"{key}:start_urls", *urls, "ftp://no.example/")
    while inbox.poll():
        pass
    assert len(frontier) == len(urls) and "seeds/valid" not in stats.values
    assert stats.values["frontier/rejected/scheme"] == 1
    numbered = set()  # each host's seeds in its own partition, the host with its number
    for part in frontier.parts.values():
        numbered |= {name.decode() for name in client.hkeys(part.ownership.keys.hosts)}
    assert numbered == {f"docs.h{h}.example" for h in range(12)}
    leases = frontier.next_many(1000)
    assert leases and all(lease.entry.payload == SEED for lease in leases)


# -- the spider hands its seeds over in batches ----------------------------------------------


def test_the_spider_sends_its_seeds_in_batches_when_the_crawl_has_a_frontier(
    tmp_path, monkeypatch
) -> None:
    import crawler.spiders.site as site_module
    from crawler import signals as crawler_signals
    from crawler.spiders.links import _frontier_opened
    from tests.test_spider import drain, make_spider

    async def no_turn() -> None:
        return None

    monkeypatch.setattr(site_module, "_reactor_turn", no_turn)
    monkeypatch.setattr(site_module, "SEED_BATCH", 3)
    seeds_file = tmp_path / "s.txt"
    seeds_file.write_text("https://b.example/\nnot a url\nhttps://c.example/x\nhttps://d.example/\n")
    spider = make_spider(tmp_path, 'name = "t"\nseeds = ["https://a.example/"]\n',
                         seeds=str(seeds_file))
    batches: list[list[tuple[str, str]]] = []
    scheduled: list[list[str]] = []

    def found(spider: Any, seeds: list[tuple[str, str]]) -> None:
        batches.append(seeds)
        spider.crawler.stats.inc_value("seeds/valid", sum(u != "not a url" for u, _ in seeds))

    def on_scheduled(spider: Any, urls: list[str]) -> None:
        scheduled.append(urls)

    spider.crawler.signals.connect(found, crawler_signals.seeds_found)
    spider.crawler.signals.connect(on_scheduled, crawler_signals.seeds_scheduled)
    _frontier_opened(None, spider)
    assert drain(spider.start()) == []  # no Request per seed
    config = str(tmp_path / "t.toml")
    assert batches == [
        [("https://a.example/", config), ("https://b.example/", str(seeds_file)),
         ("not a url", str(seeds_file))],
        [("https://c.example/x", str(seeds_file)), ("https://d.example/", str(seeds_file))],
    ]
    assert scheduled == [[]]  # the seeds in bulk went by seeds_found: not listed again
    assert spider.crawler.stats.get_value("seeds/none") is None


def test_a_due_seed_sent_in_bulk_keeps_its_seed_flag(tmp_path, monkeypatch) -> None:
    """The recrawl extension learns which due URLs are seeds from the bulk batches as they
    stream (``seeds_found``): the spider keeps no list of its seeds for it."""
    import crawler.spiders.site as site_module
    from crawler.spiders.links import _frontier_opened
    from tests.test_spider import crawldb_spider, drain

    async def no_turn() -> None:
        return None

    monkeypatch.setattr(site_module, "_reactor_turn", no_turn)
    monkeypatch.setattr(site_module, "SEED_BATCH", 1)
    toml = 'name = "t"\nseeds = ["https://b.example/", "https://a.example/"]\n'
    spider, ext = crawldb_spider(tmp_path, toml)
    ext.record("https://a.example/", 200, depth=0, fingerprint="x")
    ext.record("https://a.example/deep", 200, depth=3, fingerprint="y")
    ext.db.commit()

    class Frontier:
        def mark_seen(self, keys: Any) -> int:
            return len(list(keys))

    scheduled: list[Any] = []

    class Engine:  # what the extension needs of Scrapy's engine: crawl()
        def crawl(self, request: Any) -> None:
            scheduled.append(request)

    ext.clock = lambda: 1e12  # everything is due
    ext._frontier_opened(Frontier(), spider)
    _frontier_opened(None, spider)
    spider.crawler.engine = Engine()
    assert drain(spider.start()) == []  # the seeds went in bulk
    assert [(r.url, r.meta) for r in scheduled] == [
        ("https://a.example/", {"depth": 0, "seed": True}),
        ("https://a.example/deep", {"depth": 3}),
    ]
    ext._engine_stopped()
