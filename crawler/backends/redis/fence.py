"""The one write path of a partition's owner: its writes land only while it owns the partition.

The owner's writes are buffered here and sent as fenced calls (:func:`transact`; the design:
docs/decisions/0002-partition-owned-frontier.md): the lease (``{<tag>}:lease``, naming the
worker and the epoch of its ownership, :mod:`crawler.backends.redis.ownership`) and the count
of calls applied are watched and read with the epoch, and the writes go in one
``MULTI``/``EXEC`` that Redis applies only if neither changed since: the check and the writes
are one step. A worker that lost the partition gets :class:`PartitionLost` and changes
nothing; a lease that lapsed while nobody claimed it is taken back in that same step; a call
sent again after its reply was lost is not applied twice (its number). Every command names
its keys (proxies, managed clusters), and no script runs (a script call cost Redis ~200k
instructions, its commands in a transaction ~85k)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import redis
from hiredis import pack_command
from redis.cluster import RedisCluster
from redis.exceptions import AskError, ExecAbortError, RedisClusterException, TryAgainError

from crawler.backends.redis import wire
from crawler.backends.redis.keys import PartitionKeys

# Writes per fenced call: one call never holds Redis for long.
MAX_WRITES = 2048
MAX_ARGUMENTS = 4096
# How long a write waits for its replicas (FRONTIER_REPLICA_WAIT) at most: past it the crawl
# goes on (a replica down must not stop it) and the write is counted as not replicated.
REPLICA_WAIT_MS = 1000
# How often the replicas a partition's master has are counted (ROLE): a write waits for at
# most that many, so a master left without its replica (it was promoted in a failover) does
# not hold every write for REPLICA_WAIT_MS; a write that waited in vain counts them again.
REPLICA_RECOUNT = 10.0
# Times a fenced call is made again after Redis aborted it (a watched key changed: the
# owner's renewal from another connection, a claim) before the flush gives up with an error
WATCH_TRIES = 16
AGAIN = object()  # what an attempt of :func:`watched` returns when Redis aborted its EXEC

logger = logging.getLogger(__name__)

_MULTI, _EXEC, _UNWATCH = (pack_command((name,)) for name in ("MULTI", "EXEC", "UNWATCH"))
_WATCH_OF, _READ_OF = attrgetter("_watch"), attrgetter("_read")  # (a writer's keys, packed)
_WRITES_OF = attrgetter("_writes")
_IS_ERROR = Exception.__subclasscheck__  # issubclass(kind, Exception), for map()
_LOST = (redis.ConnectionError, redis.TimeoutError)  # a connection lost (or never made)
# what this process said of masters' replicas, by address (a process's writers share it):
# the masters found with fewer replicas than asked, and how many; those whose writes went on
# without their replicas (each said once, until the master has them again)
_short: dict[str, int] = {}
_late: set[str] = set()


def _bulk(text: str) -> bytes:
    """``text`` as a RESP bulk string, as ``pack_command`` packs an argument."""
    raw = text.encode()
    return b"$%d\r\n%b\r\n" % (len(raw), raw)


# a write: (command, key, its arguments), or (command, key, the whole command packed as RESP)
Write = tuple[str, str, tuple[Any, ...] | bytes]


class PartitionLost(Exception):
    """The partition's lease is not (or no longer) this worker's: nothing was written."""

    why = "lost"  # what the owner logs when it drops the partition

    def __init__(self, lease_key: str) -> None:
        super().__init__(f"partition lease {lease_key} is held by another worker")
        self.lease_key = lease_key


class PartitionRewound(PartitionLost):
    """The partition's state in Redis is older than its owner's: writes Redis acknowledged
    were lost (a master failed over before its replica had them; replication is
    asynchronous). Nothing was written; the owner must reload the partition from what Redis
    kept, as a new owner would."""

    why = "rewound"

    def __init__(self, lease_key: str) -> None:
        super().__init__(lease_key)
        self.args = (f"partition {lease_key.rpartition(':')[0]} lost acknowledged writes",)


class Refused(Exception):
    """A fenced call refused (:func:`transact`): the ``writers`` of the call (their
    positions) whose partition is lost, as ``kind`` says."""

    def __init__(self, kind: type[PartitionLost], writers: list[int]) -> None:
        super().__init__(kind.__name__, writers)
        self.kind, self.writers = kind, writers


class FencedWriter:
    """Buffers one partition owner's writes and applies them, fenced by its lease.

    ``flush`` sends the queue in order, in calls of at most ``MAX_WRITES`` writes, each fenced.
    A call that failed on the way (the connection lost: Redis may have applied it) is sent
    again as it was, under its number, before anything queued since: :func:`transact` skips
    every write of a number it applied, so a write added to the call would be dropped.
    """

    def __init__(
        self,
        client: redis.Redis | Any,
        keys: PartitionKeys,
        lease_value: str,
        ttl: float,
        *,
        numbered: bool = True,
        replicas: int = 0,
    ) -> None:
        self.client = client
        # replicas that must have each call before it counts as done (0: asynchronous
        # replication; a failover may then lose the last calls, see PartitionRewound)
        self.replicas = replicas
        self.unreplicated = 0  # calls that went on without their replicas' word
        self._replicas_seen = (float("-inf"), 0)  # (when counted, the master's replicas)
        self.lease_key = keys.lease
        self.lease_value = lease_value
        # the lease may be taken back after a lapse only while the epoch is still this one
        self.epoch_key = keys.epoch
        self.epoch = lease_value.rpartition("/")[2]
        self._value, self._epoch = lease_value.encode(), self.epoch.encode()  # (as read)
        self.ttl_ms = max(1, int(ttl * 1000))
        # its keys as every fenced call names them, packed once (hiredis's pack_command costs
        # ~1k instructions an argument, ~2k a command): WATCH's, MGET's, and SET's of the number
        # of calls applied (numbered calls: one sent again after a lost connection is applied
        # once; a writer that only renews the lease needs no numbers)
        self._watch = _bulk(keys.lease) + _bulk(keys.seq)
        self._read = self._watch + _bulk(keys.epoch)
        self._set_seq = b"*3\r\n$3\r\nSET\r\n" + _bulk(keys.seq)
        self._seq: int | None = None if numbered else -1
        self._writes: list[Write] = []
        self._sent = 0  # writes at the head of the queue in a call whose outcome is unknown
        # the writes last dropped unapplied (a refusal, a discard), for who needs them back
        self.dropped: list[Write] = []

    @property
    def pending(self) -> int:
        return len(self._writes)

    def write(self, command: str, key: str, *args: Any) -> None:
        """Queue ``command key *args`` (sent at the next ``flush``)."""
        if len(args) > MAX_ARGUMENTS:
            raise ValueError(f"{command} with {len(args)} arguments: split it")
        self._writes.append((command, key, args))

    def write_packed(self, command: str, key: str, request: bytes) -> None:
        """Queue one command the caller packed as RESP (``request``: ``command key ...`` as
        ``hiredis.pack_command`` packs it): for writes of a fixed shape whose head the caller
        keeps packed (a carried letter's XADD and mark), ~3k instructions against ~7k through
        ``pack_command`` (a ``sprintf`` per argument)."""
        self._writes.append((command, key, request))

    def write_many(self, command: str, key: str, values: Sequence[Any]) -> None:
        """Queue ``command key *values``, as several writes in order past ``MAX_ARGUMENTS``
        values: for a command whose values apply one by one (``RPUSH``, ``LPUSH``, ``HDEL``,
        ``HSET``'s pairs: the limit is even); none for no values."""
        if len(values) <= MAX_ARGUMENTS:  # (most: no range, no slice; a store's every flush)
            if values:
                self._writes.append((command, key, tuple(values)))
            return
        for i in range(0, len(values), MAX_ARGUMENTS):
            self._writes.append((command, key, tuple(values[i : i + MAX_ARGUMENTS])))

    def flush(self) -> None:
        """Apply the queued writes; raise :class:`PartitionLost` (and drop them) if the lease
        is not ours."""
        lost = flush_together(self.client, [self])[0]
        if lost is not None:
            raise lost

    def discard(self) -> None:
        """Forget the queued writes (the partition was lost, or is read again). A call sent
        whose outcome is unknown may have been applied: the next call's number is read again
        from Redis, so it is neither refused as done nor applied under a number reused."""
        if self._sent and self._seq is not None and self._seq >= 0:
            self._seq = None
        self.dropped = [*self.dropped, *self._writes]
        self._writes, self._sent = [], 0

    def _refused(self, kind: type[PartitionLost]) -> PartitionLost:
        """The writer's call was refused (nothing of the call was applied): its writes are
        dropped, none of them goes again."""
        self.dropped = self._writes
        self._writes, self._sent = [], 0
        if kind is PartitionRewound:
            self._seq = None  # the next owner's calls count on from what Redis kept
        return kind(self.lease_key)

    def _settle(self, number: int | str) -> None:
        """Drop the writes of the call just answered (applied now, or before: skipped)."""
        if number:
            self._seq = int(number)
        del self._writes[: self._sent]
        self._sent = 0

    def _replicated(self, node: Any, acked: Any, wanted: int) -> None:
        """Count a call its replicas did not all have within ``REPLICA_WAIT_MS`` (``acked``:
        the ``WAIT``'s reply). Said once for the master ``node`` (not once per partition's
        writer: all of a master's writers miss together), again only after one of its
        writes had its replicas in time."""
        if isinstance(acked, Exception):
            return
        if int(acked) >= wanted:
            if _late:  # (the master's writes wait in time again)
                _late.discard(_address(node))
            return
        self.unreplicated += 1
        self._replicas_seen = (float("-inf"), 0)  # count them again at the next write
        master = _address(node)
        if master not in _late:
            _late.add(master)
            logger.warning(
                "A frontier write on the master at %s went on without its replicas (%d of %d "
                "within %d ms): a failover now may lose it (counted; said once until a write "
                "there waits in time again)", master, acked, wanted, REPLICA_WAIT_MS,
            )  # fmt: skip

    def _recount(self) -> None:
        """Count the master's replicas again (its node was lost: a replica promoted?)."""
        self._replicas_seen = (float("-inf"), 0)

    def _wanted(self, node: Any) -> int:
        """How many replicas to wait for: ``replicas``, or fewer if the master has fewer
        (``ROLE`` lists its connected replicas; counted every ``REPLICA_RECOUNT`` s). A
        master with fewer is said once for the master, again when the number changes."""
        counted, have = self._replicas_seen
        now = time.monotonic()
        if now - counted >= REPLICA_RECOUNT:
            role = node.execute_command("ROLE")
            have = len(role[2]) if role[0] in (b"master", "master") else 0
            if have >= self.replicas:
                if _short:
                    _short.pop(_address(node), None)
            elif _short.get(master := _address(node)) != have:  # (said once per master)
                _short[master] = have
                logger.warning(
                    "The master at %s has %d replicas, FRONTIER_REPLICA_WAIT asks for %d: its "
                    "writes wait for %d", master, have, self.replicas, have,
                )  # fmt: skip
            self._replicas_seen = (now, have)
        return min(self.replicas, have)


def _address(node: Any) -> str:
    """The address of ``node`` (a ``redis.Redis``: one Redis, or a cluster's master), which
    names it in what is said of its replicas."""
    kwargs = node.connection_pool.connection_kwargs
    return str(kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}")


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a Redis Cluster's: a plain ``redis.Redis`` is told apart by its
    type first (``isinstance`` against ``RedisCluster`` goes through a protocol's check, ~1 us,
    and a fenced call asks three times)."""
    return type(client) is not redis.Redis and isinstance(client, RedisCluster)


def reread_slots(client: Any) -> None:
    """Read a cluster client's map of slots again (one Redis: nothing to do), after a lost
    connection to a node asked directly (not through the client's routing, which would have
    done it): the node may be a master that died, and the next call should find the replica
    promoted in its place. A map not read (no node answers: redis-py's
    ``RedisClusterException``, no ``RedisError``) leaves the caller's error to go on: a lost
    connection stays Redis away (``outage.TRANSIENT``), a lost reply a lost reply."""
    if is_cluster(client):
        with contextlib.suppress(redis.RedisError, RedisClusterException):
            client.nodes_manager.initialize()


class node_connection:  # (named as a function: ``with node_connection(client, key) as conn``)
    """One connection (:class:`wire.one_connection`: whatever it sends goes once, never again
    by itself) to the node that serves ``at``: one Redis itself; on a cluster the master of
    key ``at``'s slot, or the node ``at``, asked directly (:attr:`node`). A lost connection
    (connecting, or in the block) has the cluster's map of slots read again
    (:func:`reread_slots`) before it goes on. For requests whose replay is not harmless (a
    claim, a group's read) and for transactions (:func:`watched`); refusals are the caller's
    to raise (:func:`raise_reply_error`)."""

    def __init__(self, client: Any, at: Any) -> None:
        self.client = client
        if is_cluster(client):
            at = client.get_node_from_key(at) if isinstance(at, str) else at
            self.node = client.get_redis_connection(at)
        else:
            self.node = client
        try:
            self._opened = wire.one_connection(self.node)  # (connects: nothing sent yet)
        except _LOST:
            reread_slots(client)
            raise

    def __enter__(self) -> wire.one_connection:
        return self._opened.__enter__()

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        self._opened.__exit__(kind, error, trace)
        if kind is not None and issubclass(kind, _LOST):
            reread_slots(self.client)


def transact(client: Any, call: list[FencedWriter]) -> list[int | str]:
    """One fenced call of the writers of ``call`` (their partitions on one server; on a
    cluster one writer, its slot's master asked directly): each writer's call of unknown
    outcome again, or its next writes. Two round trips on one connection: ``WATCH`` each
    partition's lease and number of calls, and read them and its epoch (``MGET``); then,
    every lease the owner's (or lapsed, nobody having claimed it since: it is set again) and
    every number the one expected, every writer's writes after its number in one
    ``MULTI``/``EXEC``, which Redis aborts if a watched key changed in between (a claim, a
    renewal from another connection): the call is then made again. A call whose number was
    applied already (sent again after a lost reply) has its writes skipped.

    Returns the writers' numbers ("": not numbered); raises :class:`Refused` naming the
    writers whose lease was lost, else those whose number is missing (a failover lost
    acknowledged writes): then nothing was written. Writers that wait for replicas send
    ``WAIT`` after the ``EXEC``."""
    # the epochs are read, not watched: a claim changes the lease too, and one that only
    # raised the epoch by the time a lapsed lease is taken back here fails its SET NX
    check = b"".join([
        b"*%d\r\n$5\r\nWATCH\r\n" % (2 * len(call) + 1), *map(_WATCH_OF, call),
        b"*%d\r\n$4\r\nMGET\r\n" % (3 * len(call) + 1), *map(_READ_OF, call),
    ])  # fmt: skip
    batches = []
    for w in call:
        batches.append(w._writes[: w._sent or MAX_WRITES])
        w._sent = len(batches[-1])
    wanted: list[int] = []  # (asked of the node once, before the first attempt)
    # (the attempt a function of the module, not a closure made at every call)
    result = watched(client, call[0].lease_key, _attempt, call[0]._recount,
                     (client, call, check, batches, wanted))  # fmt: skip
    if isinstance(result, Refused):
        raise result
    return result


def _attempt(
    conn: wire.one_connection, node: Any, client: Any, call: list[FencedWriter], check: bytes,
    batches: list[list[Write]], wanted: list[int],
) -> Any:  # fmt: skip
    """One attempt of :func:`transact`'s call (see :func:`watched`)."""
    if not wanted:
        wanted.append(call[0]._wanted(node) if call[0].replicas else 0)
    replies = conn.run_packed(check, 2)
    if type(replies[1]) is not list:  # (a refusal: MOVED, NOPERM, ...)
        raise_reply_error(client, replies)
    got, numbers, packed = replies[1], [], [_MULTI]
    fenced: list[int] = []
    rewound: list[int] = []
    for j, w in enumerate(call):
        owner, applied = got[3 * j], int(got[3 * j + 1] or 0)
        if owner != w._value and (owner is not None or got[3 * j + 2] != w._epoch):
            fenced.append(j)
        if owner != w._value:  # a lapsed lease, taken back
            packed.append(pack_command(("SET", w.lease_key, w._value, "PX", w.ttl_ms)))
        if w._seq is None:  # the calls the partition's owners made so far
            w._seq = applied
        number: int | str = "" if w._seq < 0 else w._seq + 1
        numbers.append(number)
        skip = number != "" and applied != w._seq
        if skip and applied < w._seq + 1:
            rewound.append(j)
        if number != "" and not skip:
            digits = b"%d" % number
            packed.append(w._set_seq + b"$%d\r\n%b\r\n" % (len(digits), digits))
        for command, key, args in batches[j] if not skip else ():  # (no comprehension)
            packed.append(args if type(args) is bytes else pack_command((command, key, *args)))
    if fenced or rewound:
        conn.run_packed(_UNWATCH, 1)
        return Refused(PartitionLost, fenced) if fenced else Refused(PartitionRewound, rewound)
    packed.append(_EXEC)
    if wanted[0]:
        packed.append(pack_command(("WAIT", wanted[0], REPLICA_WAIT_MS)))
    replies = conn.run_packed(b"".join(packed), len(packed))
    done = replies[len(packed) - 1 - bool(wanted[0])]  # (None: aborted)
    if done is None:
        return AGAIN
    # (a command refused when queued makes EXEC refuse them all)
    if type(done) is not list or any(map(_IS_ERROR, set(map(type, done)))):
        raise_reply_error(client, replies)
    if wanted[0]:
        call[0]._replicated(node, replies[-1], wanted[0])
    return numbers


def watched(
    client: Any,
    key: str,
    attempt: Callable[..., Any],
    lost_node: Callable[[], None] = lambda: None,
    args: tuple[Any, ...] = (),
) -> Any:
    """An optimistic transaction on the node that serves ``key`` (a cluster's slot master,
    asked directly): ``attempt(conn, node, *args)`` sends its ``WATCH``, reads and checks, then
    its ``MULTI``/``EXEC`` on one connection, and returns what it decided, or :data:`AGAIN` when
    Redis aborted the ``EXEC`` (a watched key changed): it is made again, ``WATCH_TRIES``
    times at most (then :class:`redis.WatchError`). The fenced call and the near-duplicate
    commit both run this way.

    The connection is :class:`node_connection`'s: a lost one to a cluster's node (maybe a
    master that died) has ``lost_node`` run too before the error goes on (the call goes
    again, to the promoted replica)."""
    try:
        on = node_connection(client, key)
        with on as conn:
            for _ in range(WATCH_TRIES):
                result = attempt(conn, on.node, *args)
                if result is not AGAIN:
                    return result
            raise redis.WatchError(f"{key} changed {WATCH_TRIES} times")
    except _LOST:
        if is_cluster(client):
            lost_node()
        raise


def raise_reply_error(client: Any, replies: list[Any]) -> None:
    """Raise the first error among ``replies`` (those of a transaction included); a slot
    that moves (``MOVED``, ``ASK``, ``TRYAGAIN``: a reshard) as :class:`TryAgainError`, the
    cluster's map of slots read again: the call goes again later."""
    found = []
    for reply in replies:
        errors = [reply] if isinstance(reply, Exception) else reply if type(reply) is list else ()
        found += [e for e in errors if isinstance(e, Exception)]
    # (EXECABORT says only that a command queued before it was refused: that one is raised)
    for error in sorted(found, key=lambda e: isinstance(e, ExecAbortError)):
        if isinstance(error, (AskError, TryAgainError)):
            reread_slots(client)
            raise TryAgainError(str(error))
        raise error


def one_call(client: Any, writers: list[FencedWriter], more: int = 0) -> FencedWriter | None:
    """One of the ``writers`` (one with writes queued, if any), if :func:`flush_together`
    will send their writes and ``more`` as one fenced call (one server, no replicas to wait
    for, no call of unknown outcome to send again first, at most ``MAX_WRITES`` writes in
    all): the writes of them all then land together, or none. Else None."""
    if not writers or is_cluster(client):
        return None
    pending = more
    for w in writers:  # (a loop, not any() and sum(): it runs for every page)
        if w.replicas or w._sent:
            return None
        pending += len(w._writes)
    if pending > MAX_WRITES:
        return None
    return next(filter(_WRITES_OF, reversed(writers)), writers[-1])  # (no generator: a frame)


def flush_together(client: Any, writers: list[FencedWriter]) -> list[PartitionLost | None]:
    """Flush several partitions' writers in as few fenced calls as their queues allow.

    Returns, per writer, the :class:`PartitionLost` that refused its writes, or None. The
    first refusal ends the flush: the lost ones' writes are dropped, the others' stay queued
    (a call of unknown outcome, to go again as it was), for the caller to flush again once
    it has mailed what the lost ones were to store (a page's links before its
    acknowledgement). Another error is raised, the writers it hit keeping their writes;
    on a cluster, where a call per master goes, not in a flush that found one lost (raised,
    the lost ones' writes would be dropped unsaid): it comes again at the next.

    On one server the writers' next calls go as one fenced call (:func:`transact`), of at
    most ``MAX_WRITES`` writes in all: every partition's lease and number is checked before
    anything is written, so the writes of all land together or, a partition lost, none. On a
    cluster, where each partition has its own slot, each writer's next call goes to its
    slot's master, fenced on its own (one refused leaves the others applied). Writers that
    wait for replicas (``WAIT`` after each call) send their calls one by one."""
    lost: list[PartitionLost | None] = [None] * len(writers)
    cluster = is_cluster(client)
    waiting = list(filter(_WRITES_OF, writers))  # (no comprehension: a function each)
    while waiting:
        if cluster:
            calls = [[w] for w in waiting]
        else:  # as many as one call holds (one if waiting for replicas)
            calls, total = [[]], 0
            for w in waiting:
                total += w._sent or min(len(w._writes), MAX_WRITES)
                if calls[0] and (total > MAX_WRITES or w.replicas):
                    break
                calls[0].append(w)
        error: Exception | None = None
        refused = False
        for call in calls:
            try:
                numbers = transact(client, call)
            except Refused as exc:
                refused = True
                for j in exc.writers:
                    lost[writers.index(call[j])] = call[j]._refused(exc.kind)
                continue
            except redis.RedisError as exc:  # (the other nodes' calls go on)
                error = error or exc
                continue
            for j, w in enumerate(call):  # (no zip: its strict= costs more than a write)
                w._settle(numbers[j])
        if refused:  # (said first: the error comes again at the next flush)
            break
        if error is not None:
            raise error
        waiting = list(filter(_WRITES_OF, waiting))
    return lost
