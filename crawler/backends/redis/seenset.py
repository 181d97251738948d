"""A partition's seen-set, with no server-side script: RedisBloom when the server has it, else
an exact set of integer buckets.

Two writers: the partition's owner queues the adds of the URLs it queues on its fenced writer
(:meth:`SeenSet.queue_adds`), so that a URL becomes seen in the same atomic call that queues
it; any other worker (a requisite is claimed by whichever worker meets it) adds through
:meth:`SeenSet.add_many`, atomic on the server by itself and one round trip, never sent again
by the client (a claim whose reply was lost is taken as the worker's own: new).

**Bloom** (the server answers ``BF.*``: Redis 8 has it built in, Redis 7 with
``--loadmodule redisbloom.so``): ``{tag}:s`` is a RedisBloom scalable filter, reserved once
(``BF.RESERVE {tag}:s <error> <capacity> EXPANSION 2``: past ``capacity`` it adds layers twice
as large with tighter bounds, so the error rate holds however many URLs come), then
``BF.MADD`` (which answers per item whether it was new) and ``BF.MEXISTS``; ``BF.CARD`` counts.
A new URL is taken for seen with probability ``error``: it is never crawled.

**Exact** (Debian's Redis 7, Valkey 8.1): bucket ``b`` (``{tag}:s:<b>``, a SET) holds the URLs
whose 64-bit key (``crawler.frontier.store.url_key``) has ``b`` in its top ``bucket_bits``
bits, each as the key's low 32 bits read as a signed integer: a set of integers stays an
*intset* (sorted 4-byte integers, ~5 B per URL against ~64 B in a set of strings) while it
holds at most ``set-max-intset-entries`` (512) members. The bucket count is the power of two
that puts ~``INTSET_FILL`` (256) URLs in each at ``capacity``, so the fullest of thousands
stays under 512. The set is exact up to the (``bucket_bits`` + 32)-bit fingerprint: at
``capacity`` n = 1 million (12 bits) the expected number of new URLs ever taken for seen is
n^2 / 2^45, ~0.03. ``add_many`` is one ``MULTI`` of one ``SADD`` per key (its reply says
whether the key was new), in one hash tag, so one cluster slot. Past ``capacity`` the buckets
become hash tables (~50 B per URL): one warning per process says so and that RedisBloom fixes
it. Which kind a crawl uses is decided once (:func:`has_bloom_module`) and stored by the caller
with ``capacity`` (the bucket layout depends on it): every worker must read the same set.

**The count** of the exact kind is the counter ``{tag}:s:n``. A transaction cannot add what one
of its own replies gives without a script, and a second round trip per add would double the
cost, so the URLs a seen-set added are owed: their ``INCRBY`` rides in its next ``add_many``,
its owner's fenced call now and then (:meth:`SeenSet.queue_owed`) or the next :meth:`count`. A
worker killed loses what it owed from the count (never from the set); the seen-test never
reads it. Bytes per URL, adds/s and false positives of both kinds: ``bench/seenset.py``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice
from operator import attrgetter, itemgetter
from typing import Any

import redis
from redis.cluster import RedisCluster

from crawler.backends.redis import wire
from crawler.backends.redis.fence import node_connection, raise_reply_error
from crawler.backends.redis.keys import PartitionKeys

log = logging.getLogger(__name__)

INTSET_FILL = 256  # URLs per exact bucket at capacity (set-max-intset-entries is 512)
MAX_BUCKET_BITS = 24  # 16 million buckets: ~4 billion URLs per partition at INTSET_FILL
EXPANSION = 2  # each new layer of a RedisBloom filter holds twice the one before
_U64 = (1 << 64) - 1
NAMES_CACHED = 4096  # exact buckets' packed names kept per seen-set (_exact_tests)
_SEEN_SET, _BLOOM = itemgetter(0), attrgetter("config.bloom")  # a test's set, a set's kind
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


@dataclass(frozen=True)
class SeenSetConfig:
    """One partition's seen-set: ``capacity`` URLs expected (>= 1: sizes the exact buckets, or
    the Bloom filter's first layer), ``error`` the Bloom filter's false-positive rate, ``bloom``
    whether it uses ``BF.*`` (:func:`has_bloom_module`, decided once per crawl)."""

    capacity: int
    error: float
    bloom: bool

    @property
    def bucket_bits(self) -> int:
        """Top key bits that name an exact bucket: ~``INTSET_FILL`` URLs per bucket."""
        return max(0, min(MAX_BUCKET_BITS, math.ceil(math.log2(self.capacity / INTSET_FILL))))


class SeenSet:
    """The seen-set of one partition (see the module), used by one thread (the frontier's)."""

    def __init__(
        self, client: redis.Redis | RedisCluster, keys: PartitionKeys, config: SeenSetConfig
    ) -> None:
        self.client = client
        self.keys = keys
        self.config = config
        self._shift = 64 - config.bucket_bits
        self._reserved = False  # BF.RESERVE sent (bloom)
        self._owed = 0  # URLs added whose INCRBY is not sent yet (exact)
        self._names: dict[int, str] = {}  # bucket -> its name, packed (_exact_tests)
        self._refusal_said = False  # an add refused inside a claim's EXEC: logged once

    def _bucket(self, key: int) -> str:
        """The exact bucket of a 64-bit key: its top ``bucket_bits`` bits."""
        return self.keys.seen_bucket_prefix + str((key & _U64) >> self._shift)

    # -- any worker ----------------------------------------------------------------------------

    def add_many(self, keys: Sequence[int]) -> list[bool]:
        """Mark ``keys`` seen; True for each that was new (a key twice: new the first time).
        Atomic on the server; one round trip (and a ``BF.RESERVE`` the first time).

        A claim: whoever gets True fetches the URL (a page requisite). So it is sent once
        (:meth:`_claim`): sent again after a lost reply, the adds that landed the first time
        would answer "seen" to the worker that made them, and nobody would fetch the URL. A
        claim whose reply was lost is of unknown outcome, and taken as this worker's own:
        every key new (a duplicate fetch at worst, never a lost one). Redis not reached at
        all raises."""
        if not keys:
            return []
        if self.config.bloom:
            self._reserve()
            replies = self._claim([("BF.MADD", *self._items(keys))], len(keys))
            if replies is None:
                return _firsts(keys)
            return self._answers(replies[0], keys)
        owed = self._owed  # (sent with these adds: no longer owed once they went through)
        commands: list[tuple[Any, ...]] = [("MULTI",)]
        commands += [
            ("SADD", self._bucket(k), m) for k, m in zip(keys, _members(keys), strict=True)
        ]
        if owed:
            commands.append(("INCRBY", self.keys.seen_count, owed))
        commands.append(("EXEC",))
        replies = self._claim(commands, len(keys))
        if replies is None:  # (its INCRBY taken as applied: the count misses it at worst)
            new = _firsts(keys)
            self._owed += sum(new) - owed
            return new
        done = replies[-1]
        new = self._answers(done[: len(keys)], keys)
        if owed and isinstance(done[-1], Exception):  # (not applied: still owed)
            self._refused(done[-1], "its count's INCRBY")
            owed = 0
        self._owed += sum(new) - owed
        if owed:
            self._check_capacity(int(done[-1]))
        return new

    def _answers(self, replies: Sequence[Any], keys: Sequence[int]) -> list[bool]:
        """The claim's answer for each key from its add's reply. An add Redis refused as its
        transaction ran (a bucket of another type: ``WRONGTYPE``), when the others landed, is
        taken as new, as a claim of unknown outcome is: raised, the claim made again would
        find the others seen, and nobody would fetch them. Said once."""
        if not any(isinstance(r, Exception) for r in replies):
            return [bool(r) for r in replies]
        self._refused(next(r for r in replies if isinstance(r, Exception)), "adds")
        firsts = _firsts(keys)
        return [firsts[i] if isinstance(r, Exception) else bool(r) for i, r in enumerate(replies)]

    def _refused(self, error: Exception, what: str) -> None:
        if not self._refusal_said:
            self._refusal_said = True
            log.error(
                "Redis refused %s of a claim in seen-set %s (%s): its URLs are taken as new, "
                "and a key of another type there needs an operator",
                what,
                self.keys.seen,
                error,
            )

    def _claim(self, commands: list[tuple[Any, ...]], count: int) -> list[Any] | None:
        """The replies to ``commands`` (a claim of ``count`` URLs: see :meth:`add_many`) sent
        once, in one request, to the node of the seen-set's slot (:class:`node_connection`:
        Redis not reached is raised), or None when the request went out and its reply was
        lost. A refusal is raised (a slot that moved as ``TryAgainError``)."""
        on = node_connection(self.client, self.keys.seen)  # (connects: raised, nothing sent)
        try:
            with on as conn:
                replies = conn.run(commands)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.info(
                "The reply to a claim of %d URLs in seen-set %s was lost (%s): taken as new",
                count,
                self.keys.seen,
                exc,
            )
            return None
        if any(isinstance(r, Exception) for r in replies) or (
            type(replies[-1]) is not list  # (an aborted transaction: EXEC's nil)
        ):  # (nothing applied; an error inside EXEC's replies is add_many's: _answers)
            raise_reply_error(self.client, replies)
            raise redis.ResponseError(f"claim in {self.keys.seen} aborted: {replies[-1]!r}")
        return replies

    def contains_many(self, keys: Sequence[int]) -> list[bool]:
        """Whether each key was added (bloom: or is a false positive). One round trip."""
        return contains_across(self.client, [(self, keys)])[0] if keys else []

    def contains_commands(
        self, keys: Sequence[int]
    ) -> tuple[list[tuple[Any, ...]], Callable[[Iterator[Any]], list[bool]]]:
        """The commands that test ``keys``: ``BF.MEXISTS`` (bloom), or a one-member
        ``SMISMEMBER`` per key (a page's keys in a partition mostly fall in a bucket each:
        16 links in 512 buckets, 4 pages in 5); and what reads the answers, in the order of
        ``keys``, from their replies (the exact kind's fast path: :meth:`_exact_tests`)."""
        if self.config.bloom:
            return [("BF.MEXISTS", *self._items(keys))], _bloom_read
        commands = [
            ("SMISMEMBER", self._bucket(k), m) for k, m in zip(keys, _members(keys), strict=True)
        ]
        return commands, partial(_read_singles, len(keys))

    def _exact_tests(self, keys: Iterable[int], out: list[str]) -> None:
        """Append the exact kind's test of each key (its one-member ``SMISMEMBER``) to
        ``out``, written as RESP text with each bucket's name cached: ~5.3k instructions a
        command against ~10k through a tuple and ``pack_command``."""
        shift, names = self._shift, self._names
        for key in keys:
            m = str(((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000)  # (_members, inline)
            b = (key & _U64) >> shift
            name = names.get(b) or self._name(b)
            out.append(f"*3\r\n$10\r\nSMISMEMBER\r\n{name}${len(m)}\r\n{m}\r\n")

    def _name(self, b: int) -> str:
        """Bucket ``b``'s name as a RESP bulk string (cached, up to ``NAMES_CACHED``)."""
        if len(self._names) >= NAMES_CACHED:
            self._names.clear()
        name = self.keys.seen_bucket_prefix + str(b)
        packed = self._names[b] = f"${len(name.encode())}\r\n{name}\r\n"
        return packed

    def count(self) -> int:
        """URLs added (bloom: ``BF.CARD``, which misses the false positives; exact: the
        counter, with what this object owes sent first)."""
        return count_across(self.client, [self])[0]

    def queue_count(self, pipe: Any) -> Callable[[Any], int]:
        """Queue the reading of :meth:`count` on ``pipe`` (the exact kind sends what it owes
        with it); returns what reads the count from its reply (an exception when it failed:
        what was owed is still owed)."""
        owed = self._owed
        if self.config.bloom:
            pipe.execute_command("BF.CARD", self.keys.seen)
        elif owed:
            pipe.incrby(self.keys.seen_count, owed)
        else:
            pipe.get(self.keys.seen_count)

        def read(reply: Any) -> int:
            if isinstance(reply, Exception):
                raise reply
            self._owed -= owed
            if owed:
                self._check_capacity(int(reply))
            return int(reply or 0)

        return read

    # -- the partition's owner -----------------------------------------------------------------

    def queue_adds(self, writer: Any, keys: Sequence[int]) -> None:
        """Queue the adds of ``keys`` on the owner's fenced writer: a worker killed before
        its call lands leaves them neither seen nor queued, and the page that found them,
        not acknowledged either, finds them again. The caller tested them first
        (:meth:`contains_many`)."""
        if not keys:
            return
        if self.config.bloom:
            self._reserve()
            writer.write("BF.MADD", *self._items(keys))
            return
        prefix, shift, buckets = self.keys.seen_bucket_prefix, self._shift, {}
        for key in keys:  # (its member inline: a call a key costs the owner's every flush)
            member = str(((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000)
            buckets.setdefault((key & _U64) >> shift, []).append(f"${len(member)}\r\n{member}\r\n")
        for b, members in buckets.items():  # (written as RESP text: ~3k instructions less a
            name = prefix + str(b)  # bucket than hiredis's pack_command, a sprintf a number)
            head = f"*{len(members) + 2}\r\n$4\r\nSADD\r\n${len(name.encode())}\r\n{name}\r\n"
            writer.write_packed("SADD", name, (head + "".join(members)).encode())
        self._owed += len(keys)

    def queue_owed(self, writer: Any) -> bool:
        """Queue the ``INCRBY`` of what this object owes on ``writer``. The owner sends it
        now and then, not with every add (each write of a fenced call costs Redis as much as
        a small command). Returns whether there was any."""
        if not self._owed:
            return False
        writer.write("INCRBY", self.keys.seen_count, self._owed)
        self._owed = 0
        return True

    # -- the two kinds -------------------------------------------------------------------------

    def _items(self, keys: Iterable[int]) -> list[Any]:
        """The filter's name and the keys as its items: their 8 bytes (what ``url_key``
        read)."""
        return [self.keys.seen, *(key.to_bytes(8, "big", signed=True) for key in keys)]

    def _reserve(self) -> None:
        """Reserve the filter before the first add (``BF.MADD`` would make one of its own
        defaults); another worker reserving it first is the expected race."""
        if self._reserved:
            return
        c = self.config
        try:
            self.client.execute_command(
                "BF.RESERVE", self.keys.seen, c.error, c.capacity, "EXPANSION", EXPANSION
            )
        except redis.ResponseError as exc:
            if "exists" not in str(exc):
                raise
        self._reserved = True

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


def _firsts(keys: Sequence[int]) -> list[bool]:
    """A claim of unknown outcome: each key new, the first time it comes in ``keys``."""
    met: set[int] = set()
    return [not (k in met or met.add(k)) for k in keys]  # type: ignore[func-returns-value]


def _bloom_read(replies: Iterator[Any]) -> list[bool]:
    return [bool(x) for x in next(replies)]


def _members(keys: Iterable[int]) -> list[int]:
    """Each key's low 32 bits as a signed integer (an exact bucket's member: an intset's)."""
    return [((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000 for key in keys]


def _read_singles(n: int, replies: Iterator[Any]) -> list[bool]:
    """The answers of ``n`` one-member ``SMISMEMBER`` replies, in order."""
    answers = list(chain.from_iterable(islice(replies, n)))
    if len(answers) != n:
        raise ValueError(f"{len(answers)} answers to {n} one-member tests")
    return list(map(bool, answers))


def contains_across(
    client: Any, tests: Sequence[tuple[SeenSet, Sequence[int]]]
) -> list[list[bool]]:
    """The seen-tests of several partitions in one round trip (:mod:`.wire` on one Redis; a
    cluster client's pipeline sends each node its part): for each (seen-set, keys), keys not
    empty, whether each key was added. A read: sent again after a lost connection, it is the
    same read. The exact kind's tests are written as one request and their one-member
    replies read as one list (a page's links touch a few partitions)."""

    def through_redis_py() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for seen, keys in tests:
            for command in seen.contains_commands(keys)[0]:
                pipe.execute_command(*command)
        return pipe.execute()

    if any(map(_BLOOM, map(_SEEN_SET, tests))):  # (no generator: a function and a frame)
        commands: list[tuple[Any, ...]] = []
        readers = []
        for seen, keys in tests:
            more, read = seen.contains_commands(keys)
            commands += more
            readers.append(read)
        replies = wire.execute(client, commands, through_redis_py)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        it = iter(replies)
        return [read(it) for read in readers]
    out: list[str] = []
    for seen, keys in tests:
        seen._exact_tests(keys, out)
    replies = wire.execute_packed(client, "".join(out).encode(), len(out), through_redis_py)
    for reply in replies:
        if type(reply) is not list:
            raise reply if isinstance(reply, Exception) else ValueError(f"reply {reply!r}")
    answers = list(map(bool, chain.from_iterable(replies)))
    if len(answers) != len(out):
        raise ValueError(f"{len(answers)} answers to {len(out)} one-member tests")
    at, results = 0, []
    for _, keys in tests:
        results.append(answers[at : at + len(keys)])
        at += len(keys)
    return results


def count_across(client: Any, seen_sets: Sequence[SeenSet]) -> list[int]:
    """:meth:`SeenSet.count` of several seen-sets in one pipeline (one round trip); each
    reply is read, so that every seen-set sent what it owed is owed nothing more."""
    pipe = client.pipeline(transaction=False)
    readers = [seen.queue_count(pipe) for seen in seen_sets]
    replies = pipe.execute(raise_on_error=False)
    counts, error = [], None
    for read, reply in zip(readers, replies, strict=True):
        try:
            counts.append(read(reply))
        except Exception as exc:
            error = error or exc
    if error is not None:
        raise error
    return counts
