"""Many host names on few addresses, as shared hosting serves them: one HTTP server per address,
answering by the ``Host`` header, recording every request (name, path, start, end).

Each name serves ``/`` (links to its ``pages`` pages and to the next names' home pages, so a
crawl seeded with one name finds them all) and ``/p/<i>.html`` (a link back home), and allows
everything in ``/robots.txt``. With the DNS server of ``devsite.dnsserver`` mapping the names to
the addresses, a crawl meets what it meets on the web: names it must resolve, servers it must not
hammer whatever names they answer under.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer


@dataclass(frozen=True)
class Visit:
    name: str
    address: str
    path: str
    start: float
    end: float


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        TCPServer.server_bind(self)  # no reverse lookup of the address (no network here)


class NamedSites:
    """``names`` spread round-robin over ``addresses``, all on ``port`` (0: a free one, the
    same on every address), ``pages`` pages per name, each answered after ``latency`` s."""

    def __init__(
        self,
        names: Sequence[str],
        addresses: Sequence[str] = ("127.0.0.1",),
        *,
        pages: int = 5,
        latency: float = 0.0,
        port: int = 0,
        fan_out: int = 3,
    ) -> None:
        self.names = [n.lower() for n in names]
        self.address_of = {n: addresses[i % len(addresses)] for i, n in enumerate(self.names)}
        self.pages = pages
        self.latency = latency
        self.fan_out = fan_out
        self.visits: list[Visit] = []
        self._lock = threading.Lock()
        self._servers: list[_Server] = []
        self.port = port
        for address in dict.fromkeys(addresses):
            server = _Server((address, self.port), self._handler())
            self.port = server.server_address[1]
            self._servers.append(server)
        self._threads = [
            threading.Thread(target=s.serve_forever, daemon=True) for s in self._servers
        ]

    def url(self, name: str, path: str = "/") -> str:
        return f"http://{name}:{self.port}{path}"

    def start(self) -> NamedSites:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        # each shutdown waits for its server's next poll: all at once, not a thousand in a row
        stoppers = [threading.Thread(target=s.shutdown) for s in self._servers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        for s in self._servers:
            s.server_close()

    def __enter__(self) -> NamedSites:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def page(self, name: str, path: str) -> tuple[int, bytes]:
        if name not in self.address_of:
            return 404, b"unknown host"
        if path == "/robots.txt":
            return 200, b"User-agent: *\nAllow: /\n"
        if path == "/":
            i = self.names.index(name)
            others = [self.names[(i + k) % len(self.names)] for k in range(1, self.fan_out + 1)]
            links = [f'<a href="/p/{p}.html">page {p}</a>' for p in range(self.pages)]
            links += [f'<a href="{self.url(o)}">{o}</a>' for o in others if o != name]
            return 200, _html(name, links)
        if path.startswith("/p/") and path.endswith(".html"):
            return 200, _html(f"{name} {path}", ['<a href="/">home</a>'])
        return 404, b"not found"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sites = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                start = time.monotonic()
                name = (self.headers.get("Host") or "").rpartition(":")[0].lower()
                if sites.latency:
                    time.sleep(sites.latency)
                status, body = sites.page(name, self.path)
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                address = self.server.server_address[0]
                with sites._lock:
                    sites.visits.append(
                        Visit(name, str(address), self.path, start, time.monotonic())
                    )

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _html(title: str, links: Sequence[str]) -> bytes:
    body = "".join(f"<p>{link}</p>\n" for link in links)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>\n"
        f"<body><h1>{title}</h1>\n<p>Words about {title} for the index.</p>\n{body}</body></html>\n"
    ).encode()
