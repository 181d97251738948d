"""What a reactor-side Redis user keeps while Redis is away (``crawler.backends.redis.outage``:
``ActsAlone``) is sent once it is back, including what it kept while the outage's ``on_back``
was sending the rest: Redis answered the probe, but the callers were still answered alone
until the outage ended. On a real Redis."""

from __future__ import annotations

import time

import redis

from crawler.backends.redis.inbox import RedisScopeRegistry
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


def test_a_host_kept_while_the_kept_ones_are_sent_is_sent_too(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key = f"{fresh_key()}:scope"
    with redis_server.client() as direct:
        scope = RedisScopeRegistry(redis_server.client(), key)
        outage = scope.alone.outage
        send_kept, calls = outage.on_back, []

        def sent_then_one_more_kept() -> None:
            assert send_kept is not None
            send_kept()
            calls.append(True)
            if len(calls) == 1:  # the reactor adds a host now: still answered alone
                scope.add("late.test")

        outage.on_back = sent_then_one_more_kept
        scope.add("early.test")
        outage.went_away(redis.ConnectionError("away"))  # (its probe finds Redis at once)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (outage.away or not calls):
            time.sleep(0.01)
        assert calls and not outage.away
        while time.monotonic() < deadline and not direct.sismember(key, "late.test"):
            time.sleep(0.05)
        assert direct.smembers(key) == {b"early.test", b"late.test"}
        assert scope.load() == {"early.test", "late.test"}
        scope.close()
