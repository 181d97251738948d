"""A cluster client that reaches no node says so with one error, "Redis Cluster cannot be
connected", whatever the reason its last node gave: Redis away (a lost connection: waited
for) or a mistake waiting will not mend (a refused password, ``REDIS_CLUSTER=yes`` naming a
Redis that is no cluster node). The mistakes must end the crawl with their reason, not keep
it waiting for a Redis said to be "unreachable" (the start-up wait, the frontier's worker
and every other Redis user tell them apart alike: ``outage.is_transient``).

Real servers: a Redis with a password, and one stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import RedisClusterException
from scrapy.settings import Settings

from crawler.backends.redis.connection import redis_client
from crawler.backends.redis.frontier_store import RedisFrontierStore, away
from crawler.backends.redis.outage import is_transient
from tests.crawling import run_crawl
from tests.redis_support import RedisServer, fresh_key, start_redis
from tests.test_redis_acl import small_site
from tests.test_redis_crawl import wait_until

pytestmark = pytest.mark.integration

SECRET = "cluster-mistake-" + "y" * 12


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("redis-locked"), password=SECRET)
    try:
        yield server
    finally:
        server.stop()


def cluster_settings(port: int, tmp_path: Path, password: str | None = None) -> Settings:
    values: dict[str, Any] = {"REDIS_URL": f"redis://127.0.0.1:{port}/0", "REDIS_CLUSTER": "yes"}
    if password is not None:
        secret = tmp_path / "redis.pass"
        secret.write_text(password + "\n")
        values["REDIS_PASSWORD_FILE"] = str(secret)
    return Settings(values)


def cluster_error(settings: Settings) -> RedisClusterException:
    with pytest.raises(RedisClusterException, match="cannot be connected") as raised:
        redis_client(settings)
    return raised.value


@pytest.mark.parametrize("password", ["wrong-" + SECRET, SECRET], ids=["refused", "no-cluster"])
def test_a_mistake_behind_cannot_be_connected_is_not_redis_away(
    tmp_path: Path, locked_redis: RedisServer, password: str
) -> None:
    settings = cluster_settings(locked_redis.port, tmp_path, password)
    exc = cluster_error(settings)
    assert not is_transient(exc), exc
    assert not away(exc), exc  # the start-up wait goes on to the checks at once
    problems = RedisFrontierStore(settings, "crawl").check_server()
    assert len(problems) == 1, problems
    assert ("username-password" if password != SECRET else "Cluster mode") in problems[0]
    assert SECRET not in problems[0]


def test_a_cluster_none_of_whose_nodes_answers_is_redis_away(tmp_path: Path) -> None:
    server = start_redis(tmp_path)
    server.stop()
    exc = cluster_error(cluster_settings(server.port, tmp_path))
    assert is_transient(exc) and away(exc), exc


def test_the_frontier_is_refused_when_the_cluster_client_cannot_log_in(
    tmp_path: Path, locked_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = cluster_settings(locked_redis.port, tmp_path, "wrong-" + SECRET)
    frontier: Any = RedisFrontierStore(settings, fresh_key()).open_frontier(lease_ttl=30.0)
    try:
        wait_until(lambda: frontier.refused or "Shared frontier unreachable" in caplog.text)
    finally:
        frontier.close()
    assert "username-password" in frontier.refused, caplog.text
    assert "Shared frontier unreachable" not in caplog.text


def test_a_crawl_whose_cluster_login_is_refused_ends_at_once_in_one_line(
    tmp_path: Path, locked_redis: RedisServer
) -> None:
    secret = tmp_path / "redis.pass"
    secret.write_text("wrong-" + SECRET + "\n")
    with small_site() as server:
        refused = run_crawl(tmp_path, timeout=60, seeds=server.seeds(), settings={
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{locked_redis.port}/0",
            "REDIS_CLUSTER": "yes",
            "REDIS_PASSWORD_FILE": secret,
            "FRONTIER_REDIS_KEY": fresh_key(),
            "ALLOW_PRIVATE_ADDRESSES": True,
            "JOBDIR": tmp_path / "job",
        })  # fmt: skip
    assert refused.returncode == 2, refused.log[-3000:]
    assert "refused the crawl's login" in refused.log
    assert "not reachable" not in refused.log and SECRET not in refused.log
