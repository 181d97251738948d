"""Redis round trips and failed calls of this process, counted where every Redis call of every
component passes: redis-py's connection (one ``send_packed_command`` per command or pipeline,
i.e. per round trip). Counting there, not in each component, catches them all (the frontier's
worker, the robots.txt cache, near-duplicates, the heartbeat) with one lock-protected increment
per round trip (~0.1 µs beside a ~60 µs round trip).

Installed once per process by :func:`install` (the worker's metrics extension calls it when
``METRICS_PORT`` is set); without it nothing is wrapped. Errors are the transport's: a lost or
refused connection (once per connection attempt), a timeout (an error reply is the caller's
business, not an outage).
"""

from __future__ import annotations

import threading
from typing import Any

import redis

__all__ = ["RedisCalls", "install"]


class RedisCalls:
    """Process-wide counts, readable from any thread."""

    def __init__(self) -> None:
        self.round_trips = 0
        self.errors = 0
        self._lock = threading.Lock()

    def trip(self) -> None:
        with self._lock:
            self.round_trips += 1

    def error(self) -> None:
        with self._lock:
            self.errors += 1


COUNTS = RedisCalls()
_FAILURES = (redis.ConnectionError, redis.TimeoutError)
_installed = False
_install_lock = threading.Lock()


def install() -> RedisCalls:
    """Wrap redis-py's connection class (once per process); returns the counts."""
    global _installed
    with _install_lock:
        if _installed:
            return COUNTS
        from redis.connection import AbstractConnection

        send = AbstractConnection.send_packed_command
        read = AbstractConnection.read_response
        connect = AbstractConnection.connect

        def connect_counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return connect(self, *args, **kwargs)
            except _FAILURES:
                COUNTS.error()
                raise

        def send_packed_command(self: Any, command: Any, check_health: bool = True) -> Any:
            COUNTS.trip()
            try:
                return send(self, command, check_health)
            except _FAILURES:
                COUNTS.error()
                raise

        def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return read(self, *args, **kwargs)
            except _FAILURES:
                COUNTS.error()
                raise

        AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
        AbstractConnection.read_response = read_response  # type: ignore[method-assign]
        AbstractConnection.connect = connect_counted  # type: ignore[method-assign]
        _installed = True
        return COUNTS
