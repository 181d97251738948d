"""The start-up ACL probe (``RedisFrontierStore.check_server``) covers every command the crawl
runs: the commands are found in the code (redis-py's calls on a client or pipeline, the fenced
writes, ``execute_command``, the Lua scripts' ``redis.call``, and what redis-py sends for them:
a script loaded, a transaction, a key watched), so a command added to the crawl and not to the
probe fails here. And each probe is a valid call (a probe of the wrong arity is refused for its
arity before the user's rights are looked at: it would pass whatever the rights), checked on a
real Redis.
"""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from redis.commands.bf import commands as bloom_commands
from scrapy.settings import Settings

from crawler.backends.redis import connection, frontier_store
from crawler.backends.redis.connection import NO_MULTI
from crawler.backends.redis.frontier_store import RedisFrontierStore
from crawler.backends.redis.seenset import has_bloom_module
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "crawler" / "backends" / "redis"
# the names a Redis client or pipeline goes by in the crawl's code
CLIENTS = {"client", "pipe", "node", "server", "conn"}
# commands whose first word is a container: the second names the command
CONTAINERS = {"CLIENT", "CLUSTER", "COMMAND", "CONFIG", "MEMORY", "SCRIPT", "XGROUP", "XINFO"}
# what redis-py sends for a call besides its own command
IMPLIED = {
    "register_script": {"EVALSHA", "SCRIPT LOAD"},  # a Script loads itself when missing
    "watch": {"WATCH"},
    "scan_iter": {"SCAN"},
    "hscan_iter": {"HSCAN"},
    "subscribe": {"SUBSCRIBE"},
}
# not probed, and why
UNPROBED = {
    "MULTI": "the probe's own transaction: refused, it is the one refusal",
    "EXEC": "the end of a transaction (@transaction, as MULTI): would run the probes",
    "DISCARD": "the end of the probe's own transaction (@transaction, as MULTI)",
    "CLUSTER SLOTS": "probed on a cluster only (tests/test_redis_acl.py's cluster tests)",
}


def command_name(words: tuple[Any, ...]) -> str:
    first = str(words[0]).upper()
    if first in CONTAINERS and len(words) > 1:
        return f"{first} {str(words[1]).upper()}"
    return first


NAME = r'([A-Z][A-Z.]+(?: [A-Z]+)?)"'  # a command's name in redis-py's source


@cache
def redis_py_commands() -> dict[str, str]:
    """redis-py's method name -> the command it sends, read from its source."""
    out: dict[str, str] = {}
    classes = [redis.Redis] + [
        getattr(bloom_commands, n) for n in dir(bloom_commands) if n.endswith("Commands")
    ]
    for cls in classes:
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_"):
                continue
            try:
                source = inspect.getsource(fn)
            except (OSError, TypeError):
                continue
            found = re.search(r'execute_command\(\s*"' + NAME, source)
            found = found or re.search(r'pieces[^=\n]*=\s*\[\s*"' + NAME, source)
            if found:
                out.setdefault(name, command_name(tuple(found.group(1).split())))
    return out


def commands_in_lua() -> set[str]:
    found = set()
    for path in (CODE / "lua").glob("*.lua"):
        for name in re.findall(r"redis\.p?call\(\s*'([A-Za-z.]+)'", path.read_text()):
            found.add(name.upper())
    return found


def commands_in_python() -> set[str]:
    """Calls on a client or pipeline, fenced writes and raw commands of the crawl's code."""
    methods = redis_py_commands()
    names = {name.split()[0] for name in methods.values()} | {"MULTI", "EXEC", "UNWATCH"}
    found: set[str] = set()
    for path in CODE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple):  # a raw command: ("WATCH", *keys)
                words = tuple(e.value for e in node.elts if isinstance(e, ast.Constant))
                if words and isinstance(words[0], str) and words[0] in names:
                    found.add(command_name(words))
                continue
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr = node.func.attr
            literals = tuple(
                a.value for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )  # fmt: skip
            if attr in ("write", "execute_command", "send_command") and literals:
                if literals[0].isupper() and node.args[0].value == literals[0]:  # type: ignore[attr-defined]
                    found.add(command_name(literals))
                continue
            if attr == "pipeline":
                transaction = [k for k in node.keywords if k.arg == "transaction"]
                if transaction and getattr(transaction[0].value, "value", False) is True:
                    found |= {"MULTI", "EXEC"}
                continue
            if attr in IMPLIED:
                found |= IMPLIED[attr]
                continue
            receiver = ast.unparse(node.func.value).rsplit(".", 1)[-1]
            if receiver in CLIENTS and attr in methods:
                found.add(methods[attr])
    return found


