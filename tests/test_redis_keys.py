"""Every Redis key of a crawl is named by ``crawler.backends.redis.keys``: the names crawls were
started with stay as they were (a stored crawl must resume), every script gets its keys from
there, all on the crawl's one cluster slot, and a real crawl's state holds no key it does not
name."""

from __future__ import annotations

import re

import pytest
import redis
from redis.crc import key_slot

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.frontier_lua import SCRIPT_KEYS as FRONTIER_SCRIPT_KEYS
from crawler.backends.redis.frontier_lua import SCRIPTS as FRONTIER_SCRIPTS
from crawler.backends.redis.keys import (
    CrawlKeys,
    FrontierKeys,
    NeardupKeys,
    ScriptKeys,
    crawl_key,
)
from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.backends.redis.neardup_lua import SCRIPT_KEYS as NEARDUP_SCRIPT_KEYS
from crawler.backends.redis.neardup_lua import SCRIPTS as NEARDUP_SCRIPTS
from crawler.backends.redis.robots import RedisRobotsCache
from crawler.backends.redis.scope import RedisScopeRegistry
from crawler.frontier import Entry, Outcome, PolitenessPolicy
from crawler.robots.rules import RobotsRecord
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


def test_the_names_stored_crawls_were_started_with() -> None:
    keys = CrawlKeys("docs", site="docs-site")
    assert (keys.meta, keys.controls, keys.blocked, keys.wake) == (
        "{docs}:meta", "{docs}:ctl", "{docs}:blocked", "{docs}:wake")
    assert (keys.totals, keys.workers, keys.members, keys.scope) == (
        "{docs}:totals", "{docs}:workers", "{docs}:members", "{docs}:scope")
    assert (keys.robots, keys.robots_state) == ("{docs}:robots", "{docs}:robots_state")
    assert keys.seeds == "docs-site:start_urls"  # scrapy-redis's key: the site's, no tag
    assert CrawlKeys("docs").seeds == "docs:start_urls"
    f = keys.frontier()
    assert (f.stats, f.selector, f.hosts, f.ready, f.leases, f.lease, f.fetches) == (
        "{docs}:stats", "{docs}:sel", "{docs}:hosts", "{docs}:ready", "{docs}:leases",
        "{docs}:lease", "{docs}:fetches")
    assert (f.seen, f.seen_bloom, f.seen_bloom_count) == (
        "{docs}:seen", "{docs}:seen:bloom", "{docs}:seen:bloom:n")
    assert (f.front(2), f.back("a.test"), f.first("a.test"), f.host("a.test")) == (
        "{docs}:f:2", "{docs}:q:a.test", "{docs}:fq:a.test", "{docs}:h:a.test")
    nd = keys.neardup()
    assert nd.prefix == "{docs}:nd"
    assert (nd.template_meta, nd.versions, nd.host_ids, nd.host_names, nd.last_host_id) == (
        "{docs}:nd:tp", "{docs}:nd:v", "{docs}:nd:h", "{docs}:nd:hn", "{docs}:nd:hnext")
    assert (nd.host_counts, nd.last_id, nd.params) == (
        "{docs}:nd:hc", "{docs}:nd:next", "{docs}:nd:params")
    assert (nd.log(3), nd.template(7), nd.slots_prefix, nd.heap_prefix) == (
        "{docs}:nd:l:3", "{docs}:nd:t:7", "{docs}:nd:o:", "{docs}:nd:r:")
    assert (nd.urls_prefix, nd.fingerprints_prefix, nd.snapshot_prefix, nd.lessons_prefix) == (
        "{docs}:nd:u:", "{docs}:nd:f:", "{docs}:nd:ts:", "{docs}:nd:tl:")
    assert nd.kind(b"{docs}:nd:u:12") == "u" and nd.kind("{docs}:nd:params") == "params"


def test_a_crawl_name_comes_from_the_settings_or_the_site() -> None:
    assert crawl_key({"FRONTIER_REDIS_KEY": "shared"}, "docs") == "shared"
    assert crawl_key({}, "docs") == "docs"
    assert CrawlKeys.from_settings({"FRONTIER_REDIS_KEY": "shared"}, "docs").seeds == (
        "docs:start_urls")
    for bad in ("", "a{b", "a}b"):
        with pytest.raises(ValueError, match="without braces"):
            CrawlKeys(bad)


def test_scan_patterns_take_a_crawl_name_literally() -> None:
    keys = CrawlKeys("a*b[1]?")
    assert keys.patterns() == [r"{a\*b\[1\]\?}:*", r"{a\*b\[1\]\?:nd:*"]
    assert keys.neardup().pattern("f") == r"{a\*b\[1\]\?}:nd:f:*"


def _names(keys: FrontierKeys | NeardupKeys) -> set[str]:
    return {v for k, v in vars(keys).items() if isinstance(v, str) and k != "prefix"}


