"""A loopback TCP proxy in front of a real Redis that loses replies: the partial failure of a
connection dropped after Redis applied a command and before its reply reached the client.

:class:`ReplyCutter` forwards every byte both ways, except that once armed with a marker
(:meth:`ReplyCutter.cut_after`), the first client packet holding the marker is forwarded to
Redis, the reply Redis sends to it is swallowed, and both sides of that connection are closed:
the client sees a ``ConnectionError`` for a command Redis did apply. Armed to drop
(:meth:`ReplyCutter.drop_at`), the packet is not forwarded at all: the same error, for a
command Redis never got. Later connections pass untouched (the client reconnects as after
any drop).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


@dataclass
class ReplyCutter:
    """The proxy: ``port`` on 127.0.0.1 leads to ``target`` (host, port)."""

    target: tuple[str, int]
    port: int = 0
    cuts: int = 0  # replies swallowed so far
    _markers: list[bytes] = field(default_factory=list)
    _drops: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket | None = None
    _sockets: list[socket.socket] = field(default_factory=list)

    def cut_after(self, marker: bytes) -> None:
        """Swallow the reply to the next client packet that holds ``marker`` (once)."""
        with self._lock:
            self._markers.append(marker)

    def drop_at(self, marker: bytes) -> None:
        """Drop the next client packet that holds ``marker`` (once), unsent, with both sides
        of its connection: a request lost on its way, which Redis never ran."""
        with self._lock:
            self._drops.append(marker)

    def client(self, retries: int = 0) -> redis.Redis:
        """A client through the proxy that does not resend a command by itself (``retries``
        0: the caller sees the lost reply). The crawl's own client on one Redis
        (crawler.backends.redis.connection, scrapy-redis's ``retry_on_timeout``) resends
        once, as ``retries=1`` does; its cluster client resends too."""
        return redis.Redis(host="127.0.0.1", port=self.port, retry=Retry(NoBackoff(), retries))

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for sock in list(self._sockets):
            _close(sock)

    def _armed(self, data: bytes, markers: list[bytes] | None = None) -> bool:
        with self._lock:
            markers = self._markers if markers is None else markers
            for marker in markers:
                if marker in data:
                    markers.remove(marker)
                    return True
        return False

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                near, _ = self._listener.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            self._sockets += [near, far]
            cut = threading.Event()
            threading.Thread(target=self._up, args=(near, far, cut), daemon=True).start()
            threading.Thread(target=self._down, args=(far, near, cut), daemon=True).start()

    def _up(self, near: socket.socket, far: socket.socket, cut: threading.Event) -> None:
        """Client to Redis: a packet with the marker arms the cut before it goes on, so the
        reply cannot pass first."""
        try:
            while data := near.recv(65536):
                if self._armed(data, self._drops):
                    self.cuts += 1
                    _close(near)
                    break
                if self._armed(data):
                    cut.set()
                far.sendall(data)
        except OSError:
            pass
        _close(far)

    def _down(self, far: socket.socket, near: socket.socket, cut: threading.Event) -> None:
        """Redis to client: once cut, the next reply is dropped with the connection."""
        try:
            while data := far.recv(65536):
                if cut.is_set():
                    self.cuts += 1
                    break
                near.sendall(data)
        except OSError:
            pass
        _close(near)
        _close(far)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def reply_cutter(port: int) -> Iterator[ReplyCutter]:
    """A :class:`ReplyCutter` in front of the Redis on ``port``, stopped at the end."""
    proxy = ReplyCutter(("127.0.0.1", port))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