def probes(client: redis.Redis, bloom: bool) -> dict[tuple[Any, ...], str | None]:
    """Every probe of a crawl whose writes wait for a replica (ROLE and WAIT probed too)."""
    store = RedisFrontierStore(Settings({"FRONTIER_REPLICA_WAIT": 1}), fresh_key())
    return store._acl_probes(bloom, client)


def test_the_scan_finds_what_it_should() -> None:
    """The scan of the code finds the commands known to be there (so a broken scan does not
    pass the test below by finding nothing)."""
    found = commands_in_python() | commands_in_lua()
    known = {"XGROUP CREATE", "XAUTOCLAIM", "XACK", "WATCH", "SCRIPT LOAD", "EVALSHA", "SET",
             "HSET", "ROLE", "WAIT", "TIME", "BF.MADD", "PUBLISH", "CONFIG GET", "MULTI",
             "EXEC", "UNWATCH"}  # fmt: skip
    assert known <= found


def test_every_command_the_crawl_runs_is_probed(redis_client: redis.Redis) -> None:
    found = commands_in_python() | commands_in_lua()
    probed = {command_name(p) for p in probes(redis_client, bloom=True)}
    missing = found - probed - set(UNPROBED)
    assert not missing, f"add to frontier_store.KEY_COMMANDS/KEYLESS_COMMANDS: {sorted(missing)}"


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Any:  # noqa: F811
    c = redis_server.client()
    yield c
    c.close()


def test_every_probe_is_a_valid_call(redis_client: redis.Redis) -> None:
    """Queued in a transaction (then discarded) by a user with every right, each probe is
    QUEUED: none is refused for its arity or as unknown. RedisBloom's only where it runs."""
    bloom = has_bloom_module(redis_client)
    conn = redis_client.connection_pool.get_connection()
    try:
        for command in probes(redis_client, bloom):
            if command_name(command) in NO_MULTI:
                conn.send_command(*command)
                assert conn.read_response() == b"OK", command
                continue
            conn.send_command("MULTI")
            assert conn.read_response() == b"OK"
            conn.send_command(*command)
            assert conn.read_response() == b"QUEUED", command
            conn.send_command("DISCARD")
            assert conn.read_response() == b"OK"
    finally:
        conn.disconnect()
        redis_client.connection_pool.release(conn)


def test_the_start_up_checks_close_every_client_they_open(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``preflight`` (the wait, the probes, the crawl's stored settings) leaves no connection
    open behind it: a worker would otherwise hold them for its whole crawl."""
    opened, closed = [], []

    def spied(settings: Any, **overrides: Any) -> Any:
        client = connection.redis_client(settings, **overrides)
        opened.append(client)
        close = client.close
        client.close = lambda: (closed.append(client), close())[1]  # type: ignore[method-assign]
        return client

    monkeypatch.setattr(frontier_store, "redis_client", spied)
    settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
                         "REDIS_CLUSTER": "no", "FRONTIER_REDIS_KEY": fresh_key()})
    crawler = SimpleNamespace(settings=settings, spidercls=SimpleNamespace(name="web"))
    assert RedisFrontierStore.preflight(crawler) == []
    assert len(opened) >= 2
    assert {id(c) for c in closed} == {id(c) for c in opened}


def test_an_error_reply_is_not_called_unreachable(redis_server: RedisServer) -> None:  # noqa: F811
    """Redis answers, with an error (the crawl's meta key holds another type): the refusal
    says so, not that Redis is not reachable."""
    key = fresh_key()
    settings = Settings({"REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
                         "REDIS_CLUSTER": "no", "FRONTIER_REDIS_KEY": key})
    store = RedisFrontierStore(settings, "web")
    redis_server.client().set(store.keys.meta, "not a hash")
    [refusal] = store.check_server()
    assert "answered the start-up checks with an error" in refusal and "WRONGTYPE" in refusal
