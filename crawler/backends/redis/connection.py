"""Where every Redis user of a crawl gets its client, so all connect alike: from the settings
as scrapy-redis reads them (``REDIS_URL``, ``REDIS_PARAMS``), the password kept out of the URL,
to one Redis or a Redis Cluster (``REDIS_CLUSTER``: docs/topics/fleet.md), replies in bytes.
"""

from __future__ import annotations

import os
import socket
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis._parsers import _HiredisParser
from redis.backoff import NoBackoff
from redis.cluster import PRIMARY, ClusterNode, NodesManager, RedisCluster
from redis.exceptions import NoPermissionError, ReadOnlyError
from redis.retry import Retry
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object
from scrapy_redis import defaults as scrapy_redis_defaults
from scrapy_redis.connection import SETTINGS_PARAMS_MAP, get_redis

from crawler.config import defaults
from crawler.net.credentials import without_credentials, without_password

#: What :func:`redis_client` returns: one Redis, or a Redis Cluster's client.
RedisClient = redis.Redis | RedisCluster

REACTOR_SOCKET_TIMEOUT = 2.0  # seconds, at most, for a client called on the reactor thread

# auto's answers, by the address asked (URL without password, host, port): one INFO per process
# (two threads that ask at once both ask: harmless)
_cluster_answers: dict[tuple[str, str, str], bool] = {}


def redis_password(settings: BaseSettings) -> str | None:
    """The Redis password from ``REDIS_PASSWORD_FILE`` (a file's first line) or the environment
    variable named by ``REDIS_PASSWORD_ENV``, so it need not be in ``REDIS_URL``: scrapyd logs a
    job's arguments and ``ps`` shows a command line. None when neither is set."""
    path = settings.get("REDIS_PASSWORD_FILE", defaults.REDIS_PASSWORD_FILE)
    if path:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                return f.readline().rstrip("\r\n")
        except OSError as exc:
            raise ValueError(f"REDIS_PASSWORD_FILE: cannot read {path}: {exc.strerror}") from None
    name = settings.get("REDIS_PASSWORD_ENV", defaults.REDIS_PASSWORD_ENV)
    if name:
        if name not in os.environ:
            raise ValueError(f"REDIS_PASSWORD_ENV: the environment has no variable {name}")
        return os.environ[name]
    return None


def _params(settings: BaseSettings) -> dict[str, Any]:
    """The client's parameters as scrapy-redis assembles them, plus :func:`redis_password`."""
    params = dict(scrapy_redis_defaults.REDIS_PARAMS)
    params.update(settings.getdict("REDIS_PARAMS"))
    params.update({to: settings[k] for k, to in SETTINGS_PARAMS_MAP.items() if settings[k]})
    if isinstance(params.get("redis_cls"), str):  # scrapy-redis's choice of class, by name
        params["redis_cls"] = load_object(params["redis_cls"])
    password = redis_password(settings)
    if password is not None:
        params["password"] = password
    return params


def _is_cluster_mode(settings: BaseSettings, params: dict[str, Any]) -> bool:
    """``REDIS_CLUSTER``; ``auto`` asks the node, once per process and address, whether it says
    ``cluster_enabled:1`` (on database 0: a cluster node refuses ``SELECT``; a Redis that
    refuses ``INFO`` is one Redis)."""
    mode = str(settings.get("REDIS_CLUSTER") or defaults.REDIS_CLUSTER).strip().lower()
    if mode not in ("auto", "yes", "no"):
        raise ValueError(f"REDIS_CLUSTER must be one of auto, yes, no, got {mode!r}")
    if mode != "auto":
        return mode == "yes"
    url = str(params.get("url") or "")
    where = (without_password(url), str(params.get("host") or ""), str(params.get("port") or ""))
    if where not in _cluster_answers:
        probe = {**params, "db": 0, **({"url": _without_db(url)} if url else {})}
        with _single(probe) as client:
            try:
                enabled = client.info("cluster").get("cluster_enabled", 0)
            except redis.ResponseError:
                enabled = 0
        _cluster_answers[where] = str(enabled) == "1"
    return _cluster_answers[where]


