"""The one write path of a partition's owner: its writes land only while it owns the partition.

A worker owns a partition of the crawl's hosts through a lease key (``{<tag>}:lease``, see
:mod:`crawler.backends.redis.ownership`) whose value names the worker and the epoch of its
ownership. The owner's writes are buffered here and sent as calls of ``lua/fence.lua``, which
checks the lease and applies the writes in one atomic step: a worker that stalled past its
lease and lost the partition gets :class:`PartitionLost` and changes nothing (fencing). A lease
that lapsed while no other worker claimed the partition (Redis away longer than the TTL) is
taken back in that same step, so an outage costs no handover. Each call is numbered: one sent
again after its reply was lost with the connection is not applied twice. The script declares
every key it touches, so it runs on proxies and managed clusters that enforce declared keys.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from importlib import resources
from typing import Any

import redis
from redis.exceptions import AskError, NoScriptError, TryAgainError

from crawler.backends.redis import wire

FENCE_SOURCE = resources.files("crawler.backends.redis").joinpath("lua/fence.lua").read_text()
# Writes per script call: Lua's unpack() of one write's arguments and the reply table stay
# far below Lua's stack limit (8,000), and one call never holds Redis for long.
MAX_WRITES = 2048
MAX_ARGUMENTS = 4096
# How long a write waits for its replicas (FRONTIER_REPLICA_WAIT) at most: past it the crawl
# goes on (a replica down must not stop it) and the write is counted as not replicated.
REPLICA_WAIT_MS = 1000
# How often the replicas a partition's master has are counted (ROLE): a write waits for at
# most that many, so a master left without its replica (it was promoted in a failover) does
# not hold every write for REPLICA_WAIT_MS; a write that waited in vain counts them again.
REPLICA_RECOUNT = 10.0

logger = logging.getLogger(__name__)

Write = tuple[str, str, tuple[Any, ...]]


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


class FencedWriter:
    """Buffers one partition owner's writes and applies them, fenced by its lease.

    ``flush`` sends the queue in order, in calls of at most ``MAX_WRITES`` writes, each fenced.
    A call that failed on the way (the connection lost: Redis may have applied it) is sent
    again as it was, under its number, before anything queued since: the script skips every
    write of a number it applied, so a write added to the call would be dropped.
    """

    def __init__(
        self,
        client: redis.Redis | Any,
        lease_key: str,
        lease_value: str,
        epoch_key: str,
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
        self.lease_key = lease_key
        self.lease_value = lease_value
        # the lease may be taken back after a lapse only while the epoch is still this one
        self.epoch_key = epoch_key
        self.epoch = lease_value.rpartition("/")[2]
        self.ttl_ms = max(1, int(ttl * 1000))
        # numbered calls: one sent again after a lost connection is applied once (the
        # owner's writes); a writer that only renews the lease needs no numbers
        self.seq_key = lease_key.rpartition(":")[0] + ":seq"
        self._seq: int | None = None if numbered else -1
        self._script = client.register_script(FENCE_SOURCE)
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

    def flush(self) -> int:
        """Apply the queued writes and return how many were applied (not their replies: no
        owner reads them); raise :class:`PartitionLost` (and drop them) if the lease is not
        ours."""
        lost, applied = _flush(self.client, [self])
        if lost[0] is not None:
            raise lost[0]
        return applied

    def discard(self) -> None:
        """Forget the queued writes (the partition was lost, or is read again). A call sent
        whose outcome is unknown may have been applied: the next call's number is read again
        from Redis, so it is neither refused as done nor applied under a number reused."""
        if self._sent and self._seq is not None and self._seq >= 0:
            self._seq = None
        self.dropped = [*self.dropped, *self._writes]
        self._writes, self._sent = [], 0

    def _refused(self, reply: redis.ResponseError, j: int) -> PartitionLost | None:
        """The refusal of partition ``j`` of a call (its writes dropped: nothing of the call
        was applied), if ``reply`` (``FENCED`` or ``REWOUND``, and the partitions) names it."""
        refused, *which = str(reply).split()
        if str(j) not in which:
            return None
        self.dropped = self._writes  # nothing of the call was applied: none of it goes again
        self._writes, self._sent = [], 0
        if refused == "FENCED":
            return PartitionLost(self.lease_key)
        self._seq = None  # the next owner's calls count on from what Redis kept
        return PartitionRewound(self.lease_key)

    def _settle(self, reply: bytes | str, j: int, number: int | str) -> int:
        """Drop the writes of the call partition ``j`` of ``reply`` (the script's flags of
        the partitions skipped, or "") answered; how many were applied (0: skipped, it was
        applied before)."""
        if number:
            self._seq = int(number)
        size, self._sent = self._sent, 0
        del self._writes[:size]
        return 0 if reply[j : j + 1] in (b"1", "1") else size

    def _run(self, keys: list[str], argv: list[Any]) -> Any:
        """One call of the script; with ``replicas``, followed by ``WAIT`` on the same
        connection (WAIT counts that connection's writes), so the call is done only once the
        replicas have it and a failover can no longer lose it. A connection lost meanwhile
        (the master died) makes the owner send the call again: to the promoted replica,
        which applies it if it never had it, and skips its writes if it had."""
        if not self.replicas:
            return call_script(self._script, self.client, keys, argv)
        node = self.client
        cluster = hasattr(self.client, "get_node_from_key")
        if cluster:  # the node of the slot, asked directly (WAIT needs the same connection)
            node = self.client.get_redis_connection(self.client.get_node_from_key(keys[0]))
        try:
            wanted = self._wanted(node)
            if not wanted:
                return self._script(keys=keys, args=argv)
            for _ in range(2):
                pipe = node.pipeline(transaction=False)
                pipe.evalsha(self._script.sha, len(keys), *keys, *argv)
                pipe.execute_command("WAIT", wanted, REPLICA_WAIT_MS)
                reply, acked = pipe.execute(raise_on_error=False)
                if isinstance(reply, NoScriptError):
                    node.script_load(FENCE_SOURCE)
                    continue
                break
        except (redis.ConnectionError, redis.TimeoutError):
            # the slot's master died: the client's map of slots still names it, and nothing
            # routed through the client would correct it, as this call goes to the node
            # itself; read the map again (the call goes again, to the promoted replica)
            if cluster:
                self._replicas_seen = (float("-inf"), 0)
                reread_slots(self.client)
            raise
        if isinstance(reply, AskError):  # MOVED or ASK: the slot moves; ask again later
            self.client.nodes_manager.initialize()
            raise TryAgainError(str(reply))
        if isinstance(reply, Exception):
            raise reply
        if not isinstance(acked, Exception) and int(acked) < wanted:
            self.unreplicated += 1
            self._replicas_seen = (float("-inf"), 0)  # count them again at the next write
            if self.unreplicated == 1:
                logger.warning(
                    "A frontier write of %s went on without its replicas (%d of %d within "
                    "%d ms): a failover now may lose it (counted, warned once)",
                    self.lease_key, acked, wanted, REPLICA_WAIT_MS,
                )  # fmt: skip
        return reply

    def _wanted(self, node: Any) -> int:
        """How many replicas to wait for: ``replicas``, or fewer if the master has fewer
        (``ROLE`` lists its connected replicas; counted every ``REPLICA_RECOUNT`` s)."""
        counted, have = self._replicas_seen
        now = time.monotonic()
        if now - counted >= REPLICA_RECOUNT:
            role = node.execute_command("ROLE")
            have = len(role[2]) if role[0] in (b"master", "master") else 0
            if have < self.replicas and counted == float("-inf"):
                logger.warning(
                    "The master of %s has %d replicas, FRONTIER_REPLICA_WAIT asks for %d: its "
                    "writes wait for %d", self.lease_key, have, self.replicas, have,
                )  # fmt: skip
            self._replicas_seen = (now, have)
        return min(self.replicas, have)


def reread_slots(client: Any) -> None:
    """Read a cluster client's map of slots again, after a lost connection to a node asked
    directly (not through the client's routing, which would have done it): the node may be a
    master that died, and the next call should find the replica promoted in its place."""
    with contextlib.suppress(redis.RedisError):
        client.nodes_manager.initialize()


def call_script(script: Any, client: Any, keys: list[str], argv: list[Any]) -> Any:
    """One call of the fence script (redis-py's ``Script``) on ``client``: its reply, or its
    refusal raised. :func:`wire.execute` may send it again after a lost connection, as
    redis-py's own retry would: the call's number makes that harmless. A server that lacks
    the script (``NOSCRIPT``: a restart, a failover) is sent it, then the call again."""

    def through_redis_py() -> list[Any]:
        try:
            return [script(keys=keys, args=argv, client=client)]
        except redis.ResponseError as exc:
            return [exc]

    command = ("EVALSHA", script.sha, len(keys), *keys, *argv)
    (reply,) = wire.execute(client, [command], through_redis_py)
    if isinstance(reply, NoScriptError):
        client.script_load(script.script)
        (reply,) = wire.execute(client, [command], through_redis_py)
    if isinstance(reply, Exception):
        raise reply
    return reply


def combine(writers: list[FencedWriter]) -> tuple[list[str], list[Any], list[int | str]]:
    """The script's keys and arguments for the writers' next batches (one call of
    ``lua/fence.lua``, the writers' partitions on one server: each writer's call of unknown
    outcome again, or its next writes), and each one's number."""
    keys: list[str] = []
    head = [len(writers)]
    argv: list[Any] = [b""]
    numbers: list[int | str] = []
    batches = []
    for w in writers:
        batch = w._writes[: w._sent or MAX_WRITES]
        batches.append(batch)
        w._sent = len(batch)
        if w._seq is None:  # the calls the partition's owners made so far
            w._seq = int(w.client.get(w.seq_key) or 0)
        number: int | str = "" if w._seq < 0 else w._seq + 1
        numbers.append(number)
        keys += (w.lease_key, w.seq_key)
        argv += (w.lease_value, w.epoch, w.ttl_ms, number, w._seq)
        head.append(len(batch))
    keys += [w.epoch_key for w in writers]
    index = {key: at + 1 for at, key in enumerate(keys)}
    shapes: list[int] = []
    writes: list[Any] = []
    for batch in batches:
        for command, key, args in batch:
            k = index.get(key)
            if k is None:
                keys.append(key)
                k = index[key] = len(keys)
            shapes += (k, len(args))
            writes += [command, *args]
    argv[0] = struct.pack(f">{len(head)}H", *head)
    argv += [struct.pack(f">{len(shapes)}H", *shapes), *writes]
    return keys, argv, numbers


def one_call(client: Any, writers: list[FencedWriter], more: int = 0) -> FencedWriter | None:
    """One of the ``writers`` (one with writes queued, if any), if :func:`flush_together`
    will send their writes and ``more`` as one call of the script (one server, no replicas
    to wait for, no call of unknown outcome to send again first, at most ``MAX_WRITES``
    writes in all): the writes of them all then land together, or none. Else None."""
    if not writers or hasattr(client, "get_node_from_key"):
        return None
    pending = more
    for w in writers:  # (a loop, not any() and sum(): it runs for every page)
        if w.replicas or w._sent:
            return None
        pending += len(w._writes)
    if pending > MAX_WRITES:
        return None
    return next((w for w in reversed(writers) if w._writes), writers[-1])


def flush_together(client: Any, writers: list[FencedWriter]) -> list[PartitionLost | None]:
    """Flush several partitions' writers in as few round trips as their queues allow.

    Returns, per writer, the :class:`PartitionLost` that refused its writes, or None. The
    first refusal ends the flush: the lost ones' writes are dropped, the others' stay queued
    (a call of unknown outcome, to go again as it was), for the caller to flush again once
    it has mailed what the lost ones were to store (a page's links before its
    acknowledgement). Another error is raised, the writers it hit keeping their writes.

    On one server the writers' next calls go as one call of the script, of at most
    ``MAX_WRITES`` writes in all: every partition's lease and number is checked before
    anything is written, so the writes of all land together or, a partition lost, none. On a
    cluster, where each partition has its own slot, each round sends every writer's next
    call in one pipeline, which the cluster client splits by node; each call is fenced on its
    own (one refused leaves the others applied). Writers that wait for replicas (``WAIT``
    after each call) send their calls one by one."""
    return _flush(client, writers)[0]


def _flush(client: Any, writers: list[FencedWriter]) -> tuple[list[PartitionLost | None], int]:
    """:func:`flush_together`, and how many writes were applied."""
    lost: list[PartitionLost | None] = [None] * len(writers)
    applied, loaded = 0, False
    cluster = hasattr(client, "get_node_from_key")
    waiting = [w for w in writers if w._writes]
    while waiting:
        if cluster and not waiting[0].replicas:  # (the writers of a flush wait alike)
            calls = [[w] for w in waiting]
        else:  # as many as one call holds (one if on a cluster or waiting for replicas)
            calls, total = [[]], 0
            for w in waiting:
                total += w._sent or min(len(w._writes), MAX_WRITES)
                if calls[0] and (total > MAX_WRITES or cluster or w.replicas):
                    break
                calls[0].append(w)
        built = list(map(combine, calls))
        if len(calls) == 1:
            keys, argv, _ = built[0]
            try:
                replies = [calls[0][0]._run(keys, argv)]
            except redis.ResponseError as exc:
                replies = [exc]
        else:  # (a cluster's pipeline asks the server for an EVALSHA's keys unless told)
            pipe = client.pipeline(transaction=False)
            for call, (keys, argv, _) in zip(calls, built, strict=True):
                node = client.get_node_from_key(keys[0])
                sha = call[0]._script.sha
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *argv, target_nodes=node)
            replies = pipe.execute(raise_on_error=False)
        error: Exception | None = None
        refused = unloaded = False
        for c, call in enumerate(calls):  # (no zip: its strict= costs more than a write)
            reply, numbers = replies[c], built[c][2]
            if not isinstance(reply, Exception):
                for j, w in enumerate(call):
                    applied += w._settle(reply, j, numbers[j])
            elif isinstance(reply, NoScriptError) and not loaded:  # not run: sent again
                unloaded = True
            elif isinstance(reply, redis.ResponseError) and str(reply).startswith(
                ("FENCED", "REWOUND")
            ):
                refused = True
                for j, w in enumerate(call, 1):
                    lost[writers.index(w)] = w._refused(reply, j)
            else:
                error = error or reply
        if unloaded:  # (a restarted server, or a cluster node new to the script)
            client.script_load(FENCE_SOURCE)
            loaded = True
        if error is not None:
            raise error
        if refused:
            break
        waiting = [w for w in waiting if w._writes]
    return lost, applied
