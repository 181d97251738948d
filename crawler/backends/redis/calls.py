"""How the frontier's scripts reach Redis: one server, or the node of a Redis Cluster that owns a
shard's slot, pipelined per node, with an optional wait for replicas.

Why the cluster path does not use redis-py's own routing: the frontier's scripts touch keys
they do not declare (a host's queue, met inside the script), all under the shard's hash tag.
While ``redis-cli --cluster reshard`` moves that slot, some of its keys are on the old node and
some on the new. Redis refuses, on the old node, a script that touches a key already gone (the
scripts touch the never-written ``probe`` key first, so they are refused before writing
anything), but on the new node a client that followed an ``ASK`` redirection runs the script
over half the keys. So a script call is never sent with ``ASKING``: ``ASK``, ``TRYAGAIN`` and
the "non local key" refusal mean "this shard is moving", and the call waits and is sent again;
``MOVED`` (the move is over, or a replica took over) refreshes the slot map and goes to the new
owner at once. A shard pauses while its slot moves; the others go on.

Replicas (``FRONTIER_REPLICA_WAIT``): Redis replicates asynchronously, so a master killed right
after a write may take it with it when its replica takes over. With ``replica_wait=(n, t)``
every writing call is followed, on the same connection, by ``WAIT n t``: the call returns once
``n`` replicas have the write (or ``t`` seconds passed, counted in ``short_waits``). A node whose
replicas did not answer in time is not waited on for a while (``NO_REPLICA_BACKOFF``), so a
shard left without a replica after a failover slows nothing down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import AskError, ClusterDownError, MovedError, NoScriptError, TryAgainError

logger = logging.getLogger(__name__)

NO_REPLICA_BACKOFF = 10.0  # seconds a node whose replicas missed a WAIT is not waited on
_MOVING = (AskError, TryAgainError, ClusterDownError, redis.BusyLoadingError)


class ShardUnavailable(redis.ConnectionError):
    """A shard's node did not take a call within the patience given (its slot is being moved,
    or its master died and no replica has taken over yet). A ``ConnectionError``, so the
    buffered frontier keeps retrying it as it does a Redis that went away."""


@dataclass(slots=True)
class ScriptCall:
    """One script call: the script, its keys (the first names the shard) and its arguments;
    ``write``: the call changes state a replica must have before it counts (``WAIT``)."""

    script: Script
    keys: list[str]
    args: list[Any]
    write: bool = True


class ScriptRunner:
    """Runs the frontier's scripts on one Redis server (``redis.Redis``)."""

    def __init__(
        self, client: Any, replica_wait: tuple[int, float] | None = None
    ) -> None:
        self.client = client
        self.replica_wait = replica_wait if replica_wait and replica_wait[0] > 0 else None
        self.short_waits = 0  # WAITs that returned before enough replicas had the write
        self._skip_wait_until: dict[str, float] = {}

    def run(self, call: ScriptCall) -> Any:
        if self.replica_wait is None or not call.write:
            return call.script(keys=call.keys, args=call.args, client=self.client)
        return self.run_many([call])[0]

    def run_many(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Every call in one pipeline (one round trip), then ``WAIT`` if any writes."""
        if len(calls) == 1 and (self.replica_wait is None or not calls[0].write):
            return [self.run(calls[0])]
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            wait = self._queue(pipe, calls, "")
            out = pipe.execute(raise_on_error=False)
            if wait:
                self._waited("", out.pop())
            missing = [c for c, r in zip(calls, out, strict=True) if isinstance(r, NoScriptError)]
            if not missing:
                break
            for call in missing:  # a restarted Redis, a flushed script cache: load, send again
                call.script.sha = self.client.script_load(call.script.script)
        for reply in out:
            if isinstance(reply, Exception):
                raise reply
        return out

    def _queue(self, pipe: Any, calls: Sequence[ScriptCall], node: str) -> bool:
        for call in calls:
            # EVALSHA as a plain command: a Script on a pipeline makes redis-py send SCRIPT
            # EXISTS first, one more round trip per pipeline; a NOSCRIPT reply is handled
            pipe.execute_command(
                "EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args
            )
        if (
            self.replica_wait is not None
            and any(c.write for c in calls)
            and time.monotonic() >= self._skip_wait_until.get(node, 0.0)
        ):
            n, timeout = self.replica_wait
            pipe.execute_command("WAIT", n, int(timeout * 1000))
            return True
        return False

    def _waited(self, node: str, acked: Any) -> None:
        if self.replica_wait is not None and int(acked) < self.replica_wait[0]:
            self.short_waits += 1
            self._skip_wait_until[node] = time.monotonic() + NO_REPLICA_BACKOFF
            logger.warning(
                "Redis %s: %s of %d replicas had the frontier's write within %.1fs; not "
                "waiting on it for %.0fs (a write lost in a failover now is fetched again or lost)",
                node or "server", acked, self.replica_wait[0], self.replica_wait[1],
                NO_REPLICA_BACKOFF,
            )  # fmt: skip


class ClusterScriptRunner(ScriptRunner):
    """Runs the frontier's scripts on a Redis Cluster (``redis.cluster.RedisCluster``): each
    call on the master that owns its first key's slot, the calls for one node in one pipeline
    on that node's own connection, never following ``ASK`` (the module docstring says why).
    ``patience``: seconds a call keeps trying (a slot moving, a failover) before
    :class:`ShardUnavailable`."""

    def __init__(
        self,
        client: Any,
        replica_wait: tuple[int, float] | None = None,
        patience: float = 5.0,
    ) -> None:
        super().__init__(client, replica_wait)
        self.patience = patience
        self.waits = 0  # calls sent again because their shard was moving or its node away

    def run(self, call: ScriptCall) -> Any:
        return self.run_many([call])[0]

    def run_many(self, calls: Sequence[ScriptCall]) -> list[Any]:
        results: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        deadline = time.monotonic() + self.patience
        backoff = 0.02
        while True:
            failed, refresh, last = self._round(calls, pending, results)
            if not failed:
                return results
            self.waits += len(failed)
            if time.monotonic() >= deadline:
                raise ShardUnavailable(
                    f"a frontier shard did not answer for {self.patience}s: {last}"
                )
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
            if refresh:
                self._refresh()
            pending = failed

    def _round(
        self, calls: Sequence[ScriptCall], pending: list[int], results: list[Any]
    ) -> tuple[list[int], bool, BaseException | None]:
        """Send the pending calls, one pipeline per node; returns the calls to send again,
        whether the slot map must be read again, and the last error seen."""
        by_node: dict[str, tuple[Any, list[int]]] = {}
        failed: list[int] = []
        refresh = False
        last: BaseException | None = None
        for i in pending:
            try:
                node = self.client.get_node_from_key(calls[i].keys[0])
            except (redis.RedisError, OSError) as exc:  # no node serves the slot right now
                failed.append(i)
                refresh, last = True, exc
                continue
            by_node.setdefault(node.name, (node, []))[1].append(i)
        for name, (node, indexes) in by_node.items():
            connection = node.redis_connection
            if connection is None:
                failed += indexes
                refresh = True
                continue
            pipe = connection.pipeline(transaction=False)
            try:
                wait = self._queue(pipe, [calls[i] for i in indexes], name)
                out = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                failed += indexes
                refresh, last = True, exc
                continue
            except _MOVING as exc:  # script loading refused: the node is loading or moving
                failed += indexes
                last = exc
                continue
            if wait:
                self._waited(name, out.pop())
            for i, reply in zip(indexes, out, strict=True):
                if not isinstance(reply, Exception):
                    results[i] = reply
                elif isinstance(reply, NoScriptError):  # a new master, a node restarted
                    try:
                        connection.script_load(calls[i].script.script)
                    except (redis.RedisError, OSError) as exc:
                        last = exc
                    failed.append(i)
                elif isinstance(reply, MovedError) or "READONLY" in str(reply):
                    failed.append(i)
                    refresh, last = True, reply
                elif isinstance(reply, _MOVING) or "non local key" in str(reply):
                    failed.append(i)
                    last = reply
                else:
                    raise reply
        return failed, refresh, last

    def _refresh(self) -> None:
        """Read the slot map again (a slot moved, a replica took over)."""
        try:
            self.client.nodes_manager.initialize()
        except (redis.RedisError, OSError) as exc:
            logger.debug("Redis Cluster slot map not refreshed yet: %s", exc)


def script_runner(
    client: Any, replica_wait: tuple[int, float] | None = None, patience: float = 5.0
) -> ScriptRunner:
    """The runner for ``client``: a cluster client gets the routing one."""
    from redis.cluster import RedisCluster

    if isinstance(client, RedisCluster):
        return ClusterScriptRunner(client, replica_wait, patience)
    return ScriptRunner(client, replica_wait)
