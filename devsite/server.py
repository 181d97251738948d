"""HTTP server that plays several hosts, one loopback address each, on one port.

Every request is recorded with monotonic timestamps so tests can verify the
crawler's politeness from the server side: per-host concurrency, gaps between
requests and which paths were fetched how often.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import Any

from devsite.graph import Document, HostSpec, SiteGraph, build_site

_BIND_ATTEMPTS = 20


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it.

    ``start`` is taken when the request line has been read and ``end`` when the
    complete response is buffered, just before the single flush that hands it to
    the socket (``time.monotonic()``): a client can never hold a response whose
    record is missing or whose ``end`` is later than its next request's ``start``,
    even under GIL contention. ``status`` 0 means no response was sent (a "hang"
    host, or the server stopped mid-delay); ``bytes`` counts body bytes sent.
    """

    host: str
    port: int
    path: str
    method: str
    headers: dict[str, str]
    start: float
    end: float
    status: int
    bytes: int


class _State:
    """Bookkeeping shared by all host servers; one lock keeps it consistent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.records: list[RequestRecord] = []
        self.active: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.connections: set[socket.socket] = set()

    def begin(self, host: str) -> None:
        with self.lock:
            now = self.active.get(host, 0) + 1
            self.active[host] = now
            if now > self.peak.get(host, 0):
                self.peak[host] = now

    def end(self, host: str, record: RequestRecord) -> None:
        with self.lock:
            self.active[host] -= 1
            self.records.append(record)

    def add_connection(self, conn: socket.socket) -> bool:
        with self.lock:
            if self.stopping.is_set():
                return False
            self.connections.add(conn)
            return True

    def drop_connection(self, conn: socket.socket) -> None:
        with self.lock:
            self.connections.discard(conn)
            if not self.connections:
                self.idle.notify_all()


class _HostServer(ThreadingHTTPServer):
    """One listening socket for one simulated host."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, spec: HostSpec, port: int, site: SiteServer) -> None:
        self.spec = spec
        self.site = site
        super().__init__((spec.address, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup, which can stall without network.
        TCPServer.server_bind(self)
        self.server_name = self.spec.address
        self.server_port = self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection; HTTP/1.1 keep-alive, like the sites a crawler meets."""

    protocol_version = "HTTP/1.1"
    server: _HostServer
    disable_nagle_algorithm = True
    wbufsize = 1 << 17  # holds any whole response (big.bin is 64 KiB); see _serve
    _start = 0.0

    def setup(self) -> None:
        super().setup()
        self._registered = self.server.site._state.add_connection(self.connection)
        if not self._registered:
            self.close_connection = True
            self.rfile.close()

    def handle(self) -> None:
        if self._registered:
            super().handle()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            if self._registered:
                self.server.site._state.drop_connection(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def parse_request(self) -> bool:
        self._start = time.monotonic()
        return super().parse_request()

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _serve(self, *, head: bool) -> None:
        spec = self.server.spec
        state = self.server.site._state
        state.begin(spec.address)
        status, written, done = 0, 0, False
        try:
            if spec.mode == "hang":
                state.stopping.wait()
                self.close_connection = True
                return
            if spec.delay and state.stopping.wait(spec.delay):
                self.close_connection = True
                return
            status, headers, body = self.server.site.respond(self, spec, self._response)
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
                written = len(body)
            # The response sits in wfile's buffer until flush(), so recording first
            # guarantees no client sees it before its record and concurrency drop.
            self._record(status, written)
            done = True
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            if not done:
                self._record(status, written)

    def _record(self, status: int, written: int) -> None:
        spec = self.server.spec
        self.server.site._state.end(
            spec.address,
            RequestRecord(
                host=spec.address,
                port=self.server.server_port,
                path=self.path,
                method=self.command,
                headers=dict(self.headers.items()),
                start=self._start,
                end=time.monotonic(),
                status=status,
                bytes=written,
            ),
        )

    def _response(self, spec: HostSpec) -> tuple[int, list[tuple[str, str]], bytes]:
        if spec.mode == "error":
            return 500, [("Content-Type", "text/html; charset=utf-8")], _ERROR_BODY
        if spec.mode == "redirect":
            location = f"http://{spec.redirect_to}:{self.server.server_port}{self.path}"
            return 301, [("Location", location), ("Content-Type", "text/plain")], b""
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        doc = self.server.site._document(spec.address, path)
        if doc is None:
            return 404, [("Content-Type", "text/html; charset=utf-8")], _NOT_FOUND_BODY
        return 200, [("Content-Type", doc.content_type)], doc.body


_ERROR_BODY = b"<!DOCTYPE html><html><body><h1>500 Internal Server Error</h1></body></html>\n"
_NOT_FOUND_BODY = b"<!DOCTYPE html><html><body><h1>404 Not Found</h1></body></html>\n"


class SiteServer:
    """Serves a ``SiteGraph`` (or specs, with default graph options) on loopback.

    All hosts share one port so a URL differs between hosts only by address,
    like real sites on port 80. "refuse" hosts get no listener, and the port is
    checked to be free there too so connections really are refused.
    """

    def __init__(self, graph_or_specs: SiteGraph | Sequence[HostSpec], *, port: int = 0) -> None:
        if isinstance(graph_or_specs, SiteGraph):
            self.graph = graph_or_specs
        else:
            self.graph = build_site(list(graph_or_specs))
        self._requested_port = port
        self._state = _State()
        self._servers: list[_HostServer] = []
        self._threads: list[threading.Thread] = []
        self._cache: dict[tuple[str, str], Document | None] = {}
        self.port = 0

    def respond(
        self,
        handler: Any,
        spec: HostSpec,
        default: Callable[[HostSpec], tuple[int, list[tuple[str, str]], bytes]],
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """The answer to one request: ``(status, headers, body)``. Subclasses override it to
        answer differently (validators, 304s, routes); ``default`` gives the site's own answer.
        ``handler.path`` and ``handler.headers`` are the request's."""
        return default(spec)

    @property
    def stopping(self) -> threading.Event:
        """Set when the server stops: a slow answer waits on it so stop() is not held up."""
        return self._state.stopping

    def __enter__(self) -> SiteServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Bind every live host on one common port and start serving."""
        if self._servers or self._state.stopping.is_set():
            raise RuntimeError("a SiteServer can be started only once")
        for attempt in range(_BIND_ATTEMPTS):
            try:
                self._bind_all()
                break
            except OSError as exc:
                retry = exc.errno == errno.EADDRINUSE and self._requested_port == 0
                if not retry or attempt == _BIND_ATTEMPTS - 1:
                    raise
        self.graph.port = self.port
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"devsite-{server.spec.address}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def _bind_all(self) -> None:
        port = self._requested_port
        servers: list[_HostServer] = []
        probes: list[socket.socket] = []
        try:
            for spec in self.graph.hosts:
                if spec.mode == "refuse":
                    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    probes.append(probe)
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    probe.bind((spec.address, port))
                    port = probe.getsockname()[1]
                else:
                    servers.append(_HostServer(spec, port, self))
                    port = servers[-1].server_port
        except OSError:
            for server in servers:
                server.server_close()
            raise
        finally:
            for probe in probes:
                probe.close()
        self._servers = servers
        self.port = port

    def stop(self) -> None:
        """Stop accepting, abort hanging or delayed requests and close every connection."""
        state = self._state
        with state.lock:
            state.stopping.set()
        shutdowns = [threading.Thread(target=s.shutdown, daemon=True) for s in self._servers]
        for thread in shutdowns:
            thread.start()
        for thread in shutdowns + self._threads:
            thread.join(timeout=5)
        for server in self._servers:
            server.server_close()
        with state.lock:
            connections = list(state.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        with state.lock:
            state.idle.wait_for(lambda: not state.connections, timeout=5)
        self._servers = []
        self._threads = []

    def _document(self, address: str, path: str) -> Document | None:
        key = (address, path)
        try:
            return self._cache[key]
        except KeyError:
            doc = self.graph.resolve(address, path)
            if len(self._cache) < 100_000:
                self._cache[key] = doc
            return doc

    def base(self, address: str) -> str:
        """``http://ADDRESS:PORT`` of one host."""
        return f"http://{address}:{self.port}"

    def url(self, address: str, path: str = "/") -> str:
        """Absolute URL of ``path`` on ``address``."""
        return self.base(address) + path

    def seeds(self) -> list[str]:
        """The ``/`` URL of every host, in spec order."""
        return self.graph.seeds()

    @property
    def records(self) -> list[RequestRecord]:
        """Snapshot of all finished requests, in completion order; includes every
        response a client has already received."""
        with self._state.lock:
            return list(self._state.records)

    def records_for(self, host: str) -> list[RequestRecord]:
        """Finished requests to one host, ordered by start time."""
        return sorted((r for r in self.records if r.host == host), key=lambda r: r.start)

    def max_concurrency(self, host: str) -> int:
        """Most requests to ``host`` the server was handling at the same moment."""
        with self._state.lock:
            return self._state.peak.get(host, 0)

    def fetched_paths(self, host: str) -> list[str]:
        """Request paths (with query) sent to ``host``, by start time, duplicates kept."""
        return [r.path for r in self.records_for(host)]

    def reset(self) -> None:
        """Forget records and concurrency peaks (requests in flight still count)."""
        state = self._state
        with state.lock:
            state.records.clear()
            state.peak = dict(state.active)
