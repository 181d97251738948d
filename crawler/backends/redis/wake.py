"""Wake-ups of idle workers, heard instead of polling Redis: letters sent to a partition's
inbox, partitions handed back, an operator's act (``ctl``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

import redis


def listen(
    client: redis.Redis,
    channels: Sequence[str],
    on_change: Callable[[], None],
    on_control: Callable[[], None],
    on_channel: Callable[[str | None], None],
) -> Callable[[], None]:
    """Listen on ``channels`` on a thread of its own. Every message calls ``on_channel`` with
    its channel, then ``on_change`` (``ctl`` calls ``on_control`` first); so does every
    (re)subscription (``on_channel(None)``), for whatever happened while not listening. A lost
    connection is retried every second. Returns what stops listening."""
    # a new PubSub at each retry: a cluster's keeps the pool of the node it first used, which
    # a failover may have taken away
    holder = [client.pubsub(ignore_subscribe_messages=True)]
    stop = threading.Event()

    def run() -> None:
        subscribed = False
        while not stop.is_set():
            pubsub = holder[0]
            try:
                if not subscribed:
                    pubsub.subscribe(*channels)
                    subscribed = True
                    on_channel(None)
                    on_change()  # whatever happened while not listening
                message = pubsub.get_message(timeout=1.0)
                if message is not None:
                    if message.get("data") == b"ctl":  # an operator acted
                        on_control()
                    name = message.get("channel")
                    on_channel(name.decode() if isinstance(name, bytes) else name)
                    on_change()
            except (redis.RedisError, OSError, ValueError):
                subscribed = False
                with contextlib.suppress(redis.RedisError, OSError):
                    pubsub.close()
                stop.wait(1.0)
                with contextlib.suppress(redis.RedisError, OSError):
                    holder[0] = client.pubsub(ignore_subscribe_messages=True)

    thread = threading.Thread(target=run, name="frontier-wake", daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join(3.0)
        with contextlib.suppress(redis.RedisError, OSError):
            holder[0].close()

    return close
