"""The Redis frontier with its seen-set as a Bloom filter (FRONTIER_SEEN_BLOOM_CAPACITY): the
frontier contract still holds, and the false-positive rate is the one it was sized for."""

from __future__ import annotations

from typing import Any

import pytest

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.seen import bloom_offsets, bloom_params, seen_key
from crawler.frontier import Entry, PolitenessPolicy
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.test_frontier_redis import TestRedisFrontierContract as RedisContract


class TestBloomFrontierContract(RedisContract):
    """The shared contract on a Bloom seen-set big enough to make a false positive unlikely."""

    frontier_options: dict[str, Any] = {"seen_bloom": bloom_params(100_000, 1e-6)}


def test_bloom_params() -> None:
    bits, probes = bloom_params(10_000_000, 0.01)
    assert 11 * 2**20 < bits / 8 < 12 * 2**20 and probes == 7  # ~11.4 MiB: 1.2 B per URL
    with pytest.raises(ValueError):
        bloom_params(0, 0.01)


def test_seen_test_and_false_positive_rate(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_server.client()
    f = RedisFrontier(client, fresh_key(), PolitenessPolicy(), seen_bloom=bloom_params(2000, 0.01))
    assert f.mark_seen([f"http://a.test/m{i}" for i in range(1000)]) == 1000
    assert f.mark_seen(["http://a.test/m1"]) == 0
    added = f.add_many([Entry(url=f"http://a.test/n{i}", host="a.test") for i in range(1000)])
    assert sum(r.added for r in added) >= 990  # new URLs: at most a few false positives
    again = f.add_many([Entry(url=f"http://a.test/n{i}", host="a.test") for i in range(1000)])
    assert not any(r.added for r in again)  # no false negative, ever
    assert f.counts().seen == sum(r.added for r in added) + 1000
    # filled to capacity: a fresh URL would be taken for seen at about the rate it was sized
    # for (read from the bitmap itself, so the probes add nothing to it)
    bitmap = client.get(f.prefix + ":seen:bloom") or b""
    bits, probes = f.seen_bloom  # type: ignore[misc]

    def on(offset: int) -> bool:
        byte = offset // 8
        return byte < len(bitmap) and bool(bitmap[byte] >> (7 - offset % 8) & 1)

    fresh = [seen_key(f"http://b.test/{i}") for i in range(20_000)]
    rate = sum(all(on(o) for o in bloom_offsets(k, bits, probes)) for k in fresh) / len(fresh)
    assert 0.002 < rate < 0.03, rate
    assert client.exists(f.prefix + ":seen") == 0  # no SET kept beside the filter
