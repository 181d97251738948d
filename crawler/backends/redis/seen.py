"""The frontier's seen-test in Redis: a URL's 8-byte key, and a seen-set that sizes itself.

The Lua (``seen_lua``, in every script's prelude) tests and adds inside ``add``; this module
describes the layout, sizes it from the settings (:class:`SeenConfig`), mirrors the script's
arithmetic for reports and tests, and gives the scripts that mark keys seen outside ``add``.

Each shard's seen-set is, in this order:

1. **Exact, bucketed** (``{crawl}:sx:<b>``): the first ``exact_limit`` URLs of the shard. Bucket
   ``b`` is the key's first ``bucket_bits`` bits; the member is its last 32 bits as an integer,
   so each bucket is an *intset* (Redis's sorted array of 4-byte integers, kept while a set
   holds at most ``set-max-intset-entries``, 512 by default): ~4-5 B per URL against ~64 B in
   one SET of 8-byte strings. The buckets are sized so that at the limit they hold ~256 each
   (the fullest stays under 512). Exact up to the (``bucket_bits`` + 32)-bit fingerprint: with
   the default 2 million URLs and 13 bucket bits, the expected number of new URLs ever taken
   for seen is n^2 / 2^46, ~0.06 over the whole exact phase.
2. **A scalable Bloom filter** (Almeida, Baquero, Preguiça, Hutchison 2007) once the limit is
   reached: layer ``i`` (``{crawl}:seen:l:<i>``, one bitmap string written with ``BITFIELD``;
   Debian's Redis has no Bloom module) holds ``first_layer * growth^i`` URLs at error bound
   ``error * (1 - tightening) * tightening^i``, so the bounds sum to ``error`` however many
   layers come; a new layer begins when the current one has taken its capacity (counts in
   ``{crawl}:seen:info``). A URL is tested against the exact set, then every layer, and only
   the newest is written. ``growth`` 2 and ``tightening`` 0.8 (the paper's advice for a set
   that grows by orders of magnitude): ~1.9-2.0 B per URL from 30 million to a billion.

The exact set is kept, frozen, when the layers begin (not folded into them): it keeps its
URLs free of false positives and costs ~5 B x ``exact_limit`` per shard. Every URL the Bloom
filter refuses is counted in the shard's stats as ``drop:seen_probable`` (``scrapy frontier``
status, ``frontier/dropped/seen_probable`` at the end): most were seen, about ``error`` of the
new URLs tested were not.

A crawl started before these buckets kept an exact SET of 8-byte keys (``{crawl}:seen``): it is
still read, never written. ``FRONTIER_SEEN_BLOOM_CAPACITY`` (deprecated) still keeps a fixed
Bloom filter instead of all this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import redis

from crawler.backends.redis.frontier_lua_prelude import PRELUDE, SCRIPT_KEYS
from crawler.backends.redis.keys import FrontierKeys, glob_escape
from crawler.backends.redis.seen_lua import HAS_SEEN, MARK_SEEN
from crawler.config import defaults

LN2 = math.log(2)
MAX_LAYER_BITS = 2**32  # one Redis string
INTSET_FILL = 256  # members per exact bucket at the limit (set-max-intset-entries is 512)

SEEN_SCRIPTS = {
    "mark_seen": SCRIPT_KEYS.render(PRELUDE + MARK_SEEN),
    "has_seen": SCRIPT_KEYS.render(PRELUDE + HAS_SEEN),
}


def seen_key(url: str) -> bytes:
    """The seen-set key of a canonical URL: the same 64-bit blake2b key as
    ``store.url_key`` (``url_key(url).to_bytes(8, "big", signed=True)``), as 8 raw bytes."""
    return blake2b(url.encode(), digest_size=8).digest()


def identity_seen_key(identity: str | int) -> bytes:
    """The seen key of what ``crawler.frontier.store.identity`` gives: a URL's canonical form
    (hashed here) or the 64-bit key already hashed."""
    if isinstance(identity, int):
        return identity.to_bytes(8, "big", signed=True)
    return blake2b(identity.encode(), digest_size=8).digest()


def entry_seen_key(entry: Any) -> bytes:
    """The seen key of a queued entry (``Entry.key``, else its URL's)."""
    return identity_seen_key(entry.key or entry.url)


def bloom_params(capacity: int, error: float) -> tuple[int, int]:
    """Bits and probes of a Bloom filter holding ``capacity`` keys at false-positive rate
    ``error``: m = -n ln p / (ln 2)^2 (at most Redis's 2^32-bit string), k = m/n ln 2."""
    if capacity < 1 or not 0.0 < error < 1.0:
        raise ValueError("a Bloom filter needs a capacity >= 1 and an error rate in (0, 1)")
    bits = min(2**32, math.ceil(-capacity * math.log(error) / math.log(2) ** 2))
    return bits, max(1, round(bits / capacity * math.log(2)))


def bloom_offsets(key: bytes, bits: int, probes: int) -> list[int]:
    """The bits of ``key`` (an 8-byte seen key), as the scripts compute them."""
    h1, h2 = int.from_bytes(key[:4], "big"), int.from_bytes(key[4:8], "big")
    return [(h1 + i * h2) % bits for i in range(probes)]


def layer_offsets(key: bytes, bits: int, probes: int) -> list[int]:
    """The bits of ``key`` in a layer of the scalable filter: enhanced double hashing
    (``seen_lua``'s ``bloom_probe``)."""
    h1, h2 = int.from_bytes(key[:4], "big"), int.from_bytes(key[4:8], "big")
    return [(h1 + i * h2 + (i**3 - i) // 6) % bits for i in range(probes)]


def bucket_bits(exact_limit: int) -> int:
    """Bucket bits of an exact set that holds ``exact_limit`` URLs (-1: no limit, sized for
    2^28) at about ``INTSET_FILL`` per bucket."""
    wanted = 2**28 if exact_limit < 0 else exact_limit
    return max(0, min(24, math.ceil(math.log2(max(1, wanted) / INTSET_FILL))))


@dataclass(frozen=True)
class SeenConfig:
    """One shard's seen-set (see the module). ``exact_limit``: URLs kept exactly (-1: all),
    ``error``: the bound on the false-positive rate of the Bloom layers together;
    ``first_layer``: the first layer's capacity (0: twice the exact limit, at least 1,024);
    ``bloom``: a fixed filter's ``(bits, probes)`` instead of all this (deprecated)."""

    exact_limit: int = defaults.FRONTIER_SEEN_EXACT_LIMIT
    error: float = defaults.FRONTIER_SEEN_ERROR
    first_layer: int = 0
    growth: int = 2
    tightening: float = 0.8
    bloom: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.error < 1.0 or not 0.0 < self.tightening < 1.0 or self.growth < 1:
            raise ValueError("a seen-set needs error and tightening in (0, 1), growth >= 1")

    @classmethod
    def from_settings(cls, settings: Any, shards: int = 1) -> SeenConfig:
        """The seen-set of one of ``shards`` shards, from the ``FRONTIER_SEEN_*`` settings
        (``FRONTIER_SEEN_EXACT_LIMIT`` is per shard; a fixed filter's capacity is shared)."""
        capacity = int(settings.getint(
            "FRONTIER_SEEN_BLOOM_CAPACITY", defaults.FRONTIER_SEEN_BLOOM_CAPACITY
        ))
        bloom = None
        if capacity > 0:
            bloom = bloom_params(
                -(-capacity // shards),
                settings.getfloat("FRONTIER_SEEN_BLOOM_ERROR", defaults.FRONTIER_SEEN_BLOOM_ERROR),
            )
        return cls(
            exact_limit=settings.getint(
                "FRONTIER_SEEN_EXACT_LIMIT", defaults.FRONTIER_SEEN_EXACT_LIMIT
            ),
            error=settings.getfloat("FRONTIER_SEEN_ERROR", defaults.FRONTIER_SEEN_ERROR),
            bloom=bloom,
        )

    @property
    def bucket_bits(self) -> int:
        return bucket_bits(self.exact_limit)

    @property
    def first_capacity(self) -> int:
        return self.first_layer or max(1024, 2 * self.exact_limit)

    def script_config(self) -> list[Any]:
        """The seen-set's part of the scripts' configuration (``CFG[15..17]``)."""
        bits, probes = self.bloom or (0, 0)
        return [
            bits,
            probes,
            [
                self.exact_limit,
                float(self.error),
                self.bucket_bits,
                self.first_capacity,
                self.growth,
                float(self.tightening),
            ],
        ]

    def fingerprint(self) -> str:
        """What every worker of a crawl must agree on."""
        if self.bloom is not None:
            return f"bloom:{self.bloom[0]}:{self.bloom[1]}"
        return (
            f"exact:{self.exact_limit}:{self.bucket_bits}:layers:{self.first_capacity}:"
            f"{self.growth}:{self.tightening!r}:{self.error!r}"
        )

    def layer(self, i: int) -> tuple[float, int, int]:
        """Layer ``i``'s capacity, bits and probes, computed as the script does."""
        cap = float(self.first_capacity) * float(self.growth) ** i
        err = self.error * (1 - self.tightening) * self.tightening**i
        bits = math.ceil(-cap * math.log(err) / (LN2 * LN2))
        if bits > MAX_LAYER_BITS:
            bits = MAX_LAYER_BITS
            cap = float(math.floor(bits * LN2 * LN2 / -math.log(err)))
        return cap, bits, max(1, math.floor(bits / cap * LN2 + 0.5))


@dataclass
class SeenState:
    """What a shard's seen-set holds, from ``{crawl}:seen:info`` (:func:`seen_state`)."""

    exact: int
    layers: list[int]  # URLs taken by each layer begun
    config: SeenConfig

    @property
    def count(self) -> int:
        return self.exact + sum(self.layers)

    def false_positive_rate(self) -> float:
        """The chance that a new URL is taken for seen now, from each layer's fill:
        1 - prod(1 - (1 - e^(-k n / m))^k)."""
        clear = 1.0
        for i, n in enumerate(self.layers):
            _, bits, probes = self.config.layer(i)
            clear *= 1 - (1 - math.exp(-probes * n / bits)) ** probes
        return 1 - clear

    def bloom_bytes(self) -> int:
        """Bytes the layers begun take (each is allocated whole by its first write)."""
        return sum(self.config.layer(i)[1] // 8 for i in range(len(self.layers)))


def seen_state(client: redis.Redis, keys: FrontierKeys, config: SeenConfig) -> SeenState:
    info = {k.decode(): int(v) for k, v in client.hgetall(keys.seen_info).items()}
    begun = info.get("l", 0)
    return SeenState(info.get("x", 0), [info.get(f"n{i}", 0) for i in range(begun)], config)


def seen_memory(client: redis.Redis, keys: FrontierKeys) -> int:
    """Bytes of Redis the shard's seen-set takes (``MEMORY USAGE`` of each of its keys; SCAN, so
    for reports and benchmarks, not for a hot path)."""
    total = 0
    for key in (keys.seen, keys.seen_bloom, keys.seen_info):
        total += client.memory_usage(key, samples=0) or 0
    for prefix in (keys.seen_bucket_prefix, keys.seen_layer_prefix):
        for key in client.scan_iter(match=glob_escape(prefix) + "*", count=1000):
            total += client.memory_usage(key, samples=0) or 0
    return total


def seen_keys(urls: Sequence[str]) -> list[bytes]:
    return [seen_key(u) for u in urls]
