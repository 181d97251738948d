"""A hostile web server on loopback, for tests and benchmarks of the crawler's defenses.

A raw socket server (not ``http.server``) because most cases need byte-level control: a body
trickled one byte a second, headers that never end, a connection reset mid-body, a socket that
accepts and never answers. One listening socket per loopback address (127.0.0.x), all on one
port; one thread per connection, at most ``max_connections`` at a time (more are closed at once
and counted in ``overloaded``). Every request is recorded (host, path, start, end, bytes sent,
status) so tests judge the crawler from what the server saw.

Routes are per host, by path or path prefix (the longest prefix wins). A route is a function of the
request and the connection; the ``*`` factories below build the cases: slow and endless answers,
oversized bodies and decompression bombs, broken HTML, 429/503 with ``Retry-After``, and the
infinite URL spaces of spider traps (calendars, session ids, facets, growing paths).
Every response closes its connection, so a body without ``Content-Length`` ends with the socket.
"""

from __future__ import annotations

import contextlib
import errno
import random
import select
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import parse_qsl, urlencode

_BIND_ATTEMPTS = 20
_HEAD_LIMIT = 65536  # bytes of request head read at most


@dataclass(frozen=True)
class Hit:
    """One request as the server saw it (``time.monotonic()`` stamps).

    ``start``: the request head was read; ``end``: the answer ended (sent, reset, abandoned
    or cut by the server stopping). ``sent`` counts every byte written, head included.
    ``status`` 0: no status line was sent (a silent connection).
    """

    host: str
    port: int
    path: str
    start: float
    end: float
    sent: int
    status: int
    headers: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass
class Req:
    """What a route sees of a request."""

    host: str
    path: str  # with the query
    headers: dict[str, str]  # names lower-case
    server: HostileServer

    @property
    def base(self) -> str:
        return self.server.base(self.host)


class PeerGone(Exception):
    """The client closed the connection, or the server is stopping."""


