"""Redis over TLS (``rediss://``): a redis-server with only a TLS port and client certificates
required, a throwaway CA made by the test. A crawl with ``REDIS_URL=rediss://...`` and the CA
and client certificate in ``REDIS_PARAMS`` completes and its state is in that Redis; the same
URL without the CA is refused before any request (the server's certificate is verified, not
trusted blindly)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawling import run_crawl
from tests.partition_support import seen_count
from tests.redis_support import RedisServer, TlsFiles, fresh_key, make_tls_files, start_redis
from tests.test_redis_crawl import site

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
        # the near-duplicate store on Redis is being ported on another branch
        "BACKEND_CLASSES": {"neardup_store": "crawler.content.neardup.NearDuplicateDetector"},
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
    with site(pages=5) as server:
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
    with site(pages=2) as server:
        result = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=settings(tls_redis, tmp_path, fresh_key(), params),
        )
        fetched = list(server.records)
    assert result.returncode == 2, result.log[-3000:]
    assert "is not reachable" in result.log and "CERTIFICATE_VERIFY_FAILED" in result.log
    assert fetched == []