@pytest.mark.parametrize(
    ("script_keys", "scripts", "keys"),
    [
        (FRONTIER_SCRIPT_KEYS, FRONTIER_SCRIPTS, CrawlKeys("docs").frontier()),
        (NEARDUP_SCRIPT_KEYS, NEARDUP_SCRIPTS, CrawlKeys("docs").neardup()),
    ],
)
def test_every_script_builds_its_keys_with_the_names_keys_gives(
    script_keys: ScriptKeys, scripts: dict[str, str], keys: FrontierKeys | NeardupKeys
) -> None:
    names = _names(keys)
    assert len({key_slot(n.encode()) for n in names}) == 1  # one Redis Cluster slot
    given = script_keys.keys(keys)
    assert len(given) == 1 and given[0] in names
    for name, source in scripts.items():
        assert not re.search(r"@[A-Z_]+@", source), name
        built = re.findall(r"P \.\. '([^']*)'", source)
        assert built and all(keys.prefix + b in names for b in built), name
        # no key is built on anything but the tag, nor named whole in a script
        assert not re.search(r"\.\. ?'[:{]", re.sub(r"\bP \.\. '", "", source)), name
        assert not re.search(r"'\{", source), name


def test_script_keys_refuse_a_key_of_another_tag_and_a_name_not_given() -> None:
    frontier = CrawlKeys("docs").frontier()
    frontier.ready = "{other}:ready"
    with pytest.raises(ValueError, match="not a key under"):
        ScriptKeys(frontier, "stats", local_keys=(("READY", "ready"),))
    keys = ScriptKeys(CrawlKeys("docs").frontier(), "stats", inline_keys=(("WAKE", "wake"),))
    assert keys.render("redis.call('PUBLISH', @WAKE@, 'x')") == (
        "redis.call('PUBLISH', P .. ':wake', 'x')")
    with pytest.raises(ValueError, match="@READY@"):
        keys.render("redis.call('ZCARD', @READY@)")
    assert keys.head() == "local P = string.sub(KEYS[1], 1, -7)\n"


def _keys_in(client: redis.Redis, crawl: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=CrawlKeys(crawl).patterns()[0])}


def test_a_crawls_state_holds_only_the_keys_keys_names(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    crawl = fresh_key()
    client = redis_server.client()
    keys = CrawlKeys(crawl)
    frontier = RedisFrontier(client, crawl, PolitenessPolicy(min_delay=0.0), back_queues=2,
                             seen_bloom=(1 << 12, 3))
    frontier.check_compatible({"scope": "1"})
    frontier.add_many([Entry(f"http://h{i}.test/p", f"h{i}.test") for i in range(4)])
    frontier.add(Entry("http://h9.test/robots.txt", "h9.test"), force=True, first=True)
    frontier.mark_seen(["http://h1.test/other"])
    leases = frontier.next_many(3)
    frontier.complete(leases[0].token, 0.1, Outcome.FETCHED, size=10)
    frontier.set_control("budget", 10**9)
    frontier.block("h3.test")
    frontier.block("h4.test", domain=True)
    RedisScopeRegistry(client, keys.scope).add("h0.test")
    RedisRobotsCache(client, crawl).put(RobotsRecord("http://h0.test", "allow", 200, 0, 1e12, ""))
    RedisRobotsCache(client, crawl).claim("http://h1.test", 30)
    detector = RedisNearDuplicateDetector(client, crawl)
    detector.check("http://h0.test/a", "one page of text\nwith a few lines of its own words")
    detector.check("http://h1.test/b", "one page of text\nwith a few lines of its own words")
    detector.observe("http://h0.test/c", "a line\nof the template")

    f, nd = keys.frontier(), keys.neardup()
    named = {keys.meta, keys.controls, keys.blocked, keys.scope, keys.robots, keys.robots_state,
             f.stats, f.selector, f.hosts, f.host_ids, f.ready, f.leases, f.lease, f.fetches,
             f.seen_bloom, f.seen_bloom_count, nd.template_meta, nd.versions, nd.host_ids,
             nd.host_names, nd.last_host_id, nd.host_counts, nd.last_id, nd.params,
             nd.pending, nd.recent}
    prefixes = (f.front_prefix, f.back_prefix, f.first_prefix, f.host_prefix, nd.urls_prefix,
                nd.fingerprints_prefix, nd.log_prefix, nd.slots_prefix, nd.heap_prefix,
                nd.template_prefix, nd.snapshot_prefix, nd.lessons_prefix)
    present = _keys_in(client, crawl)
    unnamed = {k for k in present if k not in named and not k.startswith(prefixes)}
    assert not unnamed
    assert {f.stats, f.host("h0.test"), f.first("h9.test"), keys.controls, keys.blocked,
            f.seen_bloom, nd.last_id, keys.robots} <= present
    postings = {k.decode() for k in client.scan_iter(match=keys.patterns()[-1])}
    assert postings and all(k.startswith("{" + crawl + ":nd:") for k in postings)
    assert frontier.reset() == len(present) + len(postings)
    assert not _keys_in(client, crawl)
    assert not list(client.scan_iter(match=keys.patterns()[-1]))