class Conn:
    """The connection a route answers on; counts what it sends."""

    def __init__(self, sock: socket.socket, server: HostileServer) -> None:
        self.sock = sock
        self.server = server
        self.sent = 0
        self.status = 0

    def send(self, data: bytes) -> None:
        """Send all of ``data``; raises PeerGone if the client left or the server stops."""
        if self.server.stopping.is_set():
            raise PeerGone
        try:
            self.sock.sendall(data)
        except OSError:
            raise PeerGone from None
        self.sent += len(data)

    def head(
        self, status: int, headers: Iterable[tuple[str, str]] = (), *, reason: str = "X"
    ) -> None:
        self.status = status
        lines = [f"HTTP/1.1 {status} {reason}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def answer(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
        self.head(status, [*headers, ("Content-Length", str(len(body)))])
        self.send(body)

    def wait(self, seconds: float) -> None:
        """Sleep; raises PeerGone when the server stops meanwhile."""
        if self.server.stopping.wait(seconds):
            raise PeerGone

    def trickle(self, data: bytes, interval: float) -> None:
        """One byte every ``interval`` seconds."""
        for i in range(len(data)):
            self.send(data[i : i + 1])
            self.wait(interval)

    def reset(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0)."""
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raise PeerGone


Route = Callable[[Req, Conn], None]


class HostileServer:
    """Serves routes on loopback addresses (see the module docstring)."""

    def __init__(self, *, port: int = 0, max_connections: int = 64) -> None:
        self._requested_port = port
        self.port = 0
        self.routes: dict[str, dict[str, Route]] = {}
        self.stopping = threading.Event()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._hits: list[Hit] = []
        self._conns: set[socket.socket] = set()
        self._listeners: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.overloaded = 0

    # --- set-up ---

    def route(self, address: str, path: str, route: Route, *, prefix: bool = False) -> None:
        """Answer requests to ``address`` for ``path`` (the query left out), or with
        ``prefix=True`` every path that starts with it (the longest prefix wins)."""
        self.routes.setdefault(address, {})[path + ("*" if prefix else "")] = route

    def base(self, address: str) -> str:
        return f"http://{address}:{self.port}"

    def url(self, address: str, path: str = "/") -> str:
        return self.base(address) + path

    def __enter__(self) -> HostileServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for attempt in range(_BIND_ATTEMPTS):
            try:
                self._bind_all()
                break
            except OSError as exc:
                if (
                    exc.errno != errno.EADDRINUSE
                    or self._requested_port
                    or attempt == _BIND_ATTEMPTS - 1
                ):
                    raise
        for listener in self._listeners:
            thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _bind_all(self) -> None:
        port, listeners = self._requested_port, []
        try:
            for address in self.routes:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listeners.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, port))
                sock.listen(128)
                sock.settimeout(0.2)
                port = sock.getsockname()[1]
        except OSError:
            for sock in listeners:
                sock.close()
            raise
        self._listeners, self.port = listeners, port

    def stop(self) -> None:
        """Stop accepting, cut every open connection (silent and endless ones too), join."""
        self.stopping.set()
        for thread in self._threads:
            thread.join(timeout=5)
        for sock in self._listeners:
            sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.wait_idle()

    # --- records ---

    def wait_idle(self, timeout: float = 5) -> bool:
        """Wait until no connection is open: a client can have its answer a moment before the
        server has recorded it (the record is written when the connection ends)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._conns:
                    return True
            time.sleep(0.01)
        return False

    @property
    def hits(self) -> list[Hit]:
        with self._lock:
            return list(self._hits)

    def hits_of(self, address: str, prefix: str = "") -> list[Hit]:
        return sorted(
            (h for h in self.hits if h.host == address and h.path.startswith(prefix)),
            key=lambda h: h.start,
        )

    # --- serving ---

    def _accept(self, listener: socket.socket) -> None:
        address = listener.getsockname()[0]
        while not self.stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                with self._lock:
                    self.overloaded += 1
                sock.close()
                continue
            with self._lock:
                self._conns.add(sock)
            threading.Thread(target=self._serve, args=(sock, address), daemon=True).start()

    def _serve(self, sock: socket.socket, address: str) -> None:
        conn = Conn(sock, self)
        req: Req | None = None
        start = time.monotonic()
        try:
            sock.settimeout(10)
            req = self._read_request(sock, address)
            if req is None:
                return
            start = time.monotonic()
            self._route(address, req.path)(req, conn)
        except (PeerGone, OSError):
            pass
        finally:
            if req is not None:
                hit = Hit(address, self.port, req.path, start, time.monotonic(), conn.sent,
                          conn.status, req.headers)
                with self._lock:
                    self._hits.append(hit)
            with self._lock:
                self._conns.discard(sock)
            with contextlib.suppress(OSError):
                sock.close()
            self._slots.release()

    def _read_request(self, sock: socket.socket, address: str) -> Req | None:
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > _HEAD_LIMIT or self.stopping.is_set():
                return None
            chunk = sock.recv(4096)
            if not chunk:
                return None
            data += chunk
        lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return Req(address, parts[1], headers, self)

    def _route(self, address: str, path: str) -> Route:
        routes = self.routes.get(address, {})
        exact = routes.get(path.partition("?")[0])
        if exact is not None:
            return exact
        prefixes = (p for p in routes if p.endswith("*") and path.startswith(p[:-1]))
        best = max(prefixes, key=len, default=None)
        return routes[best] if best is not None else not_found


# --- plain answers ------------------------------------------------------------------------

HTML = [("Content-Type", "text/html; charset=utf-8")]


def not_found(req: Req, conn: Conn) -> None:
    conn.answer(404, HTML, b"<html><body>not found</body></html>")


def page(
    body: bytes | str, *, status: int = 200, headers: Iterable[tuple[str, str]] = HTML
) -> Route:
    data = body.encode() if isinstance(body, str) else body
    fixed = list(headers)

    def route(req: Req, conn: Conn) -> None:
        conn.answer(status, fixed, data)

    return route


def links_page(hrefs: Iterable[str], text: str = "") -> bytes:
    anchors = "".join(f'<a href="{h}">link {i}</a>\n' for i, h in enumerate(hrefs))
    return f"<html><head><title>t</title></head><body><p>{text}</p>{anchors}</body></html>".encode()


def normal_site(server: HostileServer, address: str, pages: int = 10) -> set[str]:
    """A small well-behaved site: ``/`` links ``/p/0.html`` ... each linking the next.
    Returns its paths."""
    paths = {"/", "/robots.txt", *(f"/p/{i}.html" for i in range(pages))}
    robots = page("User-agent: *\nAllow: /\n", headers=[("Content-Type", "text/plain")])
    server.route(address, "/robots.txt", robots)
    server.route(address, "/", page(links_page([f"/p/{i}.html" for i in range(pages)], "home")))
    for i in range(pages):
        text = f"page {i} of the normal site, " + " ".join(f"w{i}x{j}" for j in range(40))
        server.route(
            address, f"/p/{i}.html", page(links_page([f"/p/{(i + 1) % pages}.html"], text))
        )
    return paths


# --- slow and endless ---------------------------------------------------------------------


def trickled_body(size: int = 10_000, interval: float = 1.0) -> Route:
    """Honest headers, then the body one byte every ``interval`` seconds."""

    def route(req: Req, conn: Conn) -> None:
        conn.head(200, [*HTML, ("Content-Length", str(size))])
        conn.trickle(b"<html>" + b"x" * (size - 6), interval)

    return route


def trickled_headers(interval: float = 1.0) -> Route:
    """The status line, then header bytes one every ``interval`` seconds, never ending."""

    def route(req: Req, conn: Conn) -> None:
        conn.status = 200
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
        while True:
            conn.trickle(b"X-Slow: " + b"a" * 20 + b"\r\n", interval)

    return route


def endless_headers() -> Route:
    """Short header lines as fast as the client reads them, for ever."""

    def route(req: Req, conn: Conn) -> None:
        conn.status = 200
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
        block = b"".join(b"X-Junk-%d: %s\r\n" % (i, b"v" * 40) for i in range(1000))
        while True:
            conn.send(block)

    return route


def endless_body(chunk: int = 65536) -> Route:
    """A 200 with no Content-Length whose body never ends."""

    def route(req: Req, conn: Conn) -> None:
        conn.head(200, HTML)
        block = b"<p>" + b"y" * (chunk - 3)
        while True:
            conn.send(block)

    return route


def big_body(size: int = 50 * 1024 * 1024, *, declare_length: bool = True) -> Route:
    """A ``size``-byte HTML body, with or without an honest Content-Length."""

    def route(req: Req, conn: Conn) -> None:
        conn.head(200, [*HTML, *([("Content-Length", str(size))] if declare_length else [])])
        block = b"z" * 65536
        left = size
        while left > 0:
            conn.send(block[: min(left, len(block))])
            left -= len(block)

    return route


def silent() -> Route:
    """Accepts the request and never answers (until the client leaves or the server stops)."""

    def route(req: Req, conn: Conn) -> None:
        while True:
            readable, _, _ = select.select([conn.sock], [], [], 0.2)
            if readable and not conn.sock.recv(4096, socket.MSG_PEEK):
                return  # the client hung up
            conn.wait(0 if readable else 0.001)

    return route


def reset_mid_body(size: int = 100_000, after: int = 10_000) -> Route:
    """Promise ``size`` bytes, send ``after`` of them, then reset the connection."""

    def route(req: Req, conn: Conn) -> None:
        conn.head(200, [*HTML, ("Content-Length", str(size))])
        conn.send(b"<html>" + b"r" * (after - 6))
        conn.reset()

    return route


# --- decompression bombs ------------------------------------------------------------------

_BOMBS: dict[tuple[str, int], bytes] = {}


def bomb_body(encoding: str, size: int) -> bytes:
    """``size`` zero bytes compressed with ``encoding`` (gzip, deflate or br); cached."""
    key = (encoding, size)
    if key not in _BOMBS:
        block = b"\0" * (1 << 20)
        chunks = (block for _ in range(size // len(block)))
        if encoding == "gzip":
            body = _stream(zlib.compressobj(9, zlib.DEFLATED, 31), chunks)
        elif encoding == "deflate":
            body = _stream(zlib.compressobj(9), chunks)
        elif encoding == "br":
            import brotli

            compressor = brotli.Compressor(quality=5)
            body = b"".join(compressor.process(c) for c in chunks) + compressor.finish()
        else:
            raise ValueError(encoding)
        _BOMBS[key] = body
    return _BOMBS[key]


def _stream(compressor: zlib._Compress, chunks: Iterator[bytes]) -> bytes:
    return b"".join(compressor.compress(c) for c in chunks) + compressor.flush()


def bomb(encoding: str, size: int = 1 << 30) -> Route:
    """A small compressed body that expands to ``size`` bytes (1 GiB by default)."""

    def route(req: Req, conn: Conn) -> None:
        conn.answer(200, [*HTML, ("Content-Encoding", encoding)], bomb_body(encoding, size))

    return route


# --- redirects ----------------------------------------------------------------------------


def redirect_loop(prefix: str = "/loop/") -> Route:
    """``PREFIX a`` -> ``PREFIX b`` -> ``PREFIX a`` ..."""

    def route(req: Req, conn: Conn) -> None:
        target = prefix + ("b" if req.path.endswith("a") else "a")
        conn.answer(302, [("Location", target)], b"")

    return route


def redirect_chain(prefix: str = "/chain/", length: int = 100) -> Route:
    """``PREFIX 0`` -> ``PREFIX 1`` -> ... -> ``PREFIX length`` (a page)."""

    def route(req: Req, conn: Conn) -> None:
        n = int(req.path[len(prefix) :] or 0)
        if n >= length:
            conn.answer(200, HTML, b"<html><body>end of the chain</body></html>")
        else:
            conn.answer(301, [("Location", f"{prefix}{n + 1}")], b"")

    return route


# --- broken content -----------------------------------------------------------------------


def binary_junk(size: int = 200_000, seed: int = 1) -> Route:
    return page(random.Random(seed).randbytes(size))


def invalid_utf8() -> Route:
    body = b"<html><body><p>caf\xc3 \xff\xfe broken \xed\xa0\x80 surrogates</p>" + (
        b"<a href='/p/\xff\xfe'>x</a></body></html>"
    )
    return page(body)


def lying_charset() -> Route:
    """Says UTF-8 in the header, Shift_JIS in a meta, and is UTF-16."""
    body = "<html><head><meta charset='shift_jis'></head><body>hello \u00e9\u4e2d</body></html>"
    return page(body.encode("utf-16"))


def deep_nesting(levels: int = 5000) -> Route:
    body = (
        "<html><body>"
        + "<div>" * levels
        + "deep text <a href='/deep-link'>l</a>"
        + "</div>" * levels
        + "</body></html>"
    )
    return page(body)


def many_links(count: int = 200_000, prefix: str = "/many/") -> Route:
    return page(links_page(f"{prefix}{i}" for i in range(count)))


# --- 429 / 503 with Retry-After -----------------------------------------------------------


def retry_after(
    status: int, value: str | Callable[[], str] | None, then: Route, times: int = 1
) -> Route:
    """The first ``times`` requests get ``status`` (with ``Retry-After: value`` unless None;
    a callable gives the value per request, for HTTP dates), later ones ``then``."""
    lock, count = threading.Lock(), [0]

    def route(req: Req, conn: Conn) -> None:
        with lock:
            count[0] += 1
            refuse = count[0] <= times
        if not refuse:
            then(req, conn)
            return
        headers = list(HTML)
        if value is not None:
            headers.append(("Retry-After", value() if callable(value) else value))
        conn.answer(status, headers, b"<html><body>slow down</body></html>")

    return route


def http_date_in(seconds: float) -> Callable[[], str]:
    """A Retry-After value: the HTTP date ``seconds`` from the moment of the answer."""
    return lambda: format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)


# --- spider traps: infinite URL spaces ---------------------------------------------------


def calendar(prefix: str = "/cal/") -> Route:
    """``/cal/2026/11`` links the previous and next months, for ever in both directions."""

    def route(req: Req, conn: Conn) -> None:
        try:
            year, month = (int(x) for x in req.path[len(prefix) :].strip("/").split("/")[:2])
        except ValueError:
            year, month = date.today().year, date.today().month
        prev = (year, month - 1) if month > 1 else (year - 1, 12)
        nxt = (year, month + 1) if month < 12 else (year + 1, 1)
        hrefs = [f"{prefix}{y}/{m:02d}" for y, m in (prev, nxt)]
        conn.answer(200, HTML, links_page(hrefs, f"events of {year}-{month:02d}"))

    return route


def session_ids(prefix: str = "/s/", pages: int = 5) -> Route:
    """Every link carries a fresh ``?sid=...`` (a new URL for the same page each time)."""

    def route(req: Req, conn: Conn) -> None:
        sid = f"{random.getrandbits(128):032x}"
        hrefs = [f"{prefix}{i}?sid={sid}" for i in range(pages)]
        hrefs += [f"{prefix}{i};jsessionid={sid.upper()}" for i in range(pages)]
        conn.answer(200, HTML, links_page(hrefs, "session page"))

    return route


def facets(prefix: str = "/shop", names: str = "abcdefgh", values: int = 4) -> Route:
    """Every page links one more filter on top of its own: facet combinations without end."""

    def route(req: Req, conn: Conn) -> None:
        query = dict(parse_qsl(req.path.partition("?")[2]))
        hrefs = []
        for name in names:
            for v in range(values):
                if name not in query:
                    hrefs.append(f"{prefix}?{urlencode({**query, name: v})}")
        conn.answer(200, HTML, links_page(hrefs, f"products {sorted(query.items())}"))

    return route


def growing_path(prefix: str = "/g/") -> Route:
    """Any path under ``prefix`` links ``a/`` relative to itself: /g/a/a/a/... for ever."""
    return page(links_page(["a/", "b/../a/"], "grow"))


def relative_loop(prefix: str = "/loop2/") -> Route:
    """Links ``x/y/`` relative: /loop2/x/y/x/y/... (a broken relative link)."""
    return page(links_page(["x/y/", "../x/"], "loop"))


def generated_subdomains(domain: str = "trap.test", port: int = 80) -> Route:
    """Links to fresh subdomains of ``domain`` (names that do not resolve: for policy tests)."""

    def route(req: Req, conn: Conn) -> None:
        hrefs = [f"http://h{random.getrandbits(48):x}.{domain}:{port}/" for _ in range(10)]
        conn.answer(200, HTML, links_page(hrefs, "subdomains"))

    return route
