"""A worker whose Redis master is demoted to a replica by a failover, behind a managed
endpoint (or a DNS name) that names the new master once it is promoted.

The old master keeps its clients' connections and answers their writes ``READONLY``: that is
Redis away for now (``crawler.backends.redis.outage``), the frontier's calls are retried, and
the retries connect anew (``crawler.backends.redis.connection.FailoverParser``), so they reach
the new master: nothing the worker queued meanwhile is lost. Two real ``redis-server``s, the
endpoint a loopback proxy whose target is switched as a managed endpoint's DNS is. A replica
given as the crawl's Redis from the start is refused before the crawl, in one line."""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.frontier import Entry
from tests.redis_support import RedisServer, fresh_key, start_redis
from tests.reply_cut import reply_cutter
from tests.test_redis_crawl import wait_until

pytestmark = pytest.mark.integration


def started(root: Path) -> RedisServer:
    root.mkdir()
    return start_redis(root)


def role(server: RedisServer) -> str:
    with server.client() as client:
        return str(client.info("replication")["role"])


def fail_over(old: RedisServer, new: RedisServer) -> None:
    """``new`` made a replica of ``old``, then promoted in its place (``FAILOVER``: the old
    master's writes paused until its replica caught up), ``old`` its replica."""
    with new.client() as client:
        client.replicaof("127.0.0.1", old.port)
        wait_until(
            lambda: client.info("replication").get("master_link_status") == "up", timeout=60
        )
    with old.client() as client:
        client.execute_command("FAILOVER")
    wait_until(lambda: role(old) == "slave" and role(new) == "master", timeout=60)


def leased(frontier: Any, url: str) -> bool:
    lease = frontier.next()
    if lease is None:
        return False
    assert lease.entry.url == url
    return True


@pytest.mark.parametrize("after", ["endpoint moved", "master again"])
def test_a_worker_rides_out_its_master_demoted_by_a_failover(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, after: str
) -> None:
    """The worker's master demoted (``FAILOVER``), then either the endpoint names the new
    master, or the old one is made master again (``REPLICAOF NO ONE``): what the worker
    queued while its writes were refused is queued."""
    caplog.set_level(logging.INFO)
    old, new = started(tmp_path / "old"), started(tmp_path / "new")
    try:
        with reply_cutter(old.port) as endpoint:  # (it cuts nothing here: a TCP proxy)
            url = f"redis://127.0.0.1:{endpoint.port}/0"
            settings = Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no"})
            frontier: Any = RedisFrontierStore(settings, fresh_key()).open_frontier()
            try:
                frontier.add(Entry("http://h0.test/a", "h0.test"))
                wait_until(lambda: leased(frontier, "http://h0.test/a"), timeout=60)
                fail_over(old, new)
                frontier.add(Entry("http://h1.test/a", "h1.test"))  # refused: READONLY
                wait_until(lambda: "Shared frontier unreachable" in caplog.text, timeout=60)
                if after == "endpoint moved":
                    endpoint.target = ("127.0.0.1", new.port)
                else:
                    with old.client() as client:
                        client.replicaof("NO", "ONE")
                wait_until(lambda: leased(frontier, "http://h1.test/a"), timeout=60)
            finally:
                frontier.close()
    finally:
        old.stop()
        new.stop()
    assert "Redis frontier call failed" not in caplog.text
    assert "READONLY" in caplog.text or "read only replica" in caplog.text
    assert caplog.text.count("Shared frontier back after") == 1


@pytest.mark.parametrize(
    "params", [{}, {"single_connection_client": True}], ids=["pool", "single connection"]
)
def test_a_client_of_a_demoted_master_connects_anew(
    tmp_path: Path, params: dict[str, Any]
) -> None:
    """redis-py keeps a connection that was answered ``READONLY``: the crawl's client drops
    it, so that once the endpoint names the new master the next write reaches it. With
    ``REDIS_PARAMS={"single_connection_client": True}`` the client's one connection is made
    when the client is, so it too must be one that is dropped."""
    old, new = started(tmp_path / "old"), started(tmp_path / "new")
    try:
        with reply_cutter(old.port) as endpoint:
            url = f"redis://127.0.0.1:{endpoint.port}/0"
            client = redis_client(
                Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no", "REDIS_PARAMS": params})
            )
            client.set("k", "1")
            fail_over(old, new)
            with pytest.raises(redis.ReadOnlyError):
                client.set("k", "2")
            endpoint.target = ("127.0.0.1", new.port)
            written = False
            for _ in range(2):  # (one made anew before the switch may still be the old one's)
                with contextlib.suppress(redis.ReadOnlyError):
                    written = bool(client.set("k", "3"))
                    break
            assert written
            client.close()
        with new.client() as direct:
            assert direct.get("k") == b"3"
    finally:
        old.stop()
        new.stop()


