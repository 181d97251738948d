"""Wake-ups of idle workers: the frontier's scripts publish on the crawl's channel when a host
becomes ready sooner than idle workers expect, when the last lease drains, or when an operator
acts (``ctl``); a worker listens instead of polling Redis."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import redis


def listen(
    client: redis.Redis,
    channel: str,
    on_change: Callable[[], None],
    on_control: Callable[[], None],
) -> Callable[[], None]:
    """Listen on ``channel`` on a thread of its own with its own connection; blocked in a
    socket read, it costs Redis nothing while nothing happens. Every message calls
    ``on_change`` (an operator's, ``ctl``, calls ``on_control`` first); so does every
    (re)subscription, for whatever happened while not listening. A lost connection is retried
    every second (redis-py subscribes again). Returns the function that stops listening."""
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    stop = threading.Event()

    def run() -> None:
        subscribed = False
        while not stop.is_set():
            try:
                if not subscribed:
                    pubsub.subscribe(channel)
                    subscribed = True
                    on_change()  # whatever happened while not listening
                message = pubsub.get_message(timeout=1.0)
                if message is not None:
                    if message.get("data") == b"ctl":  # an operator acted
                        on_control()
                    on_change()
            except (redis.RedisError, OSError, ValueError):
                subscribed = False
                stop.wait(1.0)

    thread = threading.Thread(target=run, name="frontier-wake", daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join(3.0)
        with contextlib.suppress(redis.RedisError, OSError):
            pubsub.close()

    return close
