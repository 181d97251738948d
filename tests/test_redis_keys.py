"""Every Redis key of a crawl is named by ``crawler.backends.redis.keys``: the names crawls were
started with stay as they were (a stored crawl must resume), every near-duplicate script is given
every key it touches, all on one cluster slot, and a real crawl's state holds no key it does not
name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from redis.crc import key_slot
from scrapy.settings import Settings

from crawler.backends.redis import neardup_state, wire
from crawler.backends.redis.controls import CrawlControls
from crawler.backends.redis.frontier_store import PARTITIONS, RedisFrontierStore, check_crawl
from crawler.backends.redis.inbox import RedisScopeRegistry
from crawler.backends.redis.keys import (
    CrawlKeys,
    PartitionKeys,
    address_keys,
    crawl_key,
    glob_escape,
    shard_tag,
)
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.backends.redis.neardup_state import batch
from crawler.backends.redis.robots import RedisRobotsCache
from crawler.frontier import Entry, Outcome, PolitenessPolicy
from crawler.robots.rules import RobotsRecord
from tests.frontier_contract import FakeClock
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_partitioned import partitioned


def test_the_names_stored_crawls_were_started_with() -> None:
    keys = CrawlKeys("docs", site="docs-site")
    assert (keys.meta, keys.controls, keys.blocked, keys.wake) == (
        "{docs}:meta", "{docs}:ctl", "{docs}:blocked", "{docs}:wake")
    assert (keys.totals, keys.workers, keys.members, keys.scope) == (
        "{docs}:totals", "{docs}:workers", "{docs}:members", "{docs}:scope")
    assert (keys.robots, keys.robots_failures, keys.robots_hold) == (
        "{docs}:robots", "{docs}:robots_failures", "{docs}:robots_hold:")
    assert keys.seeds == "docs-site:start_urls"  # scrapy-redis's key: the site's, no tag
    assert CrawlKeys("docs").seeds == "docs:start_urls"
    assert (keys.dropped, keys.partitions, keys.dns) == (
        "{docs}:dropped", "{docs}:parts", "{docs}:dns:")
    p = PartitionKeys("docs", 2, 16)
    tag = "{" + shard_tag("docs", 2, 16) + "}"
    assert tag.startswith("{docs:2.") and p.prefix == tag
    assert (p.lease, p.epoch, p.seq, p.out, p.hosts, p.stale, p.inbox) == tuple(
        tag + k for k in (":lease", ":epoch", ":seq", ":o", ":h", ":st", ":in"))
    assert (p.front(3), p.back("a.test"), p.back_hosts) == (
        tag + ":f:3", tag + ":b:a.test", tag + ":bh")
    assert (p.seen, p.seen_bucket_prefix, p.seen_count) == (tag + ":s", tag + ":s:", tag + ":s:n")
    nd = keys.neardup()
    assert nd.prefix == "{docs}:nd"
    assert (nd.versions, nd.host_ids, nd.last_host_id) == (
        "{docs}:nd:v", "{docs}:nd:h", "{docs}:nd:hnext")
    assert (nd.host_counts, nd.params) == ("{docs}:nd:hc", "{docs}:nd:params")
    assert (nd.template(7), nd.records(3), nd.snapshot(7), nd.lessons(7)) == (
        "{docs}:nd:t:7", "{docs}:nd:r:3", "{docs}:nd:ts:7", "{docs}:nd:tl:7")
    assert (nd.urls_prefix, nd.fingerprints_prefix, nd.snapshot_prefix, nd.lessons_prefix) == (
        "{docs}:nd:u:", "{docs}:nd:f:", "{docs}:nd:ts:", "{docs}:nd:tl:")
    assert nd.kind(b"{docs}:nd:u:12") == "u" and nd.kind("{docs}:nd:params") == "params"


def test_the_reference_page_names_every_key() -> None:
    """docs/reference/redis-keys.md, written by hand, lists every name keys.py builds: the
    crawl's as ``{key}:...``, a partition's as ``{tag}:...``, the near-duplicate detector's
    relative to ``{key}:nd`` and the per-address keys as ``{s}:...``."""
    page = (Path(__file__).parent.parent / "docs" / "reference" / "redis-keys.md").read_text()
    keys = CrawlKeys("key", "<site>")
    part = PartitionKeys("key", 3, 16)
    nd = keys.neardup()
    names = [v for v in vars(keys).values() if isinstance(v, str) and v.startswith("{key}:")]
    names += [v.replace(part.prefix, "{tag}") for v in vars(part).values()
              if isinstance(v, str) and v.startswith(part.prefix)]
    names += [v.removeprefix(nd.prefix) for k, v in vars(nd).items() if k != "prefix"]
    names += [*address_keys("{s}", "<address>"), keys.seeds]
    missing = [name for name in names if "`" + name not in page]
    assert not missing, f"docs/reference/redis-keys.md does not name {missing}"


def test_a_crawl_name_comes_from_the_settings_or_the_site() -> None:
    assert crawl_key({"FRONTIER_REDIS_KEY": "shared"}, "docs") == "shared"
    assert crawl_key({}, "docs") == "docs"
    assert CrawlKeys("shared", "docs").seeds == "docs:start_urls"
    for bad in ("", "a{b", "a}b"):
        with pytest.raises(ValueError, match="without braces"):
            CrawlKeys(bad)


def test_partitions_and_shards_each_have_their_own_tag() -> None:
    assert CrawlKeys("docs").shard_prefixes() == ["{docs}"]
    tags = CrawlKeys("docs", shards=3).shard_prefixes()
    assert tags == ["{" + shard_tag("docs", i, 3) + "}" for i in range(3)]
    assert [key_slot(t[1:-1].encode()) * 3 // 16384 for t in tags] == [0, 1, 2]
    with pytest.raises(ValueError, match="no partition 16"):
        PartitionKeys("docs", 16, 16)


def test_scan_patterns_take_a_crawl_name_literally() -> None:
    keys = CrawlKeys("a*b[1]?")
    assert keys.patterns() == [r"{a\*b\[1\]\?}:*"]
    assert keys.neardup().pattern("f") == r"{a\*b\[1\]\?}:nd:f:*"


def test_each_commit_and_read_is_given_keys_of_one_slot(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A commit's ``WATCH``, reads and ``MULTI``/``EXEC`` go on one connection to one node, and
    a page's read (anchor postings included) in one batch: every key each names is on one
    slot."""
    detector = RedisNearDuplicateDetector(redis_server.client(), fresh_key())
    given: list[list[str]] = []

    class Spy(wire.one_connection):
        def run(self, commands: Any) -> list[Any]:
            given.append([c[1] for c in commands if c[0] not in ("MULTI", "EXEC", "UNWATCH")])
            return super().run(commands)

    def spy(client: Any, commands: Any) -> list[Any]:
        given.append([k for c in commands for k in (c[1:] if c[0] == "MGET" else c[1:2])])
        return batch(client, commands)

    monkeypatch.setattr(neardup_state.wire, "one_connection", Spy)
    monkeypatch.setattr(neardup_state, "batch", spy)
    text = "\n".join(" ".join(f"w{i}x{j}" for j in range(12)) for i in range(8))
    detector.check("http://a.test/1", text)
    detector.check("http://b.test/1", text + "\none more line")
    detector.check("http://a.test/2", "a line\nof the template")
    assert len(given) >= 6 and any(len(keys) > 3 for keys in given)
    for keys in given:
        assert len({key_slot(k.encode()) for k in keys}) == 1, keys


