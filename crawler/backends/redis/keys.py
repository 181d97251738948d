"""Every Redis key of a crawl, named in one place.

A crawl's keys share the hash tag ``{<crawl>}`` (``FRONTIER_REDIS_KEY``, else the site's name):
Redis Cluster keeps every key of one tag in one slot, and two crawls share a Redis without
meeting. No module builds a key name itself: it asks :class:`CrawlKeys` (the crawl-wide state),
:class:`PartitionKeys` (one partition of the crawl's hosts, under a tag of its own) or
:class:`NeardupKeys`, and a script is given every key it touches.

Shards (``FRONTIER_SHARDS``, :mod:`crawler.backends.redis.shards`): the per-address politeness
keys (:mod:`crawler.backends.redis.addresses`) and the near-duplicate anchor postings are spread
over S hash tags, :meth:`CrawlKeys.shard_prefixes` (one shard: the crawl's own tag; S > 1: shard
``i``'s tag is ``{<crawl>:<i>.<n>}``, :func:`shard_tag`). The names and formats below are those
crawls were started with: renaming one would orphan a stored crawl.

The crawl's own (:class:`CrawlKeys`):

==========================  ======  ===========================================================
``{key}:meta``              HASH    ``layout`` version and the settings fingerprint
``{key}:ctl``               HASH    the operator's controls: ``paused``, ``deadline`` (Redis
                                    time), ``budget`` (bytes); ``bytes`` downloaded so far
``{key}:blocked``           HASH    ``h:<host>`` / ``d:<domain>`` -> when the operator blocked it
``{key}:dropped``           HASH    the same names -> queued URLs their owners dropped for it
``{key}:wake``              PUBSUB  wake-ups of idle workers (``ctl``: an operator acted)
``{key}:handover``          PUBSUB  a worker handed partitions back: the others beat at once
``{key}:totals``            HASH    every worker's counters merged
``{key}:workers``           HASH    worker id -> JSON heartbeat
``{key}:members``           ZSET    worker -> its last beat (Redis ``TIME``, ms): the workers that
                                    share the partitions (:mod:`crawler.backends.redis.ownership`)
``{key}:parts``             HASH    partition -> ``<queued> <in flight>`` as its owner said at
                                    its last beat: a worker whose own partitions are done
                                    keeps the crawl open while another's are not
``{key}:scope``             SET     hosts the seeds brought into scope
``{key}:robots``            HASH    origin -> msgpack robots.txt record
``{key}:robots_failures``   HASH    origin -> consecutive failed fetches of its robots.txt
``{key}:robots_hold:<o>``   STRING  why robots.txt of origin ``<o>`` is not fetched now: a
                                    worker's claim, a retry delay (both expire: PX), given up
``{key}:dns:<host>``        STRING  msgpack DNS answer shared by the fleet (expires with its TTL)
``{key}:dns:<host>:claim``  STRING  the worker looking ``<host>`` up now (expires: DNS_TIMEOUT)
``{key}:nd:...``            ...     the shared near-duplicate detector (:class:`NeardupKeys`)
``<site>:start_urls``       LIST    seeds pushed to a running crawl (scrapy-redis's key, no tag)
==========================  ======  ===========================================================


The near-duplicate detector's (:class:`NeardupKeys`, under ``{key}:nd``; the small hashes are
bucketed so they stay in Redis's compact listpack encoding; the formats are ``neardup_codec``'s):

========================  ==================================================================
``:u:<n>``                HASH: 8 bytes of blake2b(URL) -> id (originals and duplicates); the
                          bucket ``n`` is their top bits, the field the bytes after those it
                          gives whole
``:f:<n>``                HASH: 8 bytes of the content fingerprint -> id of its original (as
                          ``:u:``)
``:pend``                 HASH: store key -> posting element and anchors of each original
                          whose anchor postings may not be written yet (``neardup_anchors``)
``:recent``               LIST: the last originals stored (store key, anchors), newest first,
                          that the commit checks a decision against (``:v`` ``floor``: the
                          newest dropped)
``:o:<id/1024>``          STRING: per id, the fingerprint (8 bytes) and host id (4) of its
                          record; zeros: none (duplicates, replaced originals)
``:r:<id/1024>``          HASH: id -> its record: fingerprint (8), host id (4), URL (length,
                          2 bytes, then UTF-8), title, cover and the packed sketch
                          (``neardup_codec.encode_sketch``)
``:h``/``:hnext``         HASH host -> host id, and the last id given
``:t:<hid>``              STRING: the host's template blocks (4 bytes each), in the order learned
``:tp``                   HASH: host id -> pages its model learned x 2^24 + template length
``:ts:<hid>``             STRING: the model's snapshot at its last pruning (pages, template
                          length, the blocks counted and their counts, packed)
``:tl:<hid>``             LIST: the pages learned since the snapshot, each its packed blocks
``:hc``                   HASH: host -> pages checked x 2^26 + duplicates among them (the
                          frontier's penalty, shared)
``:v``                    HASH: ``seq`` (commits so far: the order decisions are equivalent
                          to), ``forget`` (originals replaced so far), ``floor`` (the
                          newest store key dropped from ``:recent``), ``epoch`` (set by the
                          first commit: a worker drops its copies when it changes)
``:next``                 the last id given
``:params``               the layout and the settings every worker must share
``{<crawl>:nd:<g>.<n>}:a:<b>``  HASH: the anchor postings, spread over their own hash tags
                          (``neardup_anchors``)
========================  ==================================================================
"""