def test_every_connection_of_the_pool_leaves_a_demoted_master_at_its_first_readonly(
    tmp_path: Path,
) -> None:
    """The pool's other connections went to the same endpoint as the one answered
    ``READONLY``: they are made anew too, so the next write on any of them reaches the new
    master, instead of each meeting ``READONLY`` in its turn (one more outage of the crawl
    each: a CI run saw two "back" lines for one failover)."""
    old, new = started(tmp_path / "old"), started(tmp_path / "new")
    try:
        with reply_cutter(old.port) as endpoint:
            url = f"redis://127.0.0.1:{endpoint.port}/0"
            client = redis_client(Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no"}))
            pool = client.connection_pool
            first, other = pool.get_connection(), pool.get_connection()  # both to the old one
            fail_over(old, new)
            first.send_command("SET", "k", "1")
            with pytest.raises(redis.ReadOnlyError):
                first.read_response()
            endpoint.target = ("127.0.0.1", new.port)
            pool.release(first)
            pool.release(other)  # (last in, first out: the next command takes it)
            assert client.set("k", "2") and client.set("k", "3")
            client.close()
        with new.client() as direct:
            assert direct.get("k") == b"3"
    finally:
        old.stop()
        new.stop()


def test_a_call_that_a_replica_refuses_gives_up_after_the_wait(tmp_path: Path) -> None:
    """A replica where the master should be (a wrong ``REDIS_URL``, a demoted master nobody
    repoints): its reads answer, so the outage's probe finds Redis back at once, and each
    write is refused again. The caller's wait (``REDIS_OUTAGE_WAIT``) still bounds the call,
    counted from its first failure: it ends in :class:`RedisUnavailable`, naming the refusal."""
    master, replica = started(tmp_path / "master"), started(tmp_path / "replica")
    try:
        with replica.client() as direct:
            direct.replicaof("127.0.0.1", master.port)
        url = f"redis://127.0.0.1:{replica.port}/0"
        client = redis_client(Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no"}))
        outage = RedisOutage("test", lambda: client.exists("k"), wait=1.0)
        ended: list[BaseException] = []

        def call() -> None:
            try:
                outage.call(lambda: client.set("k", "1"))
            except BaseException as exc:
                ended.append(exc)

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(60)
        gave_up = not thread.is_alive()
        outage.close()  # (a caller still waiting gives up: the thread ends either way)
        thread.join(10)
        client.close()
        assert gave_up  # by itself, not closed
        assert ended and isinstance(ended[0], RedisUnavailable), ended
        assert isinstance(ended[0].cause, redis.ReadOnlyError)
        assert outage.outages >= 1
    finally:
        master.stop()
        replica.stop()


def test_a_replica_refusing_every_write_is_one_outage_not_a_loop(tmp_path: Path) -> None:
    """The probe's read answers on a replica, so it finds Redis back at once; each write is
    refused again (``READONLY``). That is one outage: one line when it begins, each try
    after the last one's delay (not a loop of tries, each with its two lines and its probe
    thread), and one line once a write goes through (the replica promoted)."""
    master, replica = started(tmp_path / "master"), started(tmp_path / "replica")
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    log = logging.getLogger("test.demoted.loop")
    log.propagate = False
    log.addHandler(Lines())
    try:
        with replica.client() as direct:
            direct.replicaof("127.0.0.1", master.port)
        url = f"redis://127.0.0.1:{replica.port}/0"
        client = redis_client(Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no"}))
        outage = RedisOutage("test", lambda: client.exists("k"), wait=1.0, log=log)
        tries = [0]

        def write() -> Any:
            tries[0] += 1
            return client.set("k", "1")

        with pytest.raises(RedisUnavailable):
            outage.call(write)
        # (the delays between tries double from 0.05 s: a handful fit in the 1 s wait)
        assert tries[0] < 20, tries
        assert outage.outages == 1
        assert [line for line in lines if "unreachable" in line] == lines[:1], lines
        assert not [line for line in lines if "back" in line], lines
        with replica.client() as direct:
            direct.replicaof("NO", "ONE")
        wait_until(lambda: role(replica) == "master", timeout=60)
        assert outage.call(write, wait=60) is True
        assert [line for line in lines if "Redis back" in line][1:] == [], lines
        assert any("Redis back" in line for line in lines), lines
        assert outage.outages == 1
        outage.close()
        client.close()
    finally:
        master.stop()
        replica.stop()


def test_a_replica_given_as_the_crawls_redis_is_refused_before_the_crawl(
    tmp_path: Path,
) -> None:
    master, replica = started(tmp_path / "master"), started(tmp_path / "replica")
    try:
        with replica.client() as direct:
            direct.replicaof("127.0.0.1", master.port)
        url = f"redis://127.0.0.1:{replica.port}/0"
        settings = Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no"})
        problems = RedisFrontierStore(settings, fresh_key()).check_server()
        assert len(problems) == 1 and "read-only replica" in problems[0], problems
    finally:
        master.stop()
        replica.stop()


def test_a_replica_given_as_the_crawls_redis_is_refused_under_a_reset_too(
    tmp_path: Path,
) -> None:
    """``FRONTIER_RESET=True`` skips the checks on the crawl's stored data (it is about to be
    removed), not those on the server: a replica is refused before the crawl, in one line,
    instead of the crawl's writes being refused (``READONLY``) for ever."""
    master, replica = started(tmp_path / "master"), started(tmp_path / "replica")
    try:
        with replica.client() as direct:
            direct.replicaof("127.0.0.1", master.port)
        url = f"redis://127.0.0.1:{replica.port}/0"
        settings = Settings({"REDIS_URL": url, "REDIS_CLUSTER": "no", "FRONTIER_RESET": True})
        problems = RedisFrontierStore(settings, fresh_key()).check_server()
        assert len(problems) == 1 and "read-only replica" in problems[0], problems
    finally:
        master.stop()
        replica.stop()
