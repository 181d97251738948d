"""``REDIS_URL`` may name any node of a Redis Cluster: the crawl's client is then redis-py's
cluster client, with the same password, parameters and bytes replies as for one Redis
(``crawler/backends/redis/connection.py``). Against a real cluster (3 masters with a replica
each) and a real single ``redis-server``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import MovedError
from scrapy.settings import Settings

from crawler.backends.redis import connection
from crawler.backends.redis.connection import redis_client, safe_url
from crawler.config.schema import SettingValueError, read_value
from tests.redis_cluster_support import RedisClusterServers, redis_cluster, start_cluster  # noqa: F401
from tests.redis_support import RedisServer, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

SECRET = "cl0ster-Pa55-" + "y" * 10


def settings(url: str, **extra: object) -> Settings:
    return Settings({"REDIS_URL": url, **extra})


def info_calls(node_client: redis.Redis) -> int:
    """``INFO`` calls the node has answered before this one (which is an ``INFO`` too)."""
    stats = node_client.info("commandstats")
    return int(stats.get("cmdstat_info", {}).get("calls", 0))


def test_any_node_of_a_cluster_gives_a_cluster_client_that_reaches_every_slot(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    """Masters and replicas alike: the client reads the slot map from the node it was given
    and writes keys that land on every master."""
    keys = [f"{{crawl-{i}}}:k" for i in range(60)]
    for node in redis_cluster.live():
        client = redis_client(settings(f"redis://{node.address}/0"))
        try:
            assert isinstance(client, RedisCluster)
            for key in keys:
                client.set(key, node.port)
            assert {int(client.get(k)) for k in keys} == {node.port}  # bytes replies
            owners = {client.get_node_from_key(k).port for k in keys}
            assert len(owners) == 3  # every master was written to
        finally:
            client.close()


def test_one_redis_gives_a_plain_client(redis_server: RedisServer) -> None:  # noqa: F811
    client = redis_client(settings(f"redis://127.0.0.1:{redis_server.port}/0"))
    try:
        assert type(client) is redis.Redis and not isinstance(client, RedisCluster)
        client.set("k", "v")
        assert client.get("k") == b"v"
    finally:
        client.close()


def test_auto_asks_the_node_once_per_process_and_address(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    node = redis_cluster.live()[1]
    connection._cluster_answers.clear()
    with node.client() as direct:
        before = info_calls(direct)
        clients = [redis_client(settings(f"redis://{node.address}/0")) for _ in range(3)]
        after = info_calls(direct)
    for c in clients:
        c.close()
    assert after - before - 1 == 1  # less the INFO that counted them


def test_yes_and_no_say_it_without_asking(
    redis_cluster: RedisClusterServers,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """``no`` on a cluster node is one Redis: a key of another master's slots is answered
    MOVED (what ``auto`` saves an operator from); ``yes`` on one Redis is refused by redis-py
    (cluster support is off there)."""
    node = redis_cluster.masters()[0]
    plain = redis_client(settings(f"redis://{node.address}/0", REDIS_CLUSTER="no"))
    try:
        assert type(plain) is redis.Redis
        with redis_cluster.client() as view:
            elsewhere = next(
                f"{{t{i}}}" for i in range(1000)
                if view.get_node_from_key(f"{{t{i}}}").port != node.port
            )
        with pytest.raises(MovedError):
            plain.get(elsewhere)
    finally:
        plain.close()
    cluster = redis_client(settings(f"redis://{node.address}", REDIS_CLUSTER="YES"))
    assert isinstance(cluster, RedisCluster)
    cluster.close()
    with pytest.raises(redis.exceptions.RedisClusterException):
        redis_client(settings(f"redis://127.0.0.1:{redis_server.port}/0", REDIS_CLUSTER="yes"))


def test_what_a_cluster_cannot_take_is_refused_in_one_line(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    url = redis_cluster.url
    with pytest.raises(ValueError, match="only database 0"):
        redis_client(settings(url + "/1"))
    with pytest.raises(ValueError, match="decode_responses must be off"):
        redis_client(settings(url, REDIS_PARAMS={"decode_responses": True}))
    with pytest.raises(ValueError, match="REDIS_CLUSTER must be one of"):
        redis_client(settings(url, REDIS_CLUSTER="sometimes"))
    with pytest.raises(SettingValueError):
        read_value("REDIS_CLUSTER", "sometimes")
    assert read_value("REDIS_CLUSTER", "Auto") == "auto"


def test_a_reactor_client_fails_fast(
    redis_cluster: RedisClusterServers,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The robots.txt cache's client (on the reactor): one attempt on one Redis, two on a
    cluster (the second after the slot map is read again), socket timeouts of at most 2 s."""
    single = redis_client(settings(f"redis://127.0.0.1:{redis_server.port}/0"), fail_fast=True)
    assert single.get_retry().get_retries() == 0
    kwargs = single.get_connection_kwargs()
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == 2.0
    single.close()
    client = redis_client(
        settings(redis_cluster.url, REDIS_PARAMS={"socket_timeout": 0.5}), fail_fast=True
    )
    try:
        assert client.retry.get_retries() == 1
        assert client.get_connection_kwargs()["socket_timeout"] == 0.5
        assert client.set("{reactor}:k", 1)
    finally:
        client.close()


