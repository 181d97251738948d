"""Seeds are taken off ``<site>:start_urls`` in a ``WATCH`` transaction that a push to the list
aborts (``crawler.backends.redis.inbox``): a producer pushing seeds one at a time while the
workers take them aborts one try after the other. Every try aborted is no failure of the
housekeeping it runs in (an error logged, the leases' renewal after it skipped): the inbox
comes back soon, and takes them once the list is quiet for a moment. On a real Redis, a push
made between each try's read and its transaction."""

from __future__ import annotations

from typing import Any

import pytest

from crawler.backends.redis import wire
from crawler.backends.redis.fence import WATCH_TRIES
from crawler.backends.redis.inbox import RedisScopeRegistry, SharedInbox
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


def test_a_take_that_pushes_abort_every_try_comes_back_soon(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = fresh_key()
    seeds = f"{key}:start_urls"
    with redis_server.client() as client, redis_server.client() as producer:
        client.rpush(seeds, *[f"https://a.test/{i}" for i in range(5)])
        got: list[str] = []
        inbox = SharedInbox(client, seeds, RedisScopeRegistry(client, f"{key}:scope"),
                            on_seeds=got.extend, on_scope=None)  # fmt: skip
        run, pushes = wire.one_connection.run, []

        def run_and_push(self: Any, commands: Any) -> Any:
            replies = run(self, commands)
            if commands[0][0] == "WATCH" and len(pushes) < WATCH_TRIES:
                pushes.append(producer.rpush(seeds, f"https://b.test/{len(pushes)}"))
            return replies

        monkeypatch.setattr(wire.one_connection, "run", run_and_push)
        assert inbox.poll() is True  # every try aborted: seeds still wait
        assert got == [] and len(pushes) == WATCH_TRIES
        assert inbox.poll() is False  # the list quiet: all of them, once
        assert len(set(got)) == len(got) == 5 + WATCH_TRIES
        assert client.llen(seeds) == 0