def redis_client(settings: BaseSettings, *, fail_fast: bool = False) -> RedisClient:
    """A client from the crawl's settings. ``fail_fast``: for a client called on the reactor
    thread, which must not wait: one attempt per call on one Redis, two on a cluster (the
    second, after reloading the slot map, finds a replica promoted since the last call), and
    socket timeouts of at most :data:`REACTOR_SOCKET_TIMEOUT` seconds (scrapy-redis's are 30 s)."""
    params = _params(settings)
    cluster = _is_cluster_mode(settings, params)
    if fail_fast:
        params["retry"] = Retry(NoBackoff(), 1 if cluster else 0)
        for name in ("socket_timeout", "socket_connect_timeout"):
            given = params.get(name)
            params[name] = min(float(REACTOR_SOCKET_TIMEOUT if given is None else given),
                               REACTOR_SOCKET_TIMEOUT)
    return _cluster(params) if cluster else _single(params)


class RedirectedNodes(NodesManager):
    """redis-py's table of a cluster's nodes, with one fix still needed in redis-py 8.1: while
    a reshard moves its first slots to a master that owns none yet, the old owner answers
    ``ASK`` with an address the table does not know, and redis-py fails with an
    ``AttributeError`` (redis/redis-py#4015; tests/test_redis_cluster_client.py checks that it
    still does). A node named by a redirect is made on the spot instead."""

    def get_node(
        self, host: str | None = None, port: int | None = None, node_name: str | None = None
    ) -> ClusterNode | None:
        node = super().get_node(host, port, node_name)
        if node is None and node_name and ":" in node_name:
            address, _, number = node_name.rpartition(":")
            node = ClusterNode(address, int(number), PRIMARY)
            self.create_redis_connections([node])
            node = self.nodes_cache.setdefault(node.name, node)
        return node


class ReshardingCluster(RedisCluster):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes_manager.__class__ = RedirectedNodes  # the table redis-py built, fixed


class FailoverParser(_HiredisParser):
    """redis-py's hiredis parser, which also marks its connection to be made again when the
    server answers ``READONLY``: a master demoted to a replica by a failover, behind a DNS name
    or a managed endpoint that now names the new master. redis-py keeps such a connection (only
    its Sentinel client drops it), so a pool would ask the demoted node forever; marked, it is
    closed once its replies are read (the pool's release, redis-py's own command path, the
    lean path's keep: ``crawler.backends.redis.wire``), and the next command connects anew,
    resolving the name again. The error itself is Redis away for now
    (``crawler.backends.redis.outage``): the call is retried.

    Every other connection of the pool (``pool``, :func:`_single` binds it) went to the same
    name, so it is marked too (an idle one closed): else each would meet ``READONLY`` once in
    its turn, one more outage of the crawl each, long after the first had found the master."""

    pool: weakref.ref[redis.ConnectionPool] | None = None

    def on_connect(self, connection: Any, **kwargs: Any) -> None:
        super().on_connect(connection, **kwargs)
        self._owner = weakref.ref(connection)  # (no cycle: the connection holds its parser)

    def parse_error(self, response: str) -> Exception:  # type: ignore[override]
        error = super().parse_error(response)
        if isinstance(error, ReadOnlyError):
            owner = getattr(self, "_owner", None)
            conn = owner() if owner is not None else None
            if conn is not None:
                conn.mark_for_reconnect()
            pool = self.pool() if self.pool is not None else None
            if pool is not None:  # (its lock is an RLock: a parse under it may mark too)
                pool.update_active_connections_for_reconnect()
                pool.disconnect_free_connections()
        return error


def _single(params: dict[str, Any]) -> redis.Redis:
    """One Redis's client, its connections made with :class:`FailoverParser` (unless
    ``REDIS_PARAMS`` chose a parser, or hiredis's is not the default). A client made with
    ``single_connection_client`` took its one connection when it was made, with the default
    parser: that one is closed and given the failover's (the next command connects it), else
    it would stay on a demoted master for ever."""
    client = _bytes(get_redis(**params))
    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    if "parser_class" not in kwargs and redis.connection.DefaultParser is _HiredisParser:
        parser = type("FailoverParser", (FailoverParser,), {"pool": weakref.ref(pool)})
        kwargs["parser_class"] = parser
        if client.connection is not None:
            client.connection.disconnect()
            client.connection.set_parser(parser)
    return client


def _cluster(params: dict[str, Any]) -> RedisCluster:
    """The URL (or host and port) is the node the slot map is first read from; every other
    parameter goes to each node's connections."""
    params = dict(params)
    params.pop("redis_cls", None)  # scrapy-redis's choice of class: the class is chosen here
    db, url = params.pop("db", None), params.pop("url", None)
    if url:
        db = redis.connection.parse_url(url).get("db", db)
    if db not in (None, 0, "0"):
        raise ValueError(f"a Redis Cluster has only database 0, REDIS_URL asks for {db}")
    if url:
        return _bytes(ReshardingCluster.from_url(_without_db(url), **params))
    host, port = params.pop("host", None) or "localhost", int(params.pop("port", 6379))
    return _bytes(ReshardingCluster(host=host, port=port, **params))


