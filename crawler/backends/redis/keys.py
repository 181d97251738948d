"""Every Redis key of a crawl, named in one place: no module builds a key name itself.

A crawl's keys share the hash tag ``{<crawl>}`` (``FRONTIER_REDIS_KEY``, else the site's name),
so Redis Cluster keeps them in one slot and two crawls share a Redis without meeting; each
partition of the hosts has a tag of its own. Renaming a key would orphan a stored crawl. What
each key holds: docs/reference/redis-keys.md (tests/test_redis_keys.py checks it is complete).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from redis.crc import key_slot as _crc_slot

START_URLS_KEY = "%(name)s:start_urls"  # scrapy-redis's key for seeding a running crawl
key_slot = cache(_crc_slot)  # the Redis Cluster slot of a hash tag


def crawl_key(settings: Any, site: str) -> str:
    """The crawl's name in Redis: ``FRONTIER_REDIS_KEY``, else the site's (spider's) name."""
    return settings.get("FRONTIER_REDIS_KEY") or site


def crawler_key(crawler: Any) -> str:
    """:func:`crawl_key` of a Scrapy crawler: its settings and its spider's name."""
    return crawl_key(crawler.settings, getattr(crawler.spidercls, "name", None) or "crawl")


def address_keys(tag: str, address: str) -> list[str]:
    """The keys of a server address's shared politeness (``crawler.backends.redis.addresses``)
    on the shard whose hash-tag prefix is ``tag``."""
    return [f"{tag}:{kind}:{address}" for kind in ("ip", "ipf", "ipw", "ipb", "ipm")]


def glob_escape(text: str) -> str:
    """``text`` as a literal in a SCAN ``MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class PartitionKeys:
    """The keys of one partition of a crawl's hosts, under its own hash tag. Its owner is the
    only writer of all but ``inbox`` and ``seen``, through a fenced writer."""

    def __init__(self, crawl: str, index: int, count: int) -> None:
        if not 0 <= index < count:
            raise ValueError(f"no partition {index} in a crawl of {count}")
        self.index = index
        self.tag = shard_tag(crawl, index, count)
        p = self.prefix = "{" + self.tag + "}"
        self.lease = p + ":lease"
        self.epoch = p + ":epoch"
        self.seq = p + ":seq"
        self.front_prefix = p + ":f:"
        self.back_prefix = p + ":b:"
        self.back_hosts = p + ":bh"
        self.out = p + ":o"
        self.hosts = p + ":h"
        self.stale = p + ":st"
        self.seen = p + ":s"
        self.seen_bucket_prefix = p + ":s:"
        self.seen_count = p + ":s:n"
        self.inbox = p + ":in"

    def front(self, priority: int) -> str:
        return self.front_prefix + str(priority)

    def back(self, host: str) -> str:
        return self.back_prefix + host


class NeardupKeys:
    """The keys of the shared near-duplicate detector's state."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.versions = prefix + ":v"
        self.host_ids = prefix + ":h"
        self.last_host_id = prefix + ":hnext"
        self.host_counts = prefix + ":hc"
        self.params = prefix + ":params"
        self.urls_prefix = prefix + ":u:"
        self.fingerprints_prefix = prefix + ":f:"
        self.records_prefix = prefix + ":r:"
        self.template_prefix = prefix + ":t:"
        self.snapshot_prefix = prefix + ":ts:"
        self.lessons_prefix = prefix + ":tl:"
        self.anchors_prefix = prefix + ":a:"

    def anchors(self, bucket: int) -> str:
        """A bucket of the anchor postings."""
        return self.anchors_prefix + str(bucket)

    def template(self, hid: int) -> str:
        return self.template_prefix + str(hid)

    def snapshot(self, hid: int) -> str:
        return self.snapshot_prefix + str(hid)

    def lessons(self, hid: int) -> str:
        return self.lessons_prefix + str(hid)

    def records(self, chunk: int) -> str:
        """A chunk of the records (``neardup.SLOTS`` ids)."""
        return self.records_prefix + str(chunk)

    def pattern(self, kind: str = "") -> str:
        """A SCAN pattern of every key of the detector, or of one ``kind`` (``f``: the
        fingerprint buckets)."""
        return glob_escape(self.prefix) + (f":{kind}:*" if kind else ":*")

    def kind(self, key: bytes | str) -> str:
        """The kind of one of the detector's keys (``u``, ``f``, ``tp``...)."""
        text = key.decode() if isinstance(key, bytes) else key
        return text[len(self.prefix) + 1 :].split(":")[0]


class CrawlKeys:
    """Every key of one crawl.

    ``crawl`` is the crawl's name (its hash tag); ``site`` the spider's name, which only
    scrapy-redis's seeds list uses (default: the crawl's name); ``shards`` how many hash tags
    the per-address keys are spread over (``FRONTIER_SHARDS``)."""

    def __init__(self, crawl: str, site: str | None = None, shards: int = 1) -> None:
        if not crawl or any(c in crawl for c in "{}"):
            raise ValueError(f"frontier key {crawl!r} must be non-empty, without braces")
        self.name = crawl
        self.shard_count = shards
        self.prefix = "{" + crawl + "}"
        p = self.prefix
        self.meta = p + ":meta"
        self.controls = p + ":ctl"
        self.blocked = p + ":blocked"
        self.dropped = p + ":dropped"  # what the owners dropped for each block
        self.wake = p + ":wake"  # a pub/sub channel
        self.handover = p + ":handover"  # a pub/sub channel: partitions were handed back
        self.totals = p + ":totals"
        self.workers = p + ":workers"
        self.members = p + ":members"  # the partitions' owners, by their last beat
        self.partitions = p + ":parts"  # partition -> its work as its owner last said
        self.scope = p + ":scope"
        self.robots = p + ":robots"
        self.robots_failures = p + ":robots_failures"
        self.robots_hold = p + ":robots_hold:"  # + an origin: its fetch held (robots.py)
        self.dns = p + ":dns:"  # + a host name: its shared DNS answer (PX: the answer's TTL)
        self.warc_digests = p + ":warc_digests"
        self.seeds = START_URLS_KEY % {"name": site or crawl}

    def shard_prefixes(self) -> list[str]:
        """The hash-tag prefix (``{tag}``) of each shard, in shard order (one: the crawl's)."""
        if self.shard_count == 1:
            return [self.prefix]
        count = self.shard_count
        return ["{" + shard_tag(self.name, i, count) + "}" for i in range(count)]

    def neardup(self) -> NeardupKeys:
        return NeardupKeys(self.prefix + ":nd")

    def patterns(self) -> list[str]:
        """SCAN patterns that match every key of the crawl under its tag(s) (not the seeds
        list, which scrapy-redis names)."""
        tags = [self.prefix] + [p for p in self.shard_prefixes() if p != self.prefix]
        return [glob_escape(tag) + ":*" for tag in tags]


SLOTS = 16384  # Redis Cluster's hash slots


def shard_tag(crawl: str, index: int, count: int) -> str:
    """The hash tag of shard ``index`` of ``count``: ``<crawl>:<index>.<n>`` with the first
    ``n`` whose cluster slot lies in the index-th count-th of the slots, as
    ``redis-cli --cluster create`` splits them over its masters: S shards on S masters spread
    evenly."""
    low, high = index * SLOTS // count, (index + 1) * SLOTS // count
    for n in range(SLOTS * 64):
        tag = f"{crawl}:{index}.{n}"
        if low <= key_slot(tag.encode()) < high:
            return tag
    raise ValueError(f"no tag for shard {index} of {count}")  # pragma: no cover - CRC16 is
    # uniform: a range of 16384/count slots is met within a few dozen tries
