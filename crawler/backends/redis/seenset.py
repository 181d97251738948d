"""A partition's seen-set, with no server-side script: RedisBloom when the server has it, else
an exact set of integer buckets.

Any worker may add to any partition's seen-set (a requisite is claimed by whichever worker meets
it), so the owner's fence (:mod:`crawler.backends.redis.fence`) does not guard it: every add is
atomic on the server by itself, and one call of :meth:`SeenSet.add_many` is one round trip.

**Bloom** (``kind`` ``"bloom"``; the server answers ``BF.*``: Redis 8 has it built in, Redis 7
with ``--loadmodule redisbloom.so``): ``{tag}:s`` is a RedisBloom scalable filter, reserved once
(``BF.RESERVE {tag}:s <error> <capacity> EXPANSION 2``: past ``capacity`` it adds layers twice
as large with tighter bounds, so the error rate holds however many URLs come), then
``BF.MADD`` (which answers per item whether it was new) and ``BF.MEXISTS``; ``BF.CARD`` counts.
A new URL is taken for seen with probability ``error``: it is never crawled.

**Exact** (``kind`` ``"exact"``; Debian's Redis 7, Valkey 8.1): bucket ``b`` (``{tag}:s:<b>``, a
SET) holds the URLs whose 64-bit key (``crawler.frontier.store.url_key``) has ``b`` in its top
``bucket_bits`` bits, each as the key's low 32 bits read as a signed integer: a set of integers
stays an *intset* (a sorted array of 4-byte integers) while it holds at most
``set-max-intset-entries`` (512) members, ~4-5 B per URL against ~64 B per member of a set of
strings. The bucket count is the power of two that puts ~``INTSET_FILL`` (256) URLs in each at
``capacity``; the fullest of thousands then stays under 512. The set is exact up to the
(``bucket_bits`` + 32)-bit fingerprint: at ``capacity`` n = 1 million (12 bits) the expected
number of new URLs ever taken for seen is n^2 / 2^45, ~0.03. An add is one ``MULTI`` of one
``SADD`` per key (its reply says whether the key was new; a key twice in one call is new the
first time only), in one hash tag, so one cluster slot: a transaction pipeline of redis-py's
``RedisCluster`` runs it. Past ``capacity`` the buckets outgrow their intsets and Redis converts
them to hash tables (~50 B per URL): one warning per process says so and that loading
RedisBloom fixes it. Whether the crawl uses one or the other is decided once (by
:func:`has_bloom_module`) and stored by the caller with ``capacity`` (the bucket layout depends
on it): every worker must read the same set.

**The count** of the exact kind is the counter ``{tag}:s:n``. A transaction cannot add a number
that one of its own replies gives without a script, and a second round trip per add would
double the cost of the seen-test, so the ``INCRBY`` of the URLs one call added rides in the
*next* call's transaction (or :meth:`SeenSet.count` or :meth:`SeenSet.flush` sends it): the
counter lags each live :class:`SeenSet` by its last call's new URLs, and a worker killed loses
those from the count (never from the set). ``count`` is for reports; the seen-test never reads
it.

Measured (``bench/seenset.py``: one partition, 1 million keys of distinct URLs added through
``add_many`` in batches of 50 by one client over loopback, error 0.01; "CPU": redis-server's
CPU time per URL, which the shared machine does not inflate; "FP": keys never added that
``contains_many`` calls seen, of 100,000)::

    .venv/bin/python bench/seenset.py [--urls 1000000] [--batch 50] [--error 0.01]
    .venv/bin/python bench/seenset.py --kinds exact --exact-server valkey
    .venv/bin/python bench/seenset.py --capacity 250000

==================================  =============  ============  ======  ======  =====
kind (server)                       MEMORY USAGE   used_memory   adds/s  CPU     FP
==================================  =============  ============  ======  ======  =====
exact (Debian's Redis 7.0)          4.71 B/URL     4.92 B/URL    113 k   1.7 us  0
exact (Valkey 8.1)                  4.23 B/URL     4.42 B/URL    131 k   1.3 us  0
bloom (Redis 7.0 + RedisBloom)      1.38 B/URL     1.65 B/URL    320 k   0.9 us  522
exact, 4 x past capacity (Redis)    49.7 B/URL     57.8 B/URL    117 k   1.6 us  1
bloom, 4 x past capacity            2.86 B/URL     3.09 B/URL    343 k   0.9 us  748
==================================  =============  ============  ======  ======  =====

At capacity every one of the 4,096 exact buckets was an intset; 4 times past it every bucket
was a hash table. The bloom kind took 743 of the million new URLs for seen (0.07 %) while
filling to capacity, and 4,799 when filled 4 times past it (its later layers are larger and
tighter).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice
from typing import Any

import redis
from hiredis import pack_command
from redis.cluster import RedisCluster

from crawler.backends.redis import wire
from crawler.backends.redis.keys import PartitionKeys

log = logging.getLogger(__name__)

INTSET_FILL = 256  # URLs per exact bucket at capacity (set-max-intset-entries is 512)
MAX_BUCKET_BITS = 24  # 16 million buckets: ~4 billion URLs per partition at INTSET_FILL
EXPANSION = 2  # each new layer of a RedisBloom filter holds twice the one before
_U64 = (1 << 64) - 1
NAMES_CACHED = 4096  # exact buckets' packed names kept per seen-set (contains_request)
_outgrown_warned = False  # the exact buckets' past-capacity warning: once per process


def has_bloom_module(client: redis.Redis | RedisCluster) -> bool:
    """Whether the server answers RedisBloom's ``BF.*`` commands (``COMMAND INFO BF.MADD``;
    a cluster's nodes run one build, so one node is asked). Decided once per crawl: the
    answer picks the seen-set's layout, which every worker must share."""
    node: Any = client
    if isinstance(client, RedisCluster):
        node = client.get_redis_connection(client.get_default_node())
    reply = node.execute_command("COMMAND INFO", "BF.MADD")
    return bool(reply) and reply[0] is not None


