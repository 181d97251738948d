"""The fenced call without a script (``crawler.backends.redis.fence.transact``): the lease is
watched and read, then the writes go in a transaction on the same connection. What another
connection does between the two (a claim, a renewal) is what the fence must see: a claim
refuses the call, a renewal makes it run again, once."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import MovedError, TryAgainError

from crawler.backends.redis import fence, wire
from crawler.backends.redis.fence import FencedWriter, PartitionLost, raise_reply_error
from crawler.backends.redis.keys import PartitionKeys
from tests.redis_support import fresh_key, redis_client, redis_server, start_redis  # noqa: F401
from tests.test_redis_crawl import wait_until


def owned(client: redis.Redis, keys: PartitionKeys) -> FencedWriter:
    client.incr(keys.epoch)
    client.set(keys.lease, "w1/1", px=60_000)
    return FencedWriter(client, keys, "w1/1", 60.0)


@contextmanager
def between(
    monkeypatch: pytest.MonkeyPatch, meddle: Callable[[], None], times: int = 1
) -> Iterator[list[bytes]]:
    """``meddle`` runs after the first ``times`` fenced calls read their leases, before their
    transactions are sent; yields the commands that opened each round trip."""
    opened: list[bytes] = []
    real = wire.one_connection

    @contextmanager
    def spied(client: Any) -> Iterator[Any]:
        with real(client) as conn:
            run = conn.run_packed

            def meddled(request: bytes, count: int) -> list[Any]:
                opened.append(request.split(b"\r\n")[2])  # (the first command's name)
                if opened[-1] == b"MULTI" and opened.count(b"MULTI") <= times:
                    meddle()
                return run(request, count)

            conn.run_packed = meddled  # type: ignore[method-assign]
            yield conn

    monkeypatch.setattr(wire, "one_connection", spied)
    yield opened


def test_a_claim_between_the_check_and_the_writes_refuses_them(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lease lapses and another worker claims it after the owner read it as its own: the
    owner's transaction is aborted and, read again, the lease is the other's: nothing of the
    owner's writes lands."""
    keys = PartitionKeys(fresh_key(), 0, 1)
    writer = owned(redis_client, keys)
    writer.write("SET", keys.prefix + "x", "owner's")

    def claim() -> None:
        redis_client.delete(keys.lease)  # (lapsed)
        redis_client.incr(keys.epoch)
        redis_client.set(keys.lease, "w2/2", nx=True, px=60_000)

    with between(monkeypatch, claim), pytest.raises(PartitionLost):
        writer.flush()
    assert redis_client.get(keys.prefix + "x") is None
    assert redis_client.get(keys.lease) == b"w2/2"


def test_a_renewal_between_the_check_and_the_writes_makes_the_call_run_again_once(
    redis_client: redis.Redis,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's own renewal from another connection (its lease thread's ``GETEX``) lands
    between the read and the transaction: Redis aborts the transaction, the call is made again
    and its writes land once."""
    keys = PartitionKeys(fresh_key(), 0, 1)
    writer = owned(redis_client, keys)
    writer.write("RPUSH", keys.prefix + "x", "one")

    def renew() -> None:
        redis_client.getex(keys.lease, px=60_000)

    with between(monkeypatch, renew) as opened:
        writer.flush()
    assert opened == [b"WATCH", b"MULTI", b"WATCH", b"MULTI"]
    assert redis_client.lrange(keys.prefix + "x", 0, -1) == [b"one"]
    assert redis_client.get(keys.seq) == b"1"


def test_a_lapsed_lease_nobody_claimed_is_taken_back_with_the_writes(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """Redis was away longer than the lease: nobody claimed it (the epoch is the owner's), so
    the owner's next call sets it again with its writes."""
    keys = PartitionKeys(fresh_key(), 0, 1)
    writer = owned(redis_client, keys)
    redis_client.delete(keys.lease)
    writer.write("SET", keys.prefix + "x", "1")
    writer.flush()
    assert redis_client.get(keys.lease) == b"w1/1" and redis_client.pttl(keys.lease) > 0
    assert redis_client.get(keys.prefix + "x") == b"1"


def test_a_slot_move_said_by_one_redis_is_raised_to_go_again(
    redis_client: redis.Redis,  # noqa: F811
) -> None:
    """A ``MOVED`` among a call's replies on one Redis (no map of slots to read again) is
    raised as a slot that moves, as on a cluster: the call goes again later."""
    with pytest.raises(TryAgainError):
        raise_reply_error(redis_client, [b"OK", MovedError("3999 127.0.0.1:6381")])


def test_writes_without_their_replicas_are_said_once_per_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A master with one replica, which stopped answering, and owners that wait for two
    (``FRONTIER_REPLICA_WAIT=2``): every write goes on without its replicas. That the master
    has fewer replicas than asked, and that writes go on without them, is said once for the
    master, not once per partition's writer, nor again at every write that waited in vain
    (each has the replicas counted again)."""
    monkeypatch.setattr(fence, "REPLICA_WAIT_MS", 20)  # (each write waits this long in vain)
    (tmp_path / "m").mkdir()
    (tmp_path / "r").mkdir()
    master, replica = start_redis(tmp_path / "m"), start_redis(tmp_path / "r")
    try:
        with replica.client() as direct:
            direct.replicaof("127.0.0.1", master.port)
            wait_until(lambda: direct.info("replication").get("master_link_status") == "up")
        client = master.client()
        writers = []
        for index in range(2):
            keys = PartitionKeys(fresh_key(), index, 2)
            client.set(keys.epoch, "1")
            client.set(keys.lease, "w1/1", px=60_000)
            writers.append(FencedWriter(client, keys, "w1/1", 60.0, replicas=2))
        replica.process.send_signal(signal.SIGSTOP)  # (still the master's replica: ROLE)
        with caplog.at_level(logging.WARNING, logger=fence.__name__):
            for i in range(3):
                for writer in writers:
                    writer.write("SET", writer.lease_key + ":x", str(i))
                    writer.flush()
        assert [w.unreplicated for w in writers] == [3, 3]  # (each counted)
        said = [r.getMessage() for r in caplog.records]
        assert sum("FRONTIER_REPLICA_WAIT asks for 2" in m for m in said) == 1, said
        assert sum("without its replicas" in m for m in said) == 1, said
        client.close()
    finally:
        replica.process.send_signal(signal.SIGCONT)
        replica.stop()
        master.stop()
