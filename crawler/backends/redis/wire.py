"""The frontier's hot round trips with less Python: a batch of commands sent as one request
on a connection of redis-py's own pool, its replies read by hiredis, without the pipeline's
layers (command stack, callbacks, per-command packing through Python, observability hooks).

A worker's seen-test and its fenced call are a round trip or two per page; redis-py's pipeline
costs ~25 us of Python a round trip and ~5 us a command above hiredis's parsing, about a
third of the worker's CPU (``bench/partition_costs.py``). Here the request is packed by
``hiredis.pack_command`` and sent with the connection's own ``send_packed_command``; each
reply is read with the connection's ``read_response`` (hiredis parses it), so connecting,
TLS, ACL login (``AUTH``/``HELLO``) and the socket timeouts stay redis-py's.

What it does not handle it leaves to redis-py's normal path (``fallback``), which owns
retries, reconnects and redirects: a Redis Cluster's client, a connection without hiredis's
parser, a client-side cache (RESP2 and RESP3 alike: a push message is handed to redis-py's
handler, as its own read does). A connection lost while a batch is out (a reset, a timeout)
is disconnected and the batch goes through ``fallback``: sent again, as redis-py's own retry
would send it again, provided the connection's retry policy allows one more attempt (else
the error is raised, as redis-py raises it). So a batch may run twice on the server exactly
when redis-py would run it twice: the callers send only batches whose replay is harmless
(reads; a fenced call, which its number makes idempotent).

Between batches the connection stays checked out of redis-py's ``ConnectionPool``, kept on
the pool as its spare (a process's own, one at a time): the pool's checkout and release cost
~55k instructions a batch (its fork check, lock, observability counters with the pool's name
formatted four times, the release's event), about a batch's own cost, two batches a page. A
spare is taken again only after the test the pool's checkout makes (``can_read``: no data
left, not closed by the server); one that fails it, or that a fork or a reset of the pool
left behind, goes back to the pool's own path. It stays in the pool's in-use set, so the
pool's ``disconnect``/``close`` closes it (the next batch reconnects it, as redis-py does).
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from hiredis import pack_command
from redis._parsers import _HiredisParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.exceptions import ConnectionError, ResponseError

try:
    from hiredis import PushNotification
except ImportError:  # hiredis < 3.2: no push messages apart
    PushNotification = None

Command = Sequence[Any]  # the command's name and arguments: str, bytes, int or float

# the pool's checkout without its deprecated-arguments wrapper (which inspects every call's
# arguments), for redis-py's own ConnectionPool class only
_checkout = getattr(
    redis.ConnectionPool.get_connection, "__wrapped__", redis.ConnectionPool.get_connection
)


_SPARE = "_wire_spare"  # the pool's attribute: (pid, connection) kept between batches
# this process's id, kept (os.getpid() is a system call, two a batch): a fork's child sets its own
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def _lean_connection(client: Any) -> tuple[Any, Any] | None:
    """The pool and a connection of it fit for a lean batch (its spare, else one checked
    out), or None (use ``fallback``)."""
    if type(client) is not redis.Redis:  # a cluster client, or a subclass that adds behavior
        return None
    pool = client.connection_pool
    if getattr(pool, "cache", None) is not None:
        return None
    spare = pool.__dict__.pop(_SPARE, None)  # (atomic: another thread finds none)
    if spare is not None and (conn := _reusable(pool, *spare)) is not None:
        return pool, conn
    conn = _checkout(pool) if type(pool) is redis.ConnectionPool else pool.get_connection()
    if not isinstance(conn._parser, _HiredisParser):
        pool.release(conn)
        return None
    return pool, conn


def _reusable(pool: Any, pid: int, conn: Any) -> Any:
    """The spare ``conn`` if it may carry a batch: this process's (not a forked parent's),
    still the pool's, and passing the pool's own checkout test (else it goes back to the
    pool, closed when it failed the test, and None)."""
    if pid != _pid or conn not in pool._in_use_connections:
        return None  # the pool was reset (a fork, ...): not its connection any more
    try:
        if _quiet(conn) or not conn._parser.can_read(0):  # (can_read less its error text)
            return conn
    except (ConnectionError, redis.TimeoutError, OSError):
        pass
    conn.disconnect()  # data left on it, closed by the server, or disconnected
    pool.release(conn)
    return None


def _quiet(conn: Any) -> bool:
    """True when the parser's test (``can_read(0)``) would find nothing waiting on ``conn``:
    no reply buffered, its plain socket not readable (nor closed: a poll reports that too),
    told with a poll kept on the connection for its socket, not one made, registered and a
    missing ``pending`` looked up at every test (~3k instructions a batch). False: ask the
    parser (something may wait; an SSL socket, whose buffered bytes no poll sees)."""
    sock, reader = conn._sock, conn._parser._reader
    if sock is None or reader is None or reader.has_data():
        return False
    kept = conn.__dict__.get("_wire_poll")
    if kept is None or kept[0] is not sock:  # (a new socket since: a reconnect)
        if hasattr(sock, "pending"):
            return False
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        kept = conn.__dict__["_wire_poll"] = (sock, poll)
    return not kept[1].poll(0)


def _keep(pool: Any, conn: Any) -> None:
    """After a whole batch: ``conn`` becomes the pool's spare, unless it has one already,
    is not redis-py's own ``ConnectionPool`` (a blocking pool's few connections are
    shared), or the connection is to reconnect: then the pool takes it back."""
    if type(pool) is redis.ConnectionPool and not conn.should_reconnect():
        kept = (_pid, conn)
        if pool.__dict__.setdefault(_SPARE, kept) is kept:
            return
    pool.release(conn)


def execute(
    client: Any, commands: Sequence[Command], fallback: Callable[[], list[Any]]
) -> list[Any]:
    """:func:`execute_packed` of ``commands``, packed here (the near-duplicate detector's
    reads and writes: a few commands a page, whose packing is not worth the caller's)."""
    try:
        request = pack(commands)
    except TypeError:  # an argument hiredis does not pack: redis-py's error, from its path
        return fallback()
    return execute_packed(client, request, len(commands), fallback)


def pack(commands: Sequence[Command]) -> bytes:
    """``commands`` as one RESP request (``hiredis.pack_command`` each)."""
    return b"".join([pack_command(tuple(c)) for c in commands])


def execute_packed(
    client: Any, request: bytes, count: int, fallback: Callable[[], list[Any]]
) -> list[Any]:
    """The replies to ``request`` (RESP: ``count`` commands, as ``hiredis.pack_command``
    packs them; the caller packs it, for less: the seen-test, ``crawler.backends.redis.seenset``),
    sent in one round trip, in order, as hiredis reads them (without redis-py's response
    callbacks: callers read only what both paths give alike); a command the server refused is
    its :class:`redis.ResponseError` in the list (as ``pipeline.execute(raise_on_error=False)``
    gives it). ``fallback`` runs the same batch through redis-py (see the module) when this
    path cannot."""
    taken = _lean_connection(client)
    if taken is None:
        return fallback()
    pool, conn = taken
    try:
        conn.send_packed_command([request])
        replies = _replies(conn, count)
    except Exception as exc:
        conn.disconnect()  # whatever of the batch is still on the wire is dropped with it
        pool.release(conn)
        retry = conn.retry
        if not isinstance(exc, retry._supported_errors) or retry.get_retries() == 0:
            raise
        backoff = retry._backoff.compute(1)
    except BaseException:
        pool.release(conn)
        raise
    else:
        _keep(pool, conn)
        return replies
    if backoff > 0:
        time.sleep(backoff)
    return fallback()


def _replies(conn: Any, count: int) -> list[Any]:
    """``count`` replies: each read by the connection's ``read_response`` (which reads the
    socket, raises what redis-py raises, hands push messages to its handler), except those
    hiredis's reader already holds whole, taken from it directly."""
    read = conn.read_response
    replies: list[Any] = []
    gets = None  # the reader's, once a read connected it (a batch of many small replies)
    while len(replies) < count:
        reply = gets() if gets is not None else NOT_ENOUGH_DATA
        kind = type(reply)
        if kind is int or kind is bytes:  # (most replies: no error, no push message)
            replies.append(reply)
            continue
        if kind is list:  # (an array: a seen-test's, an MGET's, an EXEC's)
            if reply and isinstance(reply[0], ConnectionError):
                raise reply[0]
            replies.append(reply)
            continue
        if reply is NOT_ENOUGH_DATA:  # (nothing was taken from the reader)
            try:
                reply = read()
            except ResponseError as exc:
                reply = exc
            gets = conn._parser._reader.gets
        elif PushNotification is not None and kind is PushNotification:
            conn._parser.handle_push_response(reply)
            continue
        elif isinstance(reply, ConnectionError):
            raise reply
        replies.append(reply)
    return replies


class one_connection:  # (named as a function: ``with one_connection(client) as conn``)
    """Several round trips on one connection of ``client``'s pool (a ``WATCH`` and its reads,
    then the transaction they decide, which must go on the connection that watched): the
    block gets this object, to send requests with (:meth:`run`, :meth:`run_packed`). The lean
    path's connection when it can, else one of the pool read through redis-py's parser.
    Whatever escapes the block disconnects the connection (what it watched is dropped with
    it): no retry here. (A class, not a generator: it runs for every fenced call.)"""

    def __init__(self, client: Any) -> None:
        taken = _lean_connection(client)
        self.lean = taken is not None
        if taken is None:
            self.pool = client.connection_pool
            self.conn = self.pool.get_connection()
        else:
            self.pool, self.conn = taken

    def __enter__(self) -> one_connection:
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is not None:
            self.conn.disconnect()
            self.pool.release(self.conn)
        elif self.lean:
            _keep(self.pool, self.conn)
        else:
            self.pool.release(self.conn)

    def run(self, commands: Sequence[Command]) -> list[Any]:
        """The replies to ``commands``, as :func:`execute_packed` gives them."""
        return self.run_packed(pack(commands), len(commands))

    def run_packed(self, request: bytes, count: int) -> list[Any]:
        """The replies to ``request`` (``count`` commands), as :func:`execute_packed` gives
        them (the fenced call packs each writer's keys once)."""
        conn = self.conn
        conn.send_packed_command([request])
        if self.lean:
            return _replies(conn, count)
        replies: list[Any] = []
        for _ in range(count):
            try:
                replies.append(conn.read_response())
            except ResponseError as exc:
                replies.append(exc)
        return replies