@pytest.fixture(scope="module")
def locked_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """A cluster whose nodes ask for a password (``requirepass``; ``masterauth`` for the
    replicas), set once it has formed, as an operator locks a running cluster."""
    cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster-auth"))
    try:
        for node in cluster.live():
            with node.client() as c:
                c.config_set("masterauth", SECRET)
                c.config_set("requirepass", SECRET)
        yield cluster
    finally:
        cluster.stop()


def test_a_cluster_with_a_password_from_a_file(
    tmp_path: Path, locked_cluster: RedisClusterServers
) -> None:
    """The password reaches every node (from ``REDIS_PASSWORD_FILE``, as for one Redis), the
    URL shown has none, and a client without it is refused without showing it."""
    node = locked_cluster.nodes[0]
    secret_file = tmp_path / "redis.pass"
    secret_file.write_text(SECRET + "\n")
    client = redis_client(settings(f"redis://{node.address}/0", REDIS_PASSWORD_FILE=secret_file))
    try:
        assert isinstance(client, RedisCluster)
        keys = [f"{{locked-{i}}}" for i in range(30)]
        for key in keys:
            client.set(key, b"x")
        assert len({client.get_node_from_key(k).port for k in keys}) == 3
    finally:
        client.close()
    shown = safe_url(settings(f"redis://:{SECRET}@{node.address}/0"))
    assert SECRET not in shown and "***" in shown
    with pytest.raises(redis.AuthenticationError) as refused:
        redis_client(settings(f"redis://{locked_cluster.nodes[1].address}/0"))
    assert SECRET not in str(refused.value)


def test_a_redirect_to_a_new_master_mid_reshard_is_followed(tmp_path: Path) -> None:
    """A reshard's first slot moving to a master that owns none yet: the old owner answers
    ``ASK <new master>`` for a key it no longer has, and the crawler's client follows it
    (redis-py's own fails there with an AttributeError, redis/redis-py#4015: checked below so
    that this test says when the workaround can go)."""
    cluster = start_cluster(tmp_path, masters=3, replicas=0)
    try:
        new = cluster.add_master()
        client = redis_client(settings(cluster.url))
        key = "{reshard}:k"
        slot = client.keyslot(key)
        source = next(n for n in cluster.live() if n.port == client.get_node_from_key(key).port)
        with new.client() as target, source.client() as old:
            target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(source))
            old.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(new))
        try:
            assert client.set(key, b"v")  # not at the old owner: ASK, to the new master
            pipe = client.pipeline()  # a pipeline's command follows it too
            pipe.set("{reshard}:piped", b"p")
            assert pipe.execute() == [True]
            with new.client() as target:
                target.execute_command("ASKING")
                assert target.get(key) == b"v"
                target.execute_command("ASKING")
                assert target.get("{reshard}:piped") == b"p"
            plain = RedisCluster(host="127.0.0.1", port=source.port)
            try:
                with pytest.raises(AttributeError):
                    plain.set("{reshard}:other", b"v")
            finally:
                plain.close()
        finally:
            client.close()
    finally:
        cluster.stop()
