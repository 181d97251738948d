"""The frontier's lean round trips (``crawler.backends.redis.wire``): a batch of commands is one
request, its replies in order with a refusal in its place; what the lean path cannot do goes
through redis-py's (``fallback``), and a connection lost while a batch is out sends the batch
again through redis-py only when the client's retry policy allows another attempt. On a real
redis-server; the lost reply cut by a loopback proxy."""

from __future__ import annotations

import select
from collections.abc import Iterator

import pytest
import redis
from hiredis import pack_command
from redis.backoff import NoBackoff
from redis.connection import Connection
from redis.retry import Retry

from crawler.backends.redis import wire
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter


def execute(client: redis.Redis, commands: list[tuple[object, ...]], fallback: Fallback) -> list:
    """A batch of ``commands`` on the lean path, packed as its callers pack theirs."""
    request = b"".join([pack_command(tuple(c)) for c in commands])  # type: ignore[arg-type]
    return wire.execute_packed(client, request, len(commands), fallback)


class Fallback:
    """A ``fallback`` that counts its calls and runs the batch through a redis-py pipeline."""

    def __init__(self, client: redis.Redis, commands: list[tuple[object, ...]]) -> None:
        self.client, self.commands, self.calls = client, commands, 0

    def __call__(self) -> list[object]:
        self.calls += 1
        pipe = self.client.pipeline(transaction=False)
        for command in self.commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The requests sent on any connection while the test runs."""
    sent: list[bytes] = []
    send = Connection.send_packed_command

    def counted(self: Connection, command: bytes | list[bytes], check_health: bool = True):
        sent.append(command if isinstance(command, bytes) else b"".join(command))
        send(self, command, check_health)

    monkeypatch.setattr(Connection, "send_packed_command", counted)
    yield sent


def test_a_batch_is_one_request_with_its_refusals_in_place(
    redis_server: RedisServer,  # noqa: F811
    requests: list[bytes],
) -> None:
    key = fresh_key()
    with redis_server.client() as client:
        commands = [
            ("SADD", key, 1, -2, 3),
            ("SMISMEMBER", key, 1, 2, -2),
            ("INCR", key),  # WRONGTYPE: refused, the others run
            ("SET", key + ":f", 1.5),
            ("GET", key + ":f"),
        ]
        fallback = Fallback(client, commands)
        client.ping()  # (the connection's handshake: HELLO, CLIENT ...)
        requests.clear()
        replies = execute(client, commands, fallback)
    assert len(requests) == 1 and fallback.calls == 0
    assert replies[:2] == [3, [1, 0, 1]]
    assert isinstance(replies[2], redis.ResponseError) and "WRONGTYPE" in str(replies[2])
    assert replies[3:] == [b"OK", b"1.5"]  # as the server said them (no callbacks)


def test_replies_longer_than_a_read_are_read_whole(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Replies that come in many reads of the socket (~1 MB): each read whole, in order."""
    key = fresh_key()
    with redis_server.client() as client:
        client.set(key, b"x" * 1000)
        commands = [("GET", key), ("STRLEN", key)] * 1000
        fallback = Fallback(client, commands)
        assert execute(client, commands, fallback) == [b"x" * 1000, 1000] * 1000
        assert fallback.calls == 0