from __future__ import annotations

from functools import cache
from typing import Any

from redis.crc import key_slot as _crc_slot

START_URLS_KEY = "%(name)s:start_urls"  # scrapy-redis's key for seeding a running crawl


@cache
def key_slot(tag: bytes) -> int:
    """The Redis Cluster slot of a hash tag (CRC16 mod 16384, as redis-py computes it)."""
    return _crc_slot(tag)


def crawl_key(settings: Any, site: str) -> str:
    """The crawl's name in Redis: ``FRONTIER_REDIS_KEY``, else the site's (spider's) name."""
    return settings.get("FRONTIER_REDIS_KEY") or site


def glob_escape(text: str) -> str:
    """``text`` as a literal in a SCAN ``MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class PartitionKeys:
    """The keys of one partition of a crawl's hosts (layout 6), under the partition's own hash
    tag (:func:`shard_tag`: P partitions on P equal masters land one on each). Its owner
    (:mod:`crawler.backends.redis.ownership`) is the only writer of all but ``inbox`` and
    ``seen``, and writes them through :class:`crawler.backends.redis.fence.FencedWriter`.

    ==========================  ======  ======================================================
    ``{tag}:lease``             STRING  the owner: ``<worker>/<epoch>`` (PX: the lease TTL)
    ``{tag}:epoch``             STRING  ownerships so far (INCR at each claim: the fence)
    ``{tag}:seq``               STRING  the owners' fenced calls applied so far (a call sent
                                        again after a lost reply is applied once)
    ``{tag}:f:<k>``             LIST    front queue ``k`` (0 is the highest): host + entry
    ``{tag}:b:<host>``          LIST    the part of a host's back queue its owner does not
                                        hold in memory (``crawler.backends.redis.entries``)
    ``{tag}:bh``                SET     hosts that have such a list
    ``{tag}:o``                 HASH    entry id -> host + entry: URLs out of the lists (in a
                                        back queue's head in memory, leased, handed back)
    ``{tag}:h``                 HASH    host -> its saved state (admitted URLs, Crawl-delay,
                                        give-ups, next fetch time on Redis's clock)
    ``{tag}:st``                HASH    OPIC: ``<queue>:<identity>`` -> older copies of raised
                                        URLs left in that front queue (skipped when met)
    ``{tag}:s``/``{tag}:s:<b>`` BF/SET  the seen-set (``crawler.backends.redis.seenset``): a
                                        Bloom filter, or exact buckets of integers
    ``{tag}:s:n``               STRING  the exact seen-set's count
    ``{tag}:in``                STREAM  the inbox: links and cash other workers found for the
                                        partition's hosts (consumer group ``owner``)
    ==========================  ======  ======================================================
    """

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
    """The keys of the shared near-duplicate detector's state (see the module's table)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.template_meta = prefix + ":tp"
        self.versions = prefix + ":v"
        self.host_ids = prefix + ":h"
        self.last_host_id = prefix + ":hnext"
        self.host_counts = prefix + ":hc"
        self.last_id = prefix + ":next"
        self.params = prefix + ":params"
        self.urls_prefix = prefix + ":u:"
        self.fingerprints_prefix = prefix + ":f:"
        self.pending = prefix + ":pend"
        self.recent = prefix + ":recent"
        self.table_prefix = prefix + ":o:"
        self.records_prefix = prefix + ":r:"
        self.template_prefix = prefix + ":t:"
        self.snapshot_prefix = prefix + ":ts:"
        self.lessons_prefix = prefix + ":tl:"

    def template(self, hid: int) -> str:
        return self.template_prefix + str(hid)

    def snapshot(self, hid: int) -> str:
        return self.snapshot_prefix + str(hid)

    def lessons(self, hid: int) -> str:
        return self.lessons_prefix + str(hid)

    def table(self, chunk: int) -> str:
        """A chunk of the record table (``neardup.SLOTS`` ids)."""
        return self.table_prefix + str(chunk)

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
    """Every key of one crawl (see the module's tables).

    ``crawl`` is the crawl's name (its hash tag); ``site`` the spider's name, which only
    scrapy-redis's seeds list uses (default: the crawl's name); ``shards`` how many hash tags
    the per-address keys are spread over (``FRONTIER_SHARDS``)."""

    def __init__(self, crawl: str, site: str | None = None, shards: int = 1) -> None:
        if not crawl or any(c in crawl for c in "{}"):
            raise ValueError(f"frontier key {crawl!r} must be non-empty, without braces")
        if shards < 1:
            raise ValueError("a crawl has at least one shard")
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
        self.seeds = START_URLS_KEY % {"name": site or crawl}

    @classmethod
    def from_settings(cls, settings: Any, site: str) -> CrawlKeys:
        shards = int(settings.get("FRONTIER_SHARDS") or 1)
        return cls(crawl_key(settings, site), site, shards)

    def shard_prefixes(self) -> list[str]:
        """The hash-tag prefix (``{tag}``) of each shard, in shard order: the one place that
        picks them (one shard: the crawl's own)."""
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
        # and the near-duplicate anchor postings' own tags ({<crawl>:nd:<g>.<n>})
        return [glob_escape(tag) + ":*" for tag in tags] + [glob_escape("{" + self.name) + ":nd:*"]


SLOTS = 16384  # Redis Cluster's hash slots


def shard_tag(crawl: str, index: int, count: int) -> str:
    """The hash tag of shard ``index`` of ``count``: ``<crawl>:<index>.<n>`` with the first
    ``n`` whose cluster slot lies in the index-th count-th of the slots. Equal slot ranges
    are what ``redis-cli --cluster create`` gives its masters, so S shards on S masters (or
    a multiple) spread evenly; growing the cluster moves whole shards (a slot each)."""
    low, high = index * SLOTS // count, (index + 1) * SLOTS // count
    for n in range(SLOTS * 64):
        tag = f"{crawl}:{index}.{n}"
        if low <= key_slot(tag.encode()) < high:
            return tag
    raise ValueError(f"no tag for shard {index} of {count}")  # pragma: no cover - CRC16 is
    # uniform: a range of 16384/count slots is met within a few dozen tries
