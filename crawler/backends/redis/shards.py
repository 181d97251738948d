"""Mercator's host splitter: which partition of a crawl's hosts a host is in.

Partitions (and ``FRONTIER_SHARDS`` shards of the per-address keys) each sit under a hash tag
of their own, so a Redis Cluster spreads them over its masters. The key is the host's
registered domain (``docs.example.co.uk`` -> ``example.co.uk``), as Nutch's
``partition.url.mode=byDomain``: whatever is counted or blocked per registered domain is met in
one place. The hash is blake2b (stable across processes, unlike ``hash()``): every worker sends
a host to the same partition, forever, so their number is fixed when the crawl is created.
"""

from __future__ import annotations

from hashlib import blake2b
from itertools import islice
from struct import Struct

from crawler.frontier.urls import registered_domain_function

CACHE_HOSTS = 1 << 18  # hosts whose shard is remembered: most links go to hosts seen before
# the hash, ready: a copy and a precompiled read cost ~1.9k instructions less a host than
# blake2b(..., digest_size=8) and int.from_bytes, whose keyword arguments are parsed each call
_HASH = blake2b(digest_size=8)
_U64 = Struct(">Q").unpack


class ShardMap:
    """host -> shard index, for ``count`` shards. Remembers up to ``CACHE_HOSTS`` hosts (the
    registered-domain lookup costs ~3-10 us; a dict hit ~50 ns); when full, the older half is
    forgotten (a dict keeps insertion order), so the hosts met often stay."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._domain_of = registered_domain_function() if count > 1 else None
        self._cache: dict[str, int] = {}

    def __call__(self, host: str) -> int:
        shard = self._cache.get(host)
        if shard is None:
            shard = self._shard(host)
            if len(self._cache) >= CACHE_HOSTS:
                for old in list(islice(self._cache, CACHE_HOSTS // 2)):
                    del self._cache[old]  # cheaper than an LRU's bookkeeping on every hit
            self._cache[host] = shard
        return shard

    def _shard(self, host: str) -> int:
        """The hash of the host's registered domain, or of the host itself when its suffix is
        not a public one (``www.site1.test``, an intranet name): the public-suffix list would
        call every such host one domain (``test``) and put them all in one shard."""
        if self._domain_of is None:
            return 0
        domain = self._domain_of(host)
        key = domain if "." in domain else host
        h = _HASH.copy()  # (never updated itself)
        h.update(key.lower().encode())
        return _U64(h.digest())[0] % self.count
