"""The servers the Redis backend runs on (issue 37): Debian's Redis 7.0, the same with RedisBloom
loaded, and Valkey 8.1. Each kind of tests/redis_support.py starts the server it names, and the
Redis contract and unit suites pass on the two kinds the rest of the suite does not use: they run
again here, in a pytest of their own with ``CRAWLER_TEST_REDIS`` set, so that README's test
command (what CI runs) covers every kind from this one place.

The whole suite runs on another kind with ``CRAWLER_TEST_REDIS=valkey`` (or ``redis-bloom``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redis_support import KIND_VARIABLE, KINDS, server_kind, start_redis

ROOT = Path(__file__).resolve().parent.parent

# The suites that test the Redis backend without a crawl: about 50 s on each kind on a loaded
# two-core machine. The crawls and the slower server tests (cluster users, credentials, TLS, fleet
# metrics) run on the suite's kind only; the whole suite on another kind is one variable away.
SUITES_ON_EVERY_KIND = (
    "tests/test_frontier_partitioned.py",
    "tests/test_partition_mail.py",
    "tests/test_partition_ownership.py",
    "tests/test_partition_seenset.py",
    "tests/test_controls.py",
    "tests/test_neardup_shared.py",
    "tests/test_redis_keys.py",
    "tests/test_redis_cluster_client.py",
)


def _info(kind: str, tmp_path: Path) -> tuple[dict[str, object], list[object]]:
    server = start_redis(tmp_path, kind=kind)
    try:
        with server.client() as client:
            return client.info("server"), client.module_list()
    finally:
        server.stop()


def test_redis_is_debians_redis_7_0_without_modules(tmp_path: Path) -> None:
    info, modules = _info("redis", tmp_path)
    assert str(info["redis_version"]).startswith("7.0.")
    assert "server_name" not in info  # Valkey names itself there
    assert modules == []


def test_redis_bloom_is_debians_redis_with_the_bloom_module(tmp_path: Path) -> None:
    info, modules = _info("redis-bloom", tmp_path)
    assert str(info["redis_version"]).startswith("7.0.")
    assert [m[b"name"] for m in modules] == [b"bf"]  # type: ignore[index]


def test_valkey_is_valkey_8_1(tmp_path: Path) -> None:
    info, _ = _info("valkey", tmp_path)
    assert info["server_name"] == "valkey"
    assert str(info["valkey_version"]).startswith("8.1.")


def test_bloom_filters_add_and_test_many_urls_in_one_call(tmp_path: Path) -> None:
    """``BF.MADD``/``BF.MEXISTS``: what a seen-set on RedisBloom would send, one call per batch
    of fingerprints (with the default filter ``BF.MADD`` creates, error rate 1 %)."""
    server = start_redis(tmp_path, kind="redis-bloom")
    try:
        with server.client() as client:
            added = client.execute_command("BF.MADD", "seen", "https://a.test/", "https://b.test/")
            again = client.execute_command("BF.MADD", "seen", "https://a.test/", "https://c.test/")
            known = client.execute_command(
                "BF.MEXISTS", "seen", "https://a.test/", "https://b.test/", "https://c.test/"
            )
    finally:
        server.stop()
    assert added == [1, 1]
    assert again == [0, 1]  # 0: already (probably) in the filter
    assert known == [1, 1, 1]


def test_an_unknown_kind_fails_rather_than_testing_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KIND_VARIABLE, "keydb")
    with pytest.raises(pytest.fail.Exception, match="redis, redis-bloom, valkey"):
        server_kind()


# one test per kind and suite, not per kind: the suite's workers share them out, where a
# minute-long pytest of all of them could start last and keep the run waiting for it
@pytest.mark.parametrize("suite", SUITES_ON_EVERY_KIND)
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "redis"])
def test_the_redis_suites_pass_on(kind: str, suite: str) -> None:
    server_kind(kind)  # a missing server: the reason in one line (a failure under CI)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[KIND_VARIABLE] = kind
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", suite],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
