"""A real Redis for tests: one ``redis-server`` per test module on a free loopback port, with no
persistence and its files in a temporary folder, stopped when the module ends.

Use it from a test module with ``from tests.redis_support import redis_server  # noqa: F401``
and ask for ``redis_server`` (a :class:`RedisServer`) or ``redis_client``. Without
``redis-server`` on the machine the tests that need it are skipped with the reason, except under
CI (``CI=true``), where a missing server is a failure: CI must not go green by testing nothing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes]
    port: int
    root: Path

    def client(self) -> redis.Redis:
        """A new client (a new connection pool): two of them act like two workers."""
        return redis.Redis(host="127.0.0.1", port=self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_redis(
    root: Path, *, timeout: float = 15.0, port: int | None = None, aof: str | None = None
) -> RedisServer:
    """Start ``redis-server`` under ``root`` and wait until it answers PING. ``port``: that
    one (a restart); ``aof``: append-only file on, with this ``appendfsync`` policy."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": required under CI")
        pytest.skip(message)
    last_error: Exception | None = None
    fixed = port
    persistence = ["--appendonly", "no"]
    if aof is not None:
        persistence = ["--appendonly", "yes", "--appendfsync", aof]
    for _ in range(3):  # the free port may be taken by someone else before the server binds
        port = fixed or free_port()
        log = root / f"redis-{port}.log"
        process = subprocess.Popen(
            [
                binary,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                *persistence,
                "--dir", str(root),
                "--logfile", str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = RedisServer(process, port, root)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with server.client() as client:
                    if client.ping():
                        return server
            except redis.ConnectionError as exc:
                last_error = exc
                time.sleep(0.05)
        server.stop()
    raise RuntimeError(f"redis-server did not answer PING: {last_error}")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client()
    try:
        yield client
    finally:
        client.close()


def fresh_key() -> str:
    """A crawl key no other test uses (tests share one server per module)."""
    return "t-" + uuid.uuid4().hex[:12]
