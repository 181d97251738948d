"""The Redis frontier's self-sizing seen-set: exact (bucketed intsets) up to its limit, then a
scalable Bloom filter whose layers grow, on one shard and on three; no false negative, the
false-positive rate under its bound, every Bloom refusal counted."""

from __future__ import annotations

import math
from typing import Any

import pytest

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.seen import (
    SeenConfig,
    bucket_bits,
    layer_offsets,
    seen_key,
    seen_state,
)
from crawler.backends.redis.sharded import ShardedFrontier
from crawler.frontier import Entry, PolitenessPolicy
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_redis import TestRedisFrontierContract as RedisContract
from tests.test_frontier_sharded import TestShardedFrontierContract as ShardedContract

# a few URLs exact, then layers of 4, 8, 16... at a bound small enough that the contract's
# handful of URLs never meets a false positive
TINY = SeenConfig(exact_limit=3, first_layer=4, error=1e-9)


class TestLayeredSeenContract(RedisContract):
    """The shared contract with the exact part full after 3 URLs: most run on Bloom layers."""

    frontier_options: dict[str, Any] = {"seen": TINY}


class TestLayeredSeenShardedContract(ShardedContract):
    """The same on three shards of one Redis, each its own exact part and layers."""

    def make_frontier(self, policy: PolitenessPolicy | None = None, **kwargs: Any) -> Any:
        return super().make_frontier(policy, seen=TINY, **kwargs)


def urls(prefix: str, n: int, hosts: int = 50) -> list[str]:
    return [f"https://h{i % hosts}.{prefix}.test/doc/{i}/index.html" for i in range(n)]


def entries(items: list[str]) -> list[Entry]:
    return [Entry(url=u, host=u.split("/")[2]) for u in items]


def test_crossing_the_exact_limit_grows_layers(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    config = SeenConfig(exact_limit=1000, first_layer=1000, error=0.01)
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(), seen=config)
    kept = urls("kept", 30_000)
    assert f.mark_seen(kept) > 29_500  # a few new ones taken for seen: false positives
    state = seen_state(client, f.keys, config)
    assert state.exact == 1000
    # 29,000 URLs past the limit: layers of 1,000, 2,000, 4,000, 8,000, 16,000 (31,000)
    assert len(state.layers) == 5 and state.layers[:4] == [1000, 2000, 4000, 8000]
    assert f.counts().seen == state.count
    assert all(f.has_seen(kept))  # no false negative, ever
    assert f.mark_seen(kept[:2000]) == 0
    # the exact part is kept, frozen: bucketed 32-bit integers (intsets)
    buckets = list(client.scan_iter(match=f"{{{f.key}}}:sx:*"))
    assert 0 < len(buckets) <= 2 ** bucket_bits(1000)
    assert client.object("encoding", buckets[0]) == b"intset"
    # the layers' sizes are the ones the config gives (the script and Python agree)
    for i in range(5):
        _, bits, _ = config.layer(i)
        assert 0 < client.strlen(f"{{{f.key}}}:seen:l:{i}") <= math.ceil(bits / 8)
    held_out = urls("never", 20_000)
    rate = sum(f.has_seen(held_out)) / len(held_out)
    assert rate <= config.error, rate
    assert state.false_positive_rate() <= config.error


def test_probable_refusals_are_counted(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    f = RedisFrontier(
        client,
        fresh_key(),
        PolitenessPolicy(),
        seen=SeenConfig(exact_limit=100, first_layer=100, error=0.01),
    )
    exact, past = urls("a", 100), urls("b", 300)
    assert sum(r.added for r in f.add_many(entries(exact))) == 100
    added = sum(r.added for r in f.add_many(entries(past)))
    assert f.counts().extra.get("seen_probable", 0) == 300 - added  # false positives, if any
    again = f.add_many(entries(exact + past))
    assert [r.reason for r in again] == ["seen"] * 400
    # the exact part's refusals are certain: only the Bloom layers' count
    assert f.counts().extra["seen_probable"] == 300 - added + 300
    # a forced URL (a start URL, a retry) is queued anyway: not a refusal
    assert f.add(entries(past[:1])[0], force=True).added
    assert f.counts().extra["seen_probable"] == 600 - added


def test_one_call_crosses_the_limit_and_layers(redis_server: RedisServer) -> None:  # noqa: F811
    """The counts are kept in the script and written once at its end (seen_flush): one call
    that fills the exact part and three layers and begins a fourth leaves the counts exact,
    through mark_seen and through add, and the next call goes on from them."""
    client = redis_server.client()
    config = SeenConfig(exact_limit=50, first_layer=50, error=0.001)
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(), seen=config)
    first = urls("one", 400)  # 50 exact + 50 + 100 + 200 in layers + 0..: one script call
    fresh = f.mark_seen(first)
    state = seen_state(client, f.keys, config)
    assert state.exact == 50 and state.layers[:3] == [50, 100, 200]
    assert state.count == fresh == f.counts().seen
    links = urls("two", 300)
    added = sum(r.added for r in f.add_many(entries(links)))  # one add script call
    state = seen_state(client, f.keys, config)
    assert state.count == fresh + added == f.counts().seen
    assert state.layers[:3] == [50, 100, 200] and len(state.layers) == 4
    assert sum(f.has_seen(first + links)) == 700  # no false negative
    assert client.hget(f.keys.seen_info, "x") == b"50"


