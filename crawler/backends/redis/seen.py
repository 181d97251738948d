"""The frontier's seen-test in Redis: a URL's 8-byte key, and the seen-set kept as a SET or, for
a crawl too big for one (``FRONTIER_SEEN_BLOOM_CAPACITY``), as a Bloom filter.

The scripts test and add inside ``add`` (``frontier_lua``'s ``seen_add``); this module sizes the
filter, computes the bits of a key the way the script does, and marks keys seen outside the
scripts (:meth:`RedisFrontier.mark_seen`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from hashlib import blake2b

import redis

from crawler.backends.redis.keys import FrontierKeys


def seen_key(url: str) -> bytes:
    """The seen-set member of a normalized URL: the same 64-bit blake2b key as
    ``store.url_key`` (``url_key(url).to_bytes(8, "big", signed=True)``), as 8 raw bytes so a
    SET member costs ~64 bytes in Redis."""
    return blake2b(url.encode(), digest_size=8).digest()


def bloom_params(capacity: int, error: float) -> tuple[int, int]:
    """Bits and probes of a Bloom filter holding ``capacity`` keys at false-positive rate
    ``error``: m = -n ln p / (ln 2)^2 (at most Redis's 2^32-bit string), k = m/n ln 2."""
    if capacity < 1 or not 0.0 < error < 1.0:
        raise ValueError("a Bloom filter needs a capacity >= 1 and an error rate in (0, 1)")
    bits = min(2**32, math.ceil(-capacity * math.log(error) / math.log(2) ** 2))
    return bits, max(1, round(bits / capacity * math.log(2)))


def bloom_offsets(key: bytes, bits: int, probes: int) -> list[int]:
    """The bits of ``key`` (an 8-byte seen key), as the add script computes them."""
    h1, h2 = int.from_bytes(key[:4], "big"), int.from_bytes(key[4:8], "big")
    return [(h1 + i * h2) % bits for i in range(probes)]


def mark_seen(
    client: redis.Redis, keys: FrontierKeys, bloom: tuple[int, int] | None, urls: Sequence[str]
) -> int:
    """Mark ``urls`` seen (one round trip); returns how many were new. ``bloom``: the filter's
    ``(bits, probes)``, or None for the exact SET."""
    if bloom is None:
        return int(client.sadd(keys.seen, *[seen_key(u) for u in urls])) if urls else 0
    pipe = client.pipeline(transaction=False)  # one BITFIELD per key, counted as the script does
    for url in urls:
        offsets = bloom_offsets(seen_key(url), *bloom)
        pipe.execute_command(
            "BITFIELD", keys.seen_bloom, *[a for o in offsets for a in ("SET", "u1", o, 1)]
        )
    fresh = sum(1 for old in pipe.execute() if 0 in old)
    if fresh:
        client.incrby(keys.seen_bloom_count, fresh)
    return fresh
