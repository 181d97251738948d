"""A Redis with a password (``requirepass``): the password comes from a file or the environment,
never from the command line, and appears in no log, stats file, items file or JOBDIR file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawling import finish_crawl, run_crawl, start_crawl
from tests.redis_support import RedisServer, fresh_key, start_redis
from tests.test_redis_acl import small_site

pytestmark = pytest.mark.integration

SECRET = "s3cret-Pa55-" + "x" * 12


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("redis-auth"), password=SECRET)
    try:
        yield server
    finally:
        server.stop()


def settings(redis: RedisServer, tmp: Path, **extra: object) -> dict[str, object]:
    return {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",  # no password in it
        "FRONTIER_REDIS_KEY": fresh_key(),
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0,
        "JOBDIR": tmp / "job",
        **extra,
    }


def files_holding(root: Path, secret: str, *, besides: Path) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if p.is_file() and p != besides and secret.encode() in p.read_bytes()
    ]


def test_the_password_from_a_file_reaches_redis_and_nothing_else(
    tmp_path: Path, locked_redis: RedisServer
) -> None:
    secret_file = tmp_path / "redis.pass"
    secret_file.write_text(SECRET + "\n")
    with small_site() as server:
        proc = start_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=settings(locked_redis, tmp_path, REDIS_PASSWORD_FILE=secret_file),
        )
        assert SECRET not in " ".join(map(str, proc.args))  # not in ps, not in scrapyd's log
        result = finish_crawl(proc, tmp_path, timeout=120)
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.log[
        -3000:
    ]
    assert result.stats.get("pages/ok", 0) > 0
    assert SECRET not in result.log
    assert files_holding(tmp_path, SECRET, besides=secret_file) == []  # log, stats, JOBDIR


def test_the_password_from_the_environment_and_a_wrong_one_refused_in_one_line(
    tmp_path: Path, locked_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAWL_REDIS_PASSWORD", "wrong-" + SECRET)
    with small_site() as server:
        refused = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=settings(locked_redis, tmp_path, REDIS_PASSWORD_ENV="CRAWL_REDIS_PASSWORD"),
        )
        monkeypatch.setenv("CRAWL_REDIS_PASSWORD", SECRET)
        ok = run_crawl(
            tmp_path,
            seeds=server.seeds(),
            settings=settings(locked_redis, tmp_path, REDIS_PASSWORD_ENV="CRAWL_REDIS_PASSWORD"),
        )
    assert refused.returncode == 2
    assert "refused the crawl's login" in refused.log and SECRET not in refused.log
    assert ok.returncode == 0 and ok.stats["finish_reason"] == "finished", ok.log[-3000:]
    assert SECRET not in ok.log
    assert files_holding(tmp_path, SECRET, besides=tmp_path / "none") == []