def bucket_bits(capacity: int) -> int:
    """Top key bits that name an exact bucket: ~``INTSET_FILL`` URLs per bucket at
    ``capacity``."""
    return max(0, min(MAX_BUCKET_BITS, math.ceil(math.log2(max(1, capacity) / INTSET_FILL))))


@dataclass(frozen=True)
class SeenSetConfig:
    """One partition's seen-set: ``capacity`` URLs expected (sizes the exact buckets, or the
    Bloom filter's first layer), ``error`` the Bloom filter's false-positive rate, ``bloom``
    whether it uses ``BF.*`` (:func:`has_bloom_module`, decided once per crawl)."""

    capacity: int
    error: float
    bloom: bool

    def __post_init__(self) -> None:
        if self.capacity < 1 or not 0.0 < self.error < 1.0:
            raise ValueError("a seen-set needs a capacity >= 1 and an error rate in (0, 1)")

    @property
    def bucket_bits(self) -> int:
        return bucket_bits(self.capacity)


class SeenSet:
    """The seen-set of one partition (see the module): ``add_many`` marks 64-bit URL keys seen
    and says which were new, in one atomic round trip, whichever worker calls it."""

    def __init__(
        self, client: redis.Redis | RedisCluster, keys: PartitionKeys, config: SeenSetConfig
    ) -> None:
        self.client = client
        self.keys = keys
        self.config = config
        self.kind = "bloom" if config.bloom else "exact"
        self._shift = 64 - config.bucket_bits
        self._bucket_prefix = keys.seen_bucket_prefix
        self._counter = keys.seen_count
        self._reserved = False  # BF.RESERVE sent (bloom)
        self._unsent = 0  # URLs added whose INCRBY is not sent yet (exact)
        self._lock = threading.Lock()
        self._names: dict[int, str] = {}  # bucket -> its name, packed (contains_request)

    # -- the exact kind's layout ---------------------------------------------------------------

    def bucket(self, key: int) -> str:
        """The exact bucket of a 64-bit key: its top ``bucket_bits`` bits."""
        return self._bucket_prefix + str((key & _U64) >> self._shift)

    @staticmethod
    def member(key: int) -> int:
        """The key's low 32 bits as a signed integer: what keeps a bucket an intset."""
        return _members((key,))[0]

    # -- the seen-set --------------------------------------------------------------------------

    def add_many(self, keys: Sequence[int]) -> list[bool]:
        """Mark ``keys`` seen; True for each that was new (a key twice: new the first time).
        One round trip, atomic on the server."""
        if not keys:
            return []
        if self.config.bloom:
            return self._bloom_add(keys)
        return self._exact_add(keys)

    def contains_many(self, keys: Sequence[int]) -> list[bool]:
        """Whether each key was added (bloom: or is a false positive). One round trip."""
        return contains_across(self.client, [(self, keys)])[0]

    def contains_commands(
        self, keys: Sequence[int]
    ) -> tuple[list[tuple[Any, ...]], Callable[[Iterator[Any]], list[bool]]]:
        """The commands that test ``keys``: ``BF.MEXISTS`` (bloom), or one ``SMISMEMBER``
        per exact bucket the keys fall in; and what reads the answers, in the order of
        ``keys``, from their replies (redis-py's path; :meth:`contains_request` packs the
        same commands for less)."""
        if self.config.bloom:
            return [("BF.MEXISTS", self.keys.seen, *map(_item, keys))], _bloom_read
        buckets, members = self._group(keys)
        prefix = self._bucket_prefix
        commands = [("SMISMEMBER", prefix + str(b), *members[b]) for b in buckets]
        return commands, partial(_read_grouped, len(keys), list(buckets.values()))

    def contains_request(
        self, keys: Sequence[int]
    ) -> tuple[str | bytes, int, Callable[[Iterator[Any]], list[bool]]]:
        """:meth:`contains_commands` packed (RESP, as ``hiredis.pack_command`` packs them):
        the request, its number of commands and the reader of their replies. A page's keys
        in a partition mostly fall in a bucket each (16 links in 512 buckets: 4 pages in 5),
        so the exact kind sends ~12 one-member ``SMISMEMBER`` a page: written here as text
        with each bucket's name cached, ~5.3k instructions a command against ~10k through a
        tuple and ``pack_command``; nor is the grouping by bucket nor a ``zip`` per reply
        needed then."""
        if self.config.bloom:
            commands, read = self.contains_commands(keys)
            return b"".join([pack_command(c) for c in commands]), len(commands), read
        shift, names = self._shift, self._names
        tops = [(key & _U64) >> shift for key in keys]
        if len(set(tops)) == len(tops):  # a bucket each (most pages' keys): one member each
            out = []
            for b, key in zip(tops, keys, strict=True):  # (member: its low 32 bits, signed)
                m = str(((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000)
                name = names.get(b) or self._name(b)
                out.append(f"*3\r\n$10\r\nSMISMEMBER\r\n{name}${len(m)}\r\n{m}\r\n")
            return "".join(out), len(keys), partial(_read_singles, len(keys))
        buckets, members = self._group(keys)
        out = []
        for b, ms in members.items():
            out.append(f"*{len(ms) + 2}\r\n$10\r\nSMISMEMBER\r\n{names.get(b) or self._name(b)}")
            for m in map(str, ms):
                out.append(f"${len(m)}\r\n{m}\r\n")
        read = partial(_read_grouped, len(keys), list(buckets.values()))
        return "".join(out), len(members), read

    def _group(self, keys: Sequence[int]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        """The keys by exact bucket: their positions in ``keys``, and their members."""
        shift = self._shift
        buckets: dict[int, list[int]] = {}
        members: dict[int, list[int]] = {}
        for at, (key, member) in enumerate(zip(keys, _members(keys), strict=True)):
            b = (key & _U64) >> shift
            positions = buckets.get(b)
            if positions is None:
                buckets[b], members[b] = [at], [member]
            else:
                positions.append(at)
                members[b].append(member)
        return buckets, members

    def _name(self, b: int) -> str:
        """Bucket ``b``'s name as a RESP bulk string (cached, up to ``NAMES_CACHED``)."""
        if len(self._names) >= NAMES_CACHED:
            self._names.clear()
        name = self._bucket_prefix + str(b)
        packed = self._names[b] = f"${len(name.encode())}\r\n{name}\r\n"
        return packed

    def count(self) -> int:
        """URLs added (bloom: ``BF.CARD``, which misses the false positives; exact: the
        counter, with this object's own unsent additions sent first)."""
        return count_across(self.client, [self])[0]

    def queue_count(self, pipe: Any) -> Callable[[Any], int]:
        """Queue the reading of :meth:`count` on ``pipe`` (the exact kind sends its unsent
        additions with it); returns what reads the count from its reply (an exception when
        it failed: the unsent additions are kept for the next call)."""
        unsent = 0
        if self.config.bloom:
            pipe.execute_command("BF.CARD", self.keys.seen)
        else:
            with self._lock:
                unsent, self._unsent = self._unsent, 0
            if unsent:
                pipe.incrby(self._counter, unsent)
            else:
                pipe.get(self._counter)

        def read(reply: Any) -> int:
            if isinstance(reply, Exception):
                self._give_back(unsent)
                raise reply
            if unsent:
                self._check_capacity(int(reply))
            return int(reply or 0)

        return read

    def flush(self) -> int | None:
        """Send the count of the URLs the last ``add_many`` added (exact kind: see the module);
        the counter's new value, or None when there was nothing to send. A worker done with a
        partition's seen-set calls it."""
        with self._lock:
            unsent, self._unsent = self._unsent, 0
        if not unsent:
            return None
        try:
            total = int(self.client.incrby(self._counter, unsent))
        except BaseException:
            self._give_back(unsent)
            raise
        self._check_capacity(total)
        return total

    # -- the two kinds -------------------------------------------------------------------------

    def _bloom_add(self, keys: Sequence[int]) -> list[bool]:
        pipe = self.client.pipeline(transaction=False)
        reserving = not self._reserved
        if reserving:  # before the first add: BF.MADD would make a filter of its own defaults
            pipe.execute_command(
                "BF.RESERVE",
                self.keys.seen,
                self.config.error,
                self.config.capacity,
                "EXPANSION",
                EXPANSION,
            )
        pipe.execute_command("BF.MADD", self.keys.seen, *map(_item, keys))
        replies = pipe.execute(raise_on_error=False)
        if reserving:
            reserved = replies.pop(0)
            if isinstance(reserved, Exception) and "exists" not in str(reserved):
                raise reserved  # another worker reserving first is the expected race
            self._reserved = True
        added = replies[0]
        if isinstance(added, Exception):
            raise added
        return [bool(x) for x in added]

    def _exact_add(self, keys: Sequence[int]) -> list[bool]:
        with self._lock:
            unsent, self._unsent = self._unsent, 0
        pipe = self.client.pipeline(transaction=True)
        for key, member in zip(keys, _members(keys), strict=True):
            pipe.sadd(self.bucket(key), member)
        if unsent:
            pipe.incrby(self._counter, unsent)
        try:
            replies = pipe.execute()
        except BaseException:
            self._give_back(unsent)
            raise
        new = [bool(x) for x in replies[: len(keys)]]
        with self._lock:
            self._unsent += sum(new)
        if unsent:
            self._check_capacity(int(replies[-1]))
        return new

    def _give_back(self, unsent: int) -> None:
        with self._lock:
            self._unsent += unsent

    def _check_capacity(self, total: int) -> None:
        global _outgrown_warned
        if total > self.config.capacity and not _outgrown_warned:
            _outgrown_warned = True
            log.warning(
                "seen-set %s holds %d URLs, past its capacity of %d: Redis converts its exact "
                "buckets from intsets (~5 B per URL) to hash tables (~50 B per URL); load "
                "RedisBloom into the server (Redis 8 has it built in) so that new crawls "
                "keep a Bloom filter instead",
                self.keys.seen,
                total,
                self.config.capacity,
            )


def _item(key: int) -> bytes:
    """A key as a Bloom filter item: its 8 bytes (what ``url_key`` read)."""
    return key.to_bytes(8, "big", signed=True)


def _bloom_read(replies: Iterator[Any]) -> list[bool]:
    return [bool(x) for x in next(replies)]


def _members(keys: Iterable[int]) -> list[int]:
    """Each key's low 32 bits as a signed integer (an exact bucket's member: an intset's)."""
    return [((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000 for key in keys]


def _read_grouped(n: int, buckets: list[list[int]], replies: Iterator[Any]) -> list[bool]:
    """The answers of one ``SMISMEMBER`` per bucket (``buckets``: the keys' positions in
    each), in the order of the ``n`` keys."""
    out = [False] * n
    for positions in buckets:
        for at, x in zip(positions, next(replies), strict=True):
            if x:
                out[at] = True
    return out


def _read_singles(n: int, replies: Iterator[Any]) -> list[bool]:
    """The answers of ``n`` one-member ``SMISMEMBER`` replies, in order."""
    answers = list(chain.from_iterable(islice(replies, n)))
    if len(answers) != n:
        raise ValueError(f"{len(answers)} answers to {n} one-member tests")
    return list(map(bool, answers))


def contains_across(
    client: Any, tests: Sequence[tuple[SeenSet, Sequence[int]]]
) -> list[list[bool]]:
    """The seen-tests of several partitions in one round trip (:func:`wire.execute` on one
    Redis; a cluster client's pipeline sends each node its part): for each (seen-set, keys),
    whether each key was added. A read: sent again after a lost connection, it is the same
    read."""
    tests = list(tests)
    if not any(keys for _, keys in tests):
        return [[] for _ in tests]
    requests: list[str | bytes] = []
    count = 0
    readers = []
    for seen, keys in tests:
        if keys:
            request, n, read = seen.contains_request(keys)
            requests.append(request)
            count += n
            readers.append(read)
        else:
            readers.append(None)
    if all(type(r) is str for r in requests):  # (the exact kind's: encoded once)
        request = "".join(requests).encode()  # type: ignore[arg-type]
    else:
        request = b"".join([r.encode() if isinstance(r, str) else r for r in requests])

    def through_redis_py() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for seen, keys in tests:
            for command in seen.contains_commands(keys)[0] if keys else ():
                pipe.execute_command(*command)
        return pipe.execute()

    replies = wire.execute_packed(client, request, count, through_redis_py)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    it = iter(replies)
    return [read(it) if read is not None else [] for read in readers]


def count_across(client: Any, seen_sets: Sequence[SeenSet]) -> list[int]:
    """:meth:`SeenSet.count` of several seen-sets in one pipeline (one round trip)."""
    if not seen_sets:
        return []
    pipe = client.pipeline(transaction=False)
    readers = [seen.queue_count(pipe) for seen in seen_sets]
    try:
        replies: list[Any] = pipe.execute(raise_on_error=False)
    except Exception as exc:  # every reader sees it: each keeps its unsent additions
        replies = [exc] * len(readers)
    counts, error = [], None
    for read, reply in zip(readers, replies, strict=True):
        try:
            counts.append(read(reply))
        except Exception as exc:
            error = error or exc
    if error is not None:
        raise error
    return counts


class OwnerSeenSet(SeenSet):
    """The seen-set as a partition's owner uses it: ``contains_many`` to test a batch of links
    (one round trip, nothing written), then ``queue_adds`` of the new ones on the owner's
    fenced writer, so that a URL becomes seen in the same atomic call that queues it: a worker
    killed in between leaves it neither seen nor queued, and the page that found it, not yet
    acknowledged either, finds it again."""

    owed = 0  # URLs queued on the writer whose count is not (exact kind: see queue_owed)

    def queue_adds(self, writer: Any, keys: Sequence[int]) -> None:
        if not keys:
            return
        if self.config.bloom:
            if not self._reserved:
                self._reserve()
            writer.write("BF.MADD", self.keys.seen, *map(_item, keys))
            return
        prefix, shift, members = self._bucket_prefix, self._shift, {}
        for key in keys:  # by bucket, each the key's low 32 bits, signed
            member = ((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000
            members.setdefault((key & _U64) >> shift, []).append(member)
        for b, ms in members.items():
            writer.write("SADD", prefix + str(b), *ms)
        self.owed += len(keys)

    def queue_owed(self, writer: Any) -> bool:
        """Queue the ``INCRBY`` of the URLs :meth:`queue_adds` queued since the last one.
        The owner sends it now and then, not with every add (each write of a fenced call
        costs Redis as much as a small command): the counter lags the set by what the owner
        added since, which its own :meth:`count` includes, and a worker killed loses that
        from the count (never from the set). Returns whether there was any."""
        if not self.owed:
            return False
        writer.write("INCRBY", self._counter, self.owed)
        self.owed = 0
        return True

    def queue_count(self, pipe: Any) -> Callable[[Any], int]:
        read = super().queue_count(pipe)
        return lambda reply: read(reply) + self.owed

    def _reserve(self) -> None:
        try:
            self.client.execute_command(
                "BF.RESERVE", self.keys.seen, self.config.error, self.config.capacity,
                "EXPANSION", EXPANSION,
            )
        except redis.ResponseError as exc:
            if "exists" not in str(exc):
                raise
        self._reserved = True