def _keys_in(client: redis.Redis, crawl: str) -> set[str]:
    """Every key on the crawl's tag and on its partitions' tags."""
    return {k.decode() for k in client.scan_iter(match=glob_escape("{" + crawl) + "[}:]*")}


def test_a_crawls_state_holds_only_the_keys_keys_names(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    crawl = fresh_key()
    client = redis_server.client()
    keys = CrawlKeys(crawl)
    assert check_crawl(client, keys.meta, crawl, {"scope": "1"}) == []
    frontier = partitioned(client, crawl, FakeClock(), count=PARTITIONS,
                           policy=PolitenessPolicy(min_delay=0.0), back_queues=2)
    frontier.beat()
    frontier.add_many([Entry(f"http://h{i}.test/p", f"h{i}.test") for i in range(40)])
    frontier.add(Entry("http://h9.test/robots.txt", "h9.test"), force=True, first=True)
    frontier.mark_seen(["http://h1.test/other"])
    leases = frontier.next_many(3)
    frontier.complete(leases[0].token, 0.1, Outcome.FETCHED, size=10)
    frontier.beat()
    operator = CrawlControls(client, crawl)
    operator.set_control("budget", 10**9)
    operator.block("h3.test", wait=0)
    operator.block("h4.test", domain=True, wait=0)
    RedisScopeRegistry(client, keys.scope).add("h0.test")
    RedisRobotsCache(client, crawl).put(RobotsRecord("http://h0.test", "allow", 200, 0, 1e12, ""))
    RedisRobotsCache(client, crawl).claim("http://h1.test", 30)
    detector = RedisNearDuplicateDetector(client, crawl)
    detector.check("http://h0.test/a", "one page of text\nwith a few lines of its own words")
    detector.check("http://h1.test/b", "one page of text\nwith a few lines of its own words")
    detector.check("http://h0.test/c", "a line\nof the template")

    nd = keys.neardup()
    parts = [PartitionKeys(crawl, i, PARTITIONS) for i in range(PARTITIONS)]
    named = {keys.meta, keys.controls, keys.blocked, keys.dropped, keys.scope, keys.robots,
             keys.robots_failures, keys.members, keys.partitions, nd.versions,
             nd.host_ids, nd.last_host_id, nd.host_counts, nd.params}
    named |= {k for p in parts for k in (p.lease, p.epoch, p.seq, p.back_hosts, p.out, p.hosts,
                                         p.stale, p.seen, p.seen_count, p.inbox)}
    prefixes = (nd.urls_prefix, nd.fingerprints_prefix,
                nd.records_prefix, nd.template_prefix, nd.snapshot_prefix, nd.lessons_prefix,
                nd.anchors_prefix,
                keys.robots_hold)
    prefixes += tuple(k for p in parts for k in (p.front_prefix, p.back_prefix,
                                                  p.seen_bucket_prefix))
    present = _keys_in(client, crawl)
    unnamed = {k for k in present if k not in named and not k.startswith(prefixes)}
    assert not unnamed
    assert {keys.controls, keys.blocked, keys.members, nd.versions, keys.robots} <= present
    assert keys.robots_hold + "http://h1.test" in present
    assert any(k.startswith(tuple(p.front_prefix for p in parts)) for k in present)
    assert any(k in {p.hosts for p in parts} for k in present)
    frontier.close()  # hands its partitions back: their leases go
    store = RedisFrontierStore(Settings(), crawl)  # FRONTIER_RESET's
    left = _keys_in(client, crawl)
    assert store.reset(client) == len(left)
    assert not _keys_in(client, crawl)