def test_layer_bits_are_the_python_mirrors(redis_server: RedisServer) -> None:  # noqa: F811
    """The bits the script sets in a layer are exactly ``layer_offsets``'s (the bench's bulk
    fill and the reports rely on it), and the exact bucket and member are the key's halves."""
    client = redis_server.client()
    config = SeenConfig(exact_limit=5, first_layer=3000, error=0.01)
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(), seen=config)
    items = urls("bits", 1005)
    assert f.mark_seen(items) >= 1000
    keys = [seen_key(u) for u in items]
    for key in keys[:5]:  # the exact part: bucket = first bucket_bits bits, member signed
        bucket = int.from_bytes(key[:4], "big") >> (32 - config.bucket_bits)
        member = int.from_bytes(key[4:], "big", signed=True)
        assert client.sismember(f"{{{f.key}}}:sx:{bucket}", member)
    _, bits, probes = config.layer(0)
    want = bytearray(-(-bits // 8))
    for key in keys[5:]:
        for o in layer_offsets(key, bits, probes):
            want[o // 8] |= 0x80 >> (o % 8)
    got = client.get(f"{{{f.key}}}:seen:l:0") or b""
    assert got == bytes(want[: len(got)]) and not any(want[len(got) :])


def test_three_shards_cross_their_limits(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    config = SeenConfig(exact_limit=200, first_layer=200, error=0.01)
    key = fresh_key()
    shards = [
        RedisFrontier(client, key, PolitenessPolicy(), shard=i, shards=3, seen=config)
        for i in range(3)
    ]
    f = ShardedFrontier(shards)
    kept = urls("s", 6000, hosts=300)
    added = sum(r.added for r in f.add_many(entries(kept)))
    assert added > 5900
    states = [seen_state(client, s.keys, config) for s in shards]
    assert all(s.exact == 200 and len(s.layers) >= 3 for s in states), states
    assert sum(s.count for s in states) == added == f.counts().seen
    assert not any(r.added for r in f.add_many(entries(kept)))  # no false negative
    assert f.counts().extra["seen_probable"] >= 6000 - 600
    held_out = urls("t", 6000, hosts=300)
    new = sum(r.added for r in f.add_many(entries(held_out)))
    assert new >= 6000 * (1 - config.error), new


def test_legacy_set_is_still_read(redis_server: RedisServer) -> None:  # noqa: F811
    """A crawl started with an exact SET of 8-byte keys keeps its seen URLs."""
    client = redis_server.client()
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy())
    client.sadd(f.keys.seen, seen_key("https://old.test/a"))
    assert f.add(Entry(url="https://old.test/a", host="old.test")).reason == "seen"
    assert f.add(Entry(url="https://old.test/b", host="old.test")).added
    assert f.counts().seen == 2


def test_settings() -> None:
    from scrapy.settings import Settings

    s = SeenConfig.from_settings(
        Settings({"FRONTIER_SEEN_EXACT_LIMIT": 10_000, "FRONTIER_SEEN_ERROR": 0.001}), 3
    )
    assert (s.exact_limit, s.error, s.bloom, s.first_capacity) == (10_000, 0.001, None, 20_000)
    fixed = SeenConfig.from_settings(Settings({"FRONTIER_SEEN_BLOOM_CAPACITY": 3000}), 3)
    assert fixed.bloom is not None and fixed.fingerprint().startswith("bloom:")
    assert bucket_bits(2_000_000) == 13 and bucket_bits(100) == 0
    with pytest.raises(ValueError):
        SeenConfig(error=0)