def test_a_client_it_cannot_serve_goes_through_redis_py(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A client class of its own (a cluster client is one) takes the fallback."""

    class Own(redis.Redis):
        pass

    key = fresh_key()
    client = Own(host="127.0.0.1", port=redis_server.port)
    fallback = Fallback(client, [("SADD", key, 1)])
    assert execute(client, fallback.commands, fallback) == [1] and fallback.calls == 1
    client.close()


def test_a_batch_whose_reply_was_lost_goes_again_through_redis_py(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Redis ran the batch and its reply was lost: sent again through the fallback (as
    redis-py's retry sends a pipeline again), once; the connection went back to the pool
    closed, not holding the lost reply."""
    key = fresh_key()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        client = proxy.client(retries=1)
        commands = [("INCR", key), ("GET", key)]
        fallback = Fallback(client, commands)
        proxy.cut_after(key.encode())
        assert execute(client, commands, fallback) == [2, b"2"]
        assert proxy.cuts == 1 and fallback.calls == 1
        assert direct.get(key) == b"2"  # applied twice, as redis-py's own retry would
        assert execute(client, [("GET", key)], fallback) == [b"2"]
        assert fallback.calls == 1
        client.close()


def test_a_lost_reply_is_raised_when_the_client_retries_nothing(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key = fresh_key()
    with reply_cutter(redis_server.port) as proxy:
        client = proxy.client(retries=0)
        fallback = Fallback(client, [("INCR", key)])
        proxy.cut_after(key.encode())
        with pytest.raises(redis.ConnectionError):
            execute(client, fallback.commands, fallback)
        assert proxy.cuts == 1 and fallback.calls == 0
        assert execute(client, [("GET", key)], fallback) == [b"1"]  # the pool recovers
        client.close()


def test_a_connection_carries_batch_after_batch_without_a_checkout(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batch after batch go on one connection, kept as the pool's spare, checked out once
    (the pool's checkout and release cost as much as a batch); a spare the server closed
    meanwhile is not used: the next batch goes on a connection checked out afresh, not
    through the fallback, even by a client that retries nothing."""
    checkouts: list[object] = []
    checkout = wire._checkout

    def counted(pool: redis.ConnectionPool) -> object:
        checkouts.append(conn := checkout(pool))
        return conn

    monkeypatch.setattr(wire, "_checkout", counted)
    key = fresh_key()
    client = redis.Redis(host="127.0.0.1", port=redis_server.port, retry=Retry(NoBackoff(), 0))
    fallback = Fallback(client, [("INCR", key)])
    ids = [execute(client, [("INCR", key), ("CLIENT", "ID")], fallback)[1] for _ in range(3)]
    assert len(checkouts) == 1 and len(set(ids)) == 1
    with redis_server.client() as killer:
        killer.client_kill_filter(_id=ids[0])
    assert execute(client, [("INCR", key)], fallback) == [4]
    assert len(checkouts) == 2 and fallback.calls == 0
    assert len(client.connection_pool._in_use_connections) == 1  # the new spare only
    client.close()


def test_a_spares_checkout_test_keeps_one_poll_for_its_socket(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The test a spare passes before each batch (nothing left to read, not closed) polls
    its socket with a poll kept for that socket, not one made per batch; a server that
    closed the spare is still seen (the next batch goes on a new connection)."""
    made: list[object] = []
    poll = select.poll

    def counted() -> object:
        made.append(p := poll())
        return p

    monkeypatch.setattr(select, "poll", counted)
    key = fresh_key()
    client = redis.Redis(host="127.0.0.1", port=redis_server.port, retry=Retry(NoBackoff(), 0))
    fallback = Fallback(client, [("INCR", key)])
    ids = [execute(client, [("INCR", key), ("CLIENT", "ID")], fallback)[1]]  # (connects)
    made.clear()
    ids += [execute(client, [("INCR", key), ("CLIENT", "ID")], fallback)[1] for _ in range(4)]
    assert len(set(ids)) == 1 and len(made) == 1
    with redis_server.client() as killer:
        killer.client_kill_filter(_id=ids[0])
    assert execute(client, [("INCR", key)], fallback) == [6] and fallback.calls == 0
    client.close()


@pytest.mark.parametrize("inuse", [True, False])
def test_a_spare_the_pool_disconnected_between_batches_is_not_used_socketless(
    redis_server: RedisServer,  # noqa: F811
    inuse: bool,
) -> None:
    """``pool.disconnect()`` between two batches closes the spare too (it stays in the
    pool's in-use set): its parser loses its socket and reader, the checkout test refuses
    it, and the next batch goes on a connection of the pool connected afresh, not through
    the fallback, by a client that retries nothing; ``disconnect(inuse_connections=False)``
    leaves the spare connected and used again. Either way the pool holds one connection."""
    key = fresh_key()
    client = redis.Redis(host="127.0.0.1", port=redis_server.port, retry=Retry(NoBackoff(), 0))
    fallback = Fallback(client, [("INCR", key)])
    pool = client.connection_pool
    first = execute(client, [("INCR", key), ("CLIENT", "ID")], fallback)[1]
    pool.disconnect(inuse_connections=inuse)
    second = execute(client, [("INCR", key), ("CLIENT", "ID")], fallback)
    assert second[0] == 2 and fallback.calls == 0
    assert (second[1] != first) is inuse
    connections = [*pool._in_use_connections, *pool._available_connections]
    assert len(connections) == 1 and connections[0]._sock is not None
    client.close()