def _bytes(client: Any) -> Any:
    """``client``, unless it would decode replies (the frontier's entries are msgpack)."""
    if client.get_connection_kwargs().get("decode_responses"):
        client.close()
        raise ValueError("REDIS_PARAMS: decode_responses must be off for the Redis frontier")
    return client


def _without_db(url: str) -> str:
    """``url`` without its database path (a cluster client refuses ``db`` even when it is 0)."""
    return urlunsplit(urlsplit(url)._replace(path=""))


@dataclass(frozen=True)
class Refusal:
    """A command the server's ACL refuses the client's user: the server's ``NOPERM`` words,
    and on a cluster the master that said them (each node keeps its own ACL users)."""

    command: tuple[Any, ...]
    reason: str
    node: str | None = None


def refused_commands(client: RedisClient, commands: Sequence[Sequence[Any]]) -> list[Refusal]:
    """The ``commands`` the client's user may not run, asked of one Redis or of each master of
    a cluster without running any: queued after ``MULTI``, then ``DISCARD``. Only ``NOPERM``
    is a refusal (``MOVED`` comes after the ACL check); a refused ``MULTI`` is the one refusal
    (the rest would run). A master that cannot be reached is left to the outage handling.
    One Redis that answers a queued write ``READONLY`` is a replica, where no write of the
    crawl would go through: :class:`ReadOnlyError` is raised (whatever the crawl has stored,
    so a check that does not read it learns it too). On a cluster that is a master demoted
    since the slot map was read: left to the outage handling, as an unreachable one."""
    nodes: list[tuple[str | None, Any]] = [(None, client)]  # a master's name on a cluster
    if isinstance(client, RedisCluster):
        nodes = [(n.name, client.get_redis_connection(n)) for n in client.get_primaries()]
    refused: dict[tuple[Any, ...], Refusal] = {}
    for name, node in nodes:
        try:
            found = _queued_refusals(node, [tuple(c) for c in commands])
        except (redis.ConnectionError, redis.TimeoutError, OSError, ReadOnlyError):
            if name is None:
                raise
            continue
        for command, reason in found:
            refused.setdefault(command, Refusal(command, reason, name))
    return list(refused.values())


# Commands Redis refuses inside a transaction before it checks the user's rights to them
NO_MULTI = frozenset({"WATCH"})


def _queued_refusals(
    node: redis.Redis, commands: list[tuple[Any, ...]]
) -> list[tuple[tuple[Any, ...], str]]:
    """``commands`` queued in a transaction on ``node`` then discarded: those refused. Those
    in :data:`NO_MULTI` are asked before it (``WATCH`` only marks keys of this connection)."""
    pool = node.connection_pool
    conn = pool.get_connection()
    watched = [c for c in commands if str(c[0]).upper() in NO_MULTI]
    try:
        *before, multi = _errors(conn, [*watched, ("MULTI",)])
        if isinstance(multi, NoPermissionError):
            return [(("MULTI",), str(multi))]
        errors = list(zip(watched, before, strict=True))
        if multi is None:  # else MULTI is renamed away: nothing more can be asked
            rest = [c for c in commands if c not in watched] + [("DISCARD",)]
            errors += zip(rest, _errors(conn, rest), strict=True)
        for _, exc in errors:  # (Redis checks the user's rights first: a replica's answer)
            if isinstance(exc, ReadOnlyError):
                raise exc
        return [(c, str(exc)) for c, exc in errors if isinstance(exc, NoPermissionError)]
    finally:
        conn.disconnect()  # never back to the pool inside a transaction
        pool.release(conn)


def _errors(conn: Any, batch: list[tuple[Any, ...]]) -> list[Exception | None]:
    """The error each command of ``batch``, sent at once, was answered (None: none)."""
    conn.send_packed_command(conn.pack_commands(batch))
    errors: list[Exception | None] = []
    for _ in batch:
        try:
            conn.read_response()
            errors.append(None)
        except redis.ResponseError as exc:
            errors.append(exc)
    return errors


def safe_url(settings: BaseSettings) -> str:
    """``REDIS_URL`` without its user and password, for messages and logs (an ACL user's name
    is half of its login)."""
    url = settings.get("REDIS_URL") or (
        f"redis://{settings.get('REDIS_HOST') or 'localhost'}:{settings.get('REDIS_PORT') or 6379}"
    )
    return without_credentials(url)


def worker_name() -> str:
    """This worker's name in leases and heartbeats: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"
